"""The suite's own layout and machinery: a test module shares through conftest (fixtures),
support and fuzzing (helpers), never by importing another test module, whose tests pytest
would then collect twice under two names and whose edits would break a neighbour; the
session's background jobs reach every pytest-xdist worker."""

import ast
import os

from support import ROOT


def test_no_test_module_imports_another():
    offenders = []
    for path in sorted((ROOT / "tests").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.name}: {name}" for name in names
                          if name.split(".")[0].startswith("test_") or name == "conftest"]
    assert offenders == []


def test_background_jobs_reach_the_other_xdist_workers_through_the_board(tmp_path):
    """One worker runs the jobs and publishes each outcome; another reads the values and
    the errors, and is told when the owner ended without publishing a job."""
    import subprocess
    import sys
    import threading

    import pytest

    from support import Background, PublishedJobs

    def fails(launch):
        raise ValueError("no corpus")

    sleeping = threading.Event()

    def sleeps(launch):
        process = launch([sys.executable, "-c", "import time; time.sleep(60)"])
        sleeping.set()
        process.wait()
        return "killed"

    jobs = Background(tmp_path, others=["gw1"])
    jobs.add("run", lambda launch: {"path": tmp_path / "run"})
    jobs.add("export", fails, after=["run"])
    jobs.add("long", sleeps, early=True)
    jobs.start()
    remote = PublishedJobs(tmp_path, ["run", "export", "long"], owner=os.getpid())
    assert remote.result("run") == {"path": tmp_path / "run"} == jobs.result("run")
    with pytest.raises(ValueError, match="no corpus"):
        remote.result("export")
    with pytest.raises(LookupError):
        remote.result("tiny_run")
    assert sleeping.wait(60)
    # The owner ends its jobs only once the other worker is done: it may still need one.
    stopper = threading.Thread(target=jobs.stop)
    stopper.start()
    stopper.join(1.0)
    assert stopper.is_alive() and jobs.processes[0].poll() is None
    (tmp_path / "finished-gw1").touch()
    stopper.join(30)
    assert not stopper.is_alive() and jobs.processes[0].poll() is not None

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    with pytest.raises(RuntimeError, match="ended first"):
        PublishedJobs(tmp_path / "elsewhere", ["run"], owner=gone.pid).result("run")


def test_claim_is_won_once(tmp_path):
    from support import claim, claimed_by

    assert claim(tmp_path / "owner") and not claim(tmp_path / "owner")
    assert claimed_by(tmp_path / "owner") == os.getpid()


def test_the_quick_tier_leaves_out_every_test_of_a_trained_run_or_export(request):
    """The marker the quick tier deselects: set on the tests that need the session's
    background jobs (tiny_run, its exports) or a module's END_TO_END_FIXTURES, and on
    none of this module's own."""
    session = request.session
    marked = {item.nodeid for item in session.items
              if item.get_closest_marker("end_to_end") is not None}
    needing = {item.nodeid for item in session.items
               if {"tiny_run", "tiny_export", "tiny_selecting_export"} & set(item.fixturenames)}
    assert needing <= marked
    assert request.node.get_closest_marker("end_to_end") is None
    # Collected over the whole suite, the rule finds tests to leave out.
    if len(session.items) > 100:
        assert needing
