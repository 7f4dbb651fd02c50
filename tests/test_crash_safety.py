"""Crash safety: SIGKILL at named points (the KERAS_NMT_TEST_HOOK test hook, see
keras_nmt/core/faults.py), a torn checkpoint, a full disk, a diverging loss. Every time,
``--resume`` must find a complete checkpoint and the run must finish."""

import json
import math
import re
import shutil
import signal
import sys
import typing
from pathlib import Path

import pytest
import tensorflow as tf

from keras_nmt.core.faults import HOOK_ENV
from keras_nmt.rundir.model_weights import checkpoint_problem
from support import ROOT, run_logged, tiny_args

TRAIN_ARGS = tiny_args(shuffle_buffer=100, checkpoint_every=2, eval_every=3)
STEPS = 12

# (hook, how the process ends, the step the next --resume must start from). The run
# checkpoints every 2 steps and evaluates every 3; a step is a count of updates done.
KILLED = -signal.SIGKILL
ALL_FAILURES = [
    ("step@3", KILLED, 2),                      # between checkpoints
    ("checkpoint-start@4", KILLED, 2),          # before the checkpoint is written
    ("checkpoint-writing@4", KILLED, 2),        # while its shards are written (or just after)
    ("checkpoint-data-written@4", KILLED, 2),   # data complete, state file not yet updated
    ("checkpoint-state-written@4", KILLED, 4),  # state file names step 4
    ("evaluation@6", KILLED, 4),                # during the development evaluation
    ("best-data-written@6", KILLED, 4),         # best weights written, their state not
    ("checkpoint-state-written@8", KILLED, 6),  # then the test tears ckpt-8: back to 6
    ("checkpoint-start@10:nospace", 2, 8),      # the disk is full from step 10 on
    ("write:summary.json", KILLED, STEPS),      # training done, report being written
]
# Each point costs a process start (~10 s): the default run tries six of them (a kill
# between checkpoints, a kill mid-write, a kill between the data and the state file, a
# torn checkpoint, a full disk, a kill in the report's write), `-m slow` all ten.
QUICK = {"step@3", "checkpoint-writing@4", "checkpoint-data-written@4",
         "checkpoint-state-written@8", "checkpoint-start@10:nospace", "write:summary.json"}


class Run(typing.NamedTuple):
    """One train.py process of a chain: its hook, exit status, output (stdout and stderr)
    and a copy of the run's checkpoints directory as the process left it."""

    hook: str | None
    returncode: int
    output: str
    checkpoints: Path


def failures(points: str) -> list:
    return [f for f in ALL_FAILURES if points == "all" or f[0] in QUICK]


def chain(context, points: str):
    """The background job of a chain (conftest.BackgroundContext): train.py (not --quiet:
    the test reads where it resumed from the log) failing at each point in turn, each run
    resuming the one before, then a run that finishes: [Run]. Processes of their own: a
    kill, or a full disk whose file size limit would stay."""
    directory = context.tmp_path_factory.mktemp(f"crash-{points}")
    out = directory / "run"
    hooks = [hook for hook, _, _ in failures(points)] + [None]

    def work(launch) -> tuple[Path, list[Run]]:
        runs = []
        for number, hook in enumerate(hooks):
            args = ["--variant", "search30", "--out", out, "--max-steps", STEPS, "--no-lexicon",
                    *TRAIN_ARGS, *(["--resume"] if number else ["--data", context.corpus])]
            env = {**context.env, HOOK_ENV: hook} if hook else context.env
            if hook and hook.endswith(":nospace"):
                # A process that may not grow a file cannot save its line coverage at
                # exit either (a traceback, an empty data file): it runs unmeasured.
                env = {key: value for key, value in env.items()
                       if not key.startswith("COVERAGE_PROCESS_")}
            code, output = run_logged([sys.executable, ROOT / "train.py", *args],
                                      directory / f"{number}.log", env, launch, timeout=300)
            copy = directory / f"checkpoints-{number}"
            if (out / "checkpoints").exists():
                shutil.copytree(out / "checkpoints", copy)
            runs.append(Run(hook, code, output, copy))
            if hook == "checkpoint-state-written@8":
                data = next((out / "checkpoints").glob("ckpt-8.data-*"))
                data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])  # a torn write
        return out, runs

    return work


BACKGROUND_JOBS = {"crash_chain": lambda context: chain(context, "quick"),
                   "crash_chain_all": lambda context: chain(context, "all")}


@pytest.fixture(scope="session")
def crash_chain(_background):
    """The chain of the default run's points: (run directory, [Run]); its processes start
    with the session (a background job, see conftest.py)."""
    return _background.result("crash_chain")


@pytest.fixture(scope="session")
def crash_chain_all(_background):
    """The chain of every point: (run directory, [Run])."""
    return _background.result("crash_chain_all")


def named_checkpoints(checkpoints: Path) -> list[str]:
    state = tf.train.get_checkpoint_state(str(checkpoints))
    return list(state.all_model_checkpoint_paths) if state else []


def resumed_step(run: Run) -> int:
    return int(re.search(r"resumed at step (\d+)", run.output).group(1))


def assert_checkpoints_complete(checkpoints: Path) -> None:
    """Every checkpoint the state file names reads back intact; nothing else is there
    but the state file (a left-over from a killed save is removed on resume)."""
    for path in named_checkpoints(checkpoints):
        assert checkpoint_problem(path) is None, path


def assert_every_resume_finds_a_complete_checkpoint(points, out, runs):
    for (hook, exit_status, resume_step), result, after in zip(failures(points), runs, runs[1:]):
        assert result.hook == hook
        assert result.returncode == exit_status, (hook, result.output[-3000:])
        assert "Traceback" not in result.output, (hook, result.output[-3000:])
        assert_checkpoints_complete(result.checkpoints)
        if hook.endswith(":nospace"):
            errors = [line for line in result.output.splitlines() if line.startswith("train.py")]
            assert errors == [
                f"train.py: error: cannot write the checkpoint of step 10 in {out}: File too large; "
                "the last complete checkpoint is step 8; free space (or fix the permissions) and "
                "continue with --resume"
            ], result.output[-3000:]
        if hook == "checkpoint-writing@4":
            # Killed with the shards half-written (the usual case) or, if the write
            # outran the watcher, with ckpt-4 complete but not yet in the state file.
            mid_write = (result.checkpoints / "ckpt-4_temp").exists()
            print(f"checkpoint-writing@4: killed {'mid-write' if mid_write else 'after the write'}")
            assert mid_write or "ckpt-4" not in str(named_checkpoints(result.checkpoints))
        # (After checkpoint-state-written@8, the job tore ckpt-8's data file in two.)
        assert resumed_step(after) == resume_step, (hook, after.output[-3000:])
        if hook == "checkpoint-state-written@8":
            assert "ckpt-8 is incomplete or unreadable" in after.output
            assert "using the one before it" in after.output
        if hook.startswith("checkpoint-writing"):
            # Whichever way the kill fell, no temporary shard directory survives a resume.
            assert not list(after.checkpoints.glob("*_temp"))
    final = runs[-1]
    assert len(runs) == len(failures(points)) + 1 and final.hook is None
    assert final.returncode == 0, final.output[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["updates"] == STEPS
    assert_checkpoints_complete(out / "checkpoints")
    assert not [p.name for p in out.rglob("*.tmp*")]


def test_failure_at_every_point_then_resume_finishes(crash_chain):
    assert_every_resume_finds_a_complete_checkpoint("quick", *crash_chain)


@pytest.mark.slow
def test_failure_at_every_point_then_resume_finishes_all_points(crash_chain_all):
    assert_every_resume_finds_a_complete_checkpoint("all", *crash_chain_all)


def test_huge_learning_rate_diverges_and_names_the_checkpoint(tmp_path):
    from support import fixed_batch_trainer as _trainer

    from keras_nmt.core.errors import TrainingDiverged
    from keras_nmt.training import TrainingBudget

    trainer = _trainer(tmp_path, optimizer="sgd", learning_rate=1e30, checkpoint_every=1)
    trainer.save()
    with pytest.raises(TrainingDiverged) as caught:
        trainer.fit(TrainingBudget(max_steps=20))
    message = str(caught.value)
    last_good = int(re.search(r"the last good checkpoint is step (\d+)", message).group(1))
    assert re.search(rf"became (nan|inf|-inf) at step {last_good + 1};", message), message
    assert "--resume" in message and "learning_rate" in message
    assert trainer.checkpoints.manager.latest_checkpoint.endswith(f"ckpt-{last_good}")
    assert checkpoint_problem(trainer.checkpoints.manager.latest_checkpoint) is None
    # The kept checkpoint holds finite weights: it is the one to resume from.
    reader = tf.train.load_checkpoint(trainer.checkpoints.manager.latest_checkpoint)
    for name in reader.get_variable_to_shape_map():
        if "model" in name and "OPTIMIZER_SLOT" not in name and name.endswith("VARIABLE_VALUE"):
            assert all(math.isfinite(v) for v in reader.get_tensor(name).ravel()), name


@pytest.mark.end_to_end
def test_no_complete_checkpoint_is_a_clear_error(tmp_path):
    from support import fixed_batch_trainer as _trainer

    from keras_nmt.core.errors import RunDirError
    from keras_nmt.training import TrainingBudget

    trainer = _trainer(tmp_path, checkpoint_every=2)
    trainer.save()
    trainer.fit(TrainingBudget(max_steps=2))
    for data in (tmp_path / "checkpoints").glob("ckpt-*.data-*"):
        data.write_bytes(b"garbage")
    again = _trainer(tmp_path, checkpoint_every=2)
    with pytest.raises(RunDirError, match="no complete checkpoint in .*checkpoints"):
        again.restore(log=lambda text: None)
    assert int(again.step.numpy()) == 0  # nothing was restored from garbage


@pytest.mark.end_to_end
def test_a_torn_newest_checkpoint_gives_way_to_the_one_before_it(tmp_path):
    from support import fixed_batch_trainer as _trainer

    from keras_nmt.training import TrainingBudget

    trainer = _trainer(tmp_path, checkpoint_every=2)
    trainer.save()
    trainer.fit(TrainingBudget(max_steps=2))  # ckpt-0 and ckpt-2
    checkpoints = tmp_path / "checkpoints"
    for data in checkpoints.glob("ckpt-2.data-*"):
        data.write_bytes(b"torn")
    (checkpoints / "ckpt-4_temp").mkdir()  # what a killed save leaves
    (checkpoints / "checkpoint.tmp1234").write_text("half")
    said = []
    again = _trainer(tmp_path, checkpoint_every=2)
    assert again.restore(log=said.append)
    assert int(again.step.numpy()) == 0
    assert len(said) == 1 and "ckpt-2 is incomplete or unreadable" in said[0]
    # The state file names ckpt-0 alone again; the torn files and the left-overs are gone.
    state = tf.train.get_checkpoint_state(str(checkpoints))
    assert [Path(p).name for p in state.all_model_checkpoint_paths] == ["ckpt-0"]
    assert Path(state.model_checkpoint_path).name == "ckpt-0"
    assert sorted(p.name.split(".")[0] for p in checkpoints.iterdir()) == [
        "checkpoint", "ckpt-0", "ckpt-0"]


def test_a_failed_checkpoint_write_is_one_line_in_the_systems_words(tmp_path, monkeypatch):
    from support import fixed_batch_trainer as _trainer

    from keras_nmt.core.errors import RunWriteError
    from keras_nmt.training import checkpoints as checkpoints_lib

    assert checkpoints_lib._os_reason(OSError(28, "No space left on device")) == (
        "No space left on device")
    torn = tf.errors.ResourceExhaustedError(
        None, None, "{{function_node __wrapped__SaveV2}} /r/ckpt-4_temp/part-00000; "
                    "File too large [Op:SaveV2]\nmore")
    assert checkpoints_lib._os_reason(torn) == "File too large"
    assert checkpoints_lib._os_reason(ValueError("")) == "ValueError"

    trainer = _trainer(tmp_path, checkpoint_every=2)
    store = trainer.checkpoints

    def full(*args, **kwargs):
        raise torn

    monkeypatch.setattr(store.manager, "save", full)
    with pytest.raises(RunWriteError) as first:
        trainer.save()
    assert str(first.value) == (
        f"cannot write the checkpoint of step 0 in {tmp_path}: File too large; no checkpoint "
        "was written")
    monkeypatch.undo()
    trainer.save()
    monkeypatch.setattr(store.best_manager, "save", full)
    with pytest.raises(RunWriteError, match=r"^cannot write the best weights of step 3 in .*: "
                       r"File too large; the last complete checkpoint is step 0; free space "
                       r"\(or fix the permissions\) and continue with --resume$"):
        store.save_best(3)
