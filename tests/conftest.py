"""Shared fixtures: a tiny generated corpus, a tiny trained run directory and its
exports, and a runner of ``keras-nmt`` commands in this process. Constants and plain
helpers are in support.py.

Nothing here imports TensorFlow before a test needs it: modules that test pure-Python
parts collect and run without it."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import importlib.abc
import importlib.util
import io
import os
import pathlib
import sys

import pytest
from hypothesis import settings as hypothesis_settings

from support import (ROOT, TINY_SETTINGS, Background, PublishedJobs, child_env, claim, claimed_by,
                     edit_json, run_logged, tiny_args)

# Property-based tests draw the same examples on every run (seeded from each test), so a
# red CI run is one anyone can repeat and nothing fails by chance; nothing is stored in
# .hypothesis/ either. `pytest --hypothesis-profile explore` draws new examples.
hypothesis_settings.register_profile("repeatable", derandomize=True, database=None)
hypothesis_settings.register_profile("explore", derandomize=False)
hypothesis_settings.load_profile("repeatable")

# Settings a TensorFlow user's shell often holds that change what the tests assert on
# (TensorFlow's start-up lines on stderr, oneDNN's rounding): the suite runs as if they
# were unset, in this process and every command it starts. The package sets Keras's
# backend itself (keras_nmt/__init__.py, tested with KERAS_BACKEND=jax); the helpers that
# load a SavedModel without it (tests/fake_model_server.py) get TensorFlow's too.
HOST_SETTINGS = ("TF_CPP_MIN_LOG_LEVEL", "TF_ENABLE_ONEDNN_OPTS")
for _name in HOST_SETTINGS:
    os.environ.pop(_name, None)
os.environ["KERAS_BACKEND"] = "tensorflow"

_SESSION_ENVIRONMENT: dict[str, str] = {}


class _WhenTensorFlowLoads(importlib.abc.MetaPathFinder):
    """Configures TensorFlow for the tests right after its first import, wherever that
    happens (a test module, a fixture, a command run in process).

    TensorFlow multiplies float32 matrices in TensorFloat-32 on GPUs that have it (Ampere
    and later). The tests compare float32 results with numpy and across paths at float32
    tolerances: on an H100, 10 of them failed with TF32 on, none with it off. The
    variables TensorFlow's import sets join the session's environment (see
    :func:`_environment_restored`)."""

    def find_spec(self, fullname, path, target=None):
        if fullname != "tensorflow":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_configure(module):
            before = dict(os.environ)
            exec_module(module)
            module.config.experimental.enable_tensor_float_32_execution(False)
            _SESSION_ENVIRONMENT.update(
                {key: value for key, value in os.environ.items() if before.get(key) != value})

        spec.loader.exec_module = exec_then_configure
        return spec


def pytest_xdist_auto_num_workers(config):
    """``-n auto``: a worker a core this process may use, at most 4 (each imports
    TensorFlow; the session's background jobs run beside them)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(4, cores or 1))


def pytest_configure(config):
    _SESSION_ENVIRONMENT.update(os.environ)
    if "tensorflow" in sys.modules:  # imported by a plugin, say: configure it now
        sys.modules["tensorflow"].config.experimental.enable_tensor_float_32_execution(False)
    elif not any(isinstance(finder, _WhenTensorFlowLoads) for finder in sys.meta_path):
        sys.meta_path.insert(0, _WhenTensorFlowLoads())


@pytest.fixture(autouse=True)
def _environment_restored():
    """After each test, os.environ is what it was when the session began (with what
    TensorFlow's import set). Commands and bench scripts run in process set
    TF_CPP_MIN_LOG_LEVEL for their own sake (some in session fixtures); left behind,
    every later child process would take it for the user's setting and show TensorFlow's
    start-up lines."""
    yield
    for name in set(os.environ) - set(_SESSION_ENVIRONMENT) - {"PYTEST_CURRENT_TEST"}:
        del os.environ[name]  # pytest's own variable it removes itself
    os.environ.update(_SESSION_ENVIRONMENT)


@dataclasses.dataclass
class Ran:
    """What a command run by :func:`cli_runner` did: its exit status and its output."""

    returncode: int
    stdout: str
    stderr: str


class _Output(io.TextIOWrapper):
    """A text stream over bytes (a command may write either), read back as text."""

    def __init__(self, errors="strict"):
        super().__init__(io.BytesIO(), encoding="utf-8", errors=errors, newline="\n",
                         write_through=True)

    def getvalue(self) -> str:
        self.flush()
        return self.buffer.getvalue().decode("utf-8", errors="replace")


@pytest.fixture(scope="session")
def cli_runner():
    """``run(COMMAND, *args, stdin=b"", prog=None, env=None) -> Ran``: the ``keras-nmt``
    subcommand COMMAND (``"train"``, ``"translate"``, ...) run in this process, as
    ``keras-nmt COMMAND ARGS`` would run it in a fresh one: its ``main`` with ``stdin``
    (bytes or text) and sys.stdout / sys.stderr captured, ``env`` set in os.environ for
    the call, and argparse's exits taken as exit statuses. ``prog`` is the name it
    reports under (``"train.py"``, ``"export"``; default ``keras-nmt COMMAND``).

    Tests use it where nothing is gained from a fresh interpreter: a few seconds of
    importing TensorFlow saved per command. What needs one (a kill, a signal, an import
    that must not happen, the console scripts themselves) runs in a subprocess."""
    from keras_nmt import cli

    def run(command, *args, stdin=b"", prog=None, env=None) -> Ran:
        module = importlib.import_module(f"keras_nmt.cli.{cli.COMMANDS[command][0]}")
        data = stdin.encode("utf-8") if isinstance(stdin, str) else stdin
        streams = (io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"), _Output(),
                   _Output(errors="backslashreplace"))
        saved = {name: os.environ.get(name) for name in env or {}}
        os.environ.update(env or {})
        try:
            with contextlib.redirect_stdout(streams[1]), contextlib.redirect_stderr(streams[2]):
                try:
                    status = module.main([str(arg) for arg in args], *streams,
                                         prog=prog or f"keras-nmt {command}")
                except SystemExit as stop:  # argparse: --help, bad arguments
                    code = stop.code
                    status = 0 if code is None else code if isinstance(code, int) else 1
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        return Ran(status, streams[1].getvalue(), streams[2].getvalue())

    return run


@pytest.fixture
def tiny_settings():
    """The tiny model's ``--set`` overrides (a fresh dict a test may change)."""
    return dict(TINY_SETTINGS)


def _xdist_worker(config) -> tuple[str, int] | None:
    """(this worker's id, the number of workers) when pytest-xdist runs the suite in
    several processes, else None."""
    given = getattr(config, "workerinput", None)
    return None if given is None else (given["workerid"], int(given["workercount"]))


def _shared_folder(tmp_path_factory) -> pathlib.Path:
    """A folder every pytest-xdist worker of this run sees (each has its own basetemp
    inside the run's)."""
    folder = tmp_path_factory.getbasetemp().parent / "shared"
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def tiny_corpus(request, tmp_path_factory):
    """A built-in corpus of 400 / 30 / 40 pairs with gold alignments (*.align); one for
    all pytest-xdist workers, since the runs made in the background record its path."""
    import fcntl

    from keras_nmt.corpus import builtin

    spec = builtin.BuiltinCorpusSpec(
        seed=7, train_size=400, valid_size=30, test_size=40, max_source_tokens=40
    )
    if _xdist_worker(request.config) is None:
        return builtin.write_corpus(tmp_path_factory.mktemp("corpus"), spec)
    shared = _shared_folder(tmp_path_factory)
    with open(shared / "corpus.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the first worker writes it, the others wait
        if not (shared / "corpus.done").exists():
            builtin.write_corpus(shared / "corpus", spec)
            (shared / "corpus.done").touch()
    return shared / "corpus"


# The session's trained runs and exports, and the child processes of test_distributed and
# test_precision, are made by child processes in the background (support.Background)
# for the fixtures the selected tests need, from the first test on: one job after the
# other in the order the tests first need them, but for the long ones needed late
# (_EARLY), which start at once with a low priority. A test module adds jobs of its
# own with a dict BACKGROUND_JOBS, fixture name -> function(context) -> job (see
# BackgroundContext).
_BACKGROUND_FIXTURES = ("tiny_run", "tiny_export", "tiny_spm_run", "tiny_selecting_export",
                        "tiny_spm_export", "tiny_spm_selecting_export", "tiny_web_export",
                        "precision_runs",
                        "distributed_matrix", "distributed_other_cells")
_EARLY = {"precision_runs", "distributed_matrix", "distributed_other_cells"}
# What a job needs made first.
_AFTER = {"tiny_export": ("tiny_run",), "tiny_selecting_export": ("tiny_run",),
          "tiny_web_export": ("tiny_run",),
          "tiny_spm_export": ("tiny_spm_run",), "tiny_spm_selecting_export": ("tiny_spm_run",)}


def pytest_itemcollected(item):
    """A test that needs one of the session's trained runs, exports or other background
    jobs, or a fixture its module names in ``END_TO_END_FIXTURES``, is marked
    ``end_to_end``, as are the tests that train a run themselves (marked where they are
    written): ``-m "not slow and not bench and not end_to_end"`` is the
    quick tier (README, "Tests"), which builds none of them."""
    module = getattr(item, "module", None)
    made = (set(_BACKGROUND_FIXTURES) | set(getattr(module, "BACKGROUND_JOBS", {}))
            | set(getattr(module, "END_TO_END_FIXTURES", ())))
    if made & set(getattr(item, "fixturenames", ())):
        item.add_marker(pytest.mark.end_to_end)


def pytest_collection_modifyitems(session, config, items):
    """The tests of the early jobs (long, started with the session at a low priority) run
    last, in their order: by then their results are ready, and the other tests have used
    the CPU meanwhile instead of waiting for them."""
    def waits(item):
        return bool(_EARLY & set(getattr(item, "fixturenames", ())))

    items[:] = [item for item in items if not waits(item)] + [item for item in items if waits(item)]


@dataclasses.dataclass
class BackgroundContext:
    """What a background job is made with: a place for its files, the tiny corpus, the
    environment of its processes (taken when the session's first test starts: tests
    change os.environ while the jobs run) and the paths of the session's runs."""

    tmp_path_factory: pytest.TempPathFactory
    corpus: object
    env: dict
    run: object
    spm_run: object


def _builtin_job(name, context):
    """The job of the conftest fixture ``name``."""
    python, corpus, env = sys.executable, context.corpus, context.env
    run, spm_run = context.run, context.spm_run

    def command(*args, log, after):
        """A job: ``args`` run to completion (status 0), then ``after``."""
        def work(launch):
            code, output = run_logged(args, log, env, launch)
            assert code == 0, f"{' '.join(map(str, args))}\n{output[-3000:]}"
            return after
        return work

    train = (python, ROOT / "train.py", "--variant", "search30", "--data", corpus, "--quiet")
    if name == "tiny_run":
        return command(*train, "--out", run, "--max-steps", 10, *tiny_args(),
                       log=run.with_suffix(".log"), after=run)
    if name == "tiny_spm_run":
        return command(*train, "--out", spm_run, "--max-steps", 3, "--tokenizer", "sentencepiece",
                       "--subword-samples", 2,
                       *tiny_args(src_vocab_size=120, tgt_vocab_size=150, batch_tokens=200,
                                  label_smoothing=0.1),
                       log=spm_run.with_suffix(".log"), after=spm_run)
    if name in ("tiny_export", "tiny_selecting_export", "tiny_spm_export",
                "tiny_spm_selecting_export", "tiny_web_export"):
        out = context.tmp_path_factory.mktemp(name.removeprefix("tiny_").replace("_", "-"))
        options = {
            "tiny_export": (run, "--beam", 5, "--nbest", 2, "--return-attention", "--onnx"),
            "tiny_selecting_export": (run, "--beam", 3, "--onnx", "--shortlist", "5,2",
                                      "--int8", "--int8-max-drop", 5),
            "tiny_web_export": (run, "--beam", 3, "--onnx", "--shortlist", "5,2", "--int8",
                                "--int8-max-drop", 5, "--unk-replace"),
            "tiny_spm_export": (spm_run, "--beam", 5, "--nbest", 2, "--onnx"),
            "tiny_spm_selecting_export": (spm_run, "--beam", 3, "--onnx", "--shortlist", "5,2",
                                          "--int8", "--int8-max-drop", 5),
        }[name]
        return command(python, "-m", "keras_nmt.cli", "export", *options, "--out", out,
                       log=out.with_suffix(".log"), after=out)
    if name == "precision_runs":
        return _precision_runs(context.tmp_path_factory.mktemp("precision"), corpus, env)
    # The distributed matrix: the default run's cells (test_distributed), or if slow the
    # others.
    from distributed_run import cells, multiworker_cells, pairwise_cells, run_matrix

    mirrored, multiworker = pairwise_cells(), multiworker_cells()
    if name == "distributed_other_cells":
        mirrored = [cell for cell, _ in cells() if cell not in mirrored]
        multiworker = [cell for cell, _ in cells() if cell not in multiworker]
    directory = context.tmp_path_factory.mktemp(name.replace("_", "-"))
    return lambda launch: run_matrix(directory, mirrored, multiworker, env=env, launch=launch)


@pytest.fixture(scope="session", autouse=True)
def _background(request, tmp_path_factory):
    """The session's background jobs (support.Background), started with its first test:
    those of the fixtures the selected tests name, in the order they first need them."""
    items = request.session.items
    makers = {name: functools.partial(_builtin_job, name) for name in _BACKGROUND_FIXTURES}
    for module in dict.fromkeys(getattr(item, "module", None) for item in items):
        makers.update(getattr(module, "BACKGROUND_JOBS", {}))
    rank = {name: index for index, name in enumerate(makers)}
    first_use: dict[str, int] = {}
    for index, item in enumerate(items):
        for name in getattr(item, "fixturenames", ()):
            if name in makers:
                first_use.setdefault(name, index)
    # Under pytest-xdist the workers collect the same tests: the first to claim the
    # board runs every job, the others read the outcomes it publishes there.
    worker, board = _xdist_worker(request.config), None
    if worker is not None and first_use:
        board = _shared_folder(tmp_path_factory) / "background"
        board.mkdir(exist_ok=True)
    if board is not None and not claim(board / "owner"):
        jobs = PublishedJobs(board, first_use, claimed_by(board / "owner"))
    else:
        others = [f"gw{index}" for index in range(worker[1]) if f"gw{index}" != worker[0]
                  ] if board is not None else ()
        jobs = Background(board, others)
        if first_use:
            runs = tmp_path_factory.mktemp("runs")
            context = BackgroundContext(tmp_path_factory,
                                        request.getfixturevalue("tiny_corpus"),
                                        child_env(), runs / "search30", runs / "spm")
            # A fixture's dependencies are needed by the same tests, so no later than it.
            for name in sorted(first_use, key=lambda name: (first_use[name], rank[name])):
                jobs.add(name, makers[name](context), after=_AFTER.get(name, ()),
                         early=name in _EARLY)
            jobs.start()
    try:
        yield jobs
    finally:
        jobs.stop()
        if board is not None:
            (board / f"finished-{worker[0]}").touch()


def _precision_runs(directory, corpus, env):
    """The job of :func:`precision_runs`: three train.py processes at once."""
    import subprocess

    from keras_nmt.core.config import PRECISIONS

    def work(launch):
        out, processes = {}, {}
        for precision in PRECISIONS:
            run = directory / precision
            extra = ["--set", "early_stop_metric=bleu"] if precision == "mixed_float16" else []
            # The mixed-precision runs train with a smoothed loss; the float32 one keeps the
            # plain loss, whose sharper outputs test_precision decodes in every precision.
            smoothing = 0.0 if precision == "float32" else 0.1
            # Output to a file: a pipe nobody reads while another run is awaited could fill up.
            log = run.with_suffix(".log")
            with log.open("w") as output:
                command = [sys.executable, str(ROOT / "train.py"), "--variant", "search30",
                           "--data", str(corpus), "--out", str(run), "--max-steps", "20",
                           "--precision", precision,
                           *tiny_args(optimizer="adam", learning_rate=0.01, eval_every=10,
                                      label_smoothing=smoothing),
                           *extra]
                processes[precision] = (log, launch(
                    command, stdout=output, stderr=subprocess.STDOUT, cwd=ROOT, env=env))
            out[precision] = run
        for precision, (log, process) in processes.items():
            # A bound on a hang, not on the work: under coverage.py's tracing the three
            # niced runs beside the suite took past 10 minutes.
            process.wait(timeout=1800)
            text = log.read_text()
            assert process.returncode == 0, text[-3000:]
            assert "BLEU" in text, text[-3000:]
        return out

    return work


@pytest.fixture(scope="session")
def tiny_run(tiny_corpus, _background):
    """A search30 run directory trained for 10 steps on ``tiny_corpus`` (poor translations,
    real files: config, vocabularies, lexicon, checkpoints, best weights, summary)."""
    return _background.result("tiny_run")


@pytest.fixture
def run_copy(tiny_run, tmp_path):
    """A copy of ``tiny_run`` (without its TensorBoard logs) that a test may change."""
    import shutil

    copy = tmp_path / "run-copy"
    shutil.copytree(tiny_run, copy, ignore=shutil.ignore_patterns("tensorboard"))
    return copy


@pytest.fixture
def encdec_labelled_run(run_copy):
    """``run_copy`` with a config.json that says RNNencdec (encdec30): its weights are
    still RNNsearch's, so it only serves checks that refuse before the weights load."""
    edit_json(run_copy / "config.json", architecture="encdec", variant="encdec30")
    return run_copy


@pytest.fixture(scope="session")
def tiny_export(tiny_run, _background):
    """``keras-nmt export`` of ``tiny_run``: EXPORT_DIR with nmt/1/ (beam 5, 2-best lists,
    attention), models.config, SERVING.md and nmt/1/onnx/nmt.onnx (+ .onnx.json and the
    vocabularies; :func:`support.onnx_files`)."""
    return _background.result("tiny_export")


@pytest.fixture(scope="session")
def tiny_selecting_export(tiny_run, _background):
    """``keras-nmt export`` of ``tiny_run`` with vocabulary selection and int8: beam 3,
    ``--onnx --shortlist 5,2 --int8`` (the int8 check allows a drop of 5 BLEU: the barely
    trained model scores about 0 anyway)."""
    return _background.result("tiny_selecting_export")


@pytest.fixture(scope="session")
def tiny_web_export(tiny_run, _background):
    """``tiny_selecting_export`` with ``--unk-replace``: its search returns attention
    (the web page's heat maps, <unk> replacement in JavaScript)."""
    return _background.result("tiny_web_export")


@pytest.fixture(scope="session")
def tiny_spm_run(tiny_corpus, _background):
    """A search30 run with ``--tokenizer sentencepiece`` (120 / 150 pieces) and subword
    regularisation (``--subword-samples 2``) trained for 3 steps with label smoothing 0.1
    on ``tiny_corpus``, on token batches of <= 200 slots; its summary is summary.json."""
    return _background.result("tiny_spm_run")


@pytest.fixture(scope="session")
def tiny_spm_export(tiny_spm_run, _background):
    """``keras-nmt export`` of ``tiny_spm_run`` with --onnx (beam 5, 2-best lists):
    EXPORT_DIR with nmt/1/ and in nmt/1/onnx/ nmt.onnx, nmt.onnx.json, the vocabularies
    and nmt.spm.en.model / nmt.spm.fr.model."""
    return _background.result("tiny_spm_export")


@pytest.fixture(scope="session")
def tiny_spm_selecting_export(tiny_spm_run, _background):
    """``keras-nmt export`` of ``tiny_spm_run`` with vocabulary selection and int8, as
    ``tiny_selecting_export`` is of ``tiny_run``: beam 3, ``--onnx --shortlist 5,2 --int8``."""
    return _background.result("tiny_spm_selecting_export")


@pytest.fixture(scope="session")
def precision_runs(tiny_corpus, _background):
    """{precision: run directory}: train.py end to end once per precision (test_precision),
    20 updates with Adam (label smoothing 0.1 in mixed precision), then the held-out
    report. The float16 run keeps its best weights by development BLEU (a decode during
    training). The three runs are processes of their own and run at once."""
    return _background.result("precision_runs")


@pytest.fixture(scope="session")
def distributed_matrix(_background):
    """The default run's cells of tests/distributed_run.py (the pairwise cells under
    MirroredStrategy, 3 of them under MultiWorkerMirroredStrategy, all under the default
    strategy), one process a strategy (two for multiworker): {strategy: output
    directory} (test_distributed)."""
    return _background.result("distributed_matrix")


@pytest.fixture(scope="session")
def distributed_other_cells(_background):
    """:func:`distributed_matrix` for the other cells (the slow tests)."""
    return _background.result("distributed_other_cells")
