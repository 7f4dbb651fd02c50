"""What several test modules share that is not a fixture (fixtures are in conftest.py):
the checkout's root, the tiny models' settings and the in-process trainer of fixed
batches, the environment of a child process, lines that have broken translators before,
small helpers on run, export and background jobs, and a translation server in a thread.

Importing this module loads no TensorFlow: the helpers that need it import it when
called, so that modules testing pure-Python parts collect without it.
"""

from __future__ import annotations

import asyncio
import http.client
import io
import json
import os
import pathlib
import shutil
import threading
import types
import urllib.parse

ROOT = pathlib.Path(__file__).resolve().parents[1]

# TensorFlow's start-up noise as its native libraries write it before any Python runs:
# what keras_nmt.core.progress.NATIVE_NOISE matches and its filter drops.
STARTUP_NOISE = (
    b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
    b"I0000 00:00:1795470963.568782    4580 cudart_stub.cc:31] Could not find cuda drivers on "
    b"your machine, GPU will not be used.\n"
)


class StreamProbe:
    """The stdin and stdout of a command that must stream its input: ``stdin`` holds
    ``line`` up to ``limit`` times and ends as soon as the command has written to
    ``stdout`` (a text stream); ``read_at_first_output`` is how many lines it had read
    by then (None: it wrote nothing)."""

    def __init__(self, line: str, limit: int):
        self.read = 0
        self.read_at_first_output: int | None = None
        probe = self

        class Stdout(io.StringIO):
            def write(self, text: str) -> int:
                if text and probe.read_at_first_output is None:
                    probe.read_at_first_output = probe.read
                return super().write(text)

        self.stdout = Stdout()
        # A text stream's bytes are its .buffer, which the commands read line by line.
        self.stdin = types.SimpleNamespace(buffer=self._lines((line + "\n").encode(), limit))

    def _lines(self, data: bytes, limit: int):
        while self.read < limit and self.read_at_first_output is None:
            self.read += 1
            yield data


def open_descriptors() -> int:
    """How many file descriptors this process holds open (Linux)."""
    return len(os.listdir("/proc/self/fd"))

# The tiny model most tests train: a few seconds for a few updates on the tiny corpus.
TINY_SETTINGS = {
    "embedding": 16, "hidden": 16, "attention": 16, "maxout": 8,
    "batch_size": 16, "beam_size": 2, "eval_every": 5,
}


# The model of fixed_batches (not TINY_SETTINGS): ids under 10, two pairs a batch, an
# evaluation every update and a checkpoint every two.
FIXED_BATCH_SETTINGS = {"embedding": 8, "hidden": 8, "attention": 8, "maxout": 4,
                        "src_vocab_size": 10, "tgt_vocab_size": 10, "batch_size": 2,
                        "eval_every": 1, "checkpoint_every": 2}


def fixed_batches():
    """The same batch of two sentence pairs, repeated: ((source, target_in), target_out)."""
    import tensorflow as tf

    source = tf.constant([[4, 5, 3], [6, 3, 0]])
    target_in = tf.constant([[2, 7, 8], [2, 9, 0]])
    target_out = tf.constant([[7, 8, 3], [9, 3, 0]])
    return tf.data.Dataset.from_tensors(((source, target_in), target_out)).repeat()


def fixed_batch_trainer(tmp_path, **overrides):
    """A Trainer of an RNNsearch of FIXED_BATCH_SETTINGS (with ``overrides``) over
    fixed_batches, its run directory ``tmp_path``, seeded: the tiny in-process trainer."""
    import keras

    from keras_nmt.core.config import variant_config
    from keras_nmt.models.rnnsearch import TranslationModel
    from keras_nmt.rundir.run_directory import RunDir
    from keras_nmt.training import Trainer

    keras.utils.set_random_seed(0)
    config = variant_config("search50", {**FIXED_BATCH_SETTINGS, **overrides})
    model = TranslationModel(config)
    return Trainer(config, model, RunDir(tmp_path), fixed_batches(),
                   lambda: fixed_batches().take(1), train_pairs=2)


def set_args(settings: dict) -> list[str]:
    """``settings`` as the command line's ``--set KEY=VALUE`` options."""
    return [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")]


def tiny_args(**changes) -> list[str]:
    """``--set`` options of :data:`TINY_SETTINGS` with ``changes`` (a value None drops
    the key)."""
    settings = {**TINY_SETTINGS, **changes}
    return set_args({key: value for key, value in settings.items() if value is not None})


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a child Python process a test starts: the repository first on
    PYTHONPATH, then whatever the parent had there, so an installation that relies on
    PYTHONPATH (a wheel unpacked beside the checkout, say) still imports in the child."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, **extra}


def edit_json(path, **changes):
    """Rewrite the JSON object in ``path`` with ``changes``; a value None removes the key."""
    values = json.loads(path.read_text(encoding="utf-8"))
    values.update(changes)
    values = {key: value for key, value in values.items() if value is not None}
    path.write_text(json.dumps(values), encoding="utf-8")


def onnx_files(export_dir, version=1):
    """The directory of an export's ONNX files (nmt.onnx, nmt.onnx.json, ...)."""
    from keras_nmt.export import layout

    return layout.onnx_dir(export_dir, "nmt", version)


def as_older_export(onnx_dir) -> None:
    """Make the ONNX files in ``onnx_dir`` as a keras-nmt before the search returned its
    tokens' log-probabilities wrote them: the search models lose that output (in place;
    the force-decoding model keeps its own)."""
    import onnx

    for path in pathlib.Path(onnx_dir).glob("*.onnx"):
        if path.name.endswith(".forced.onnx"):
            continue
        proto = onnx.load(str(path))
        kept = [o for o in proto.graph.output if o.name != "token_logprobs"]
        if len(kept) < len(proto.graph.output):
            del proto.graph.output[:]
            proto.graph.output.extend(kept)
            onnx.save(proto, str(path))


def savedmodel_loaders(export_dir):
    """The export's SavedModel the two ways it gets loaded: TF2 and the TF1 session (TF
    Text's ops registered first, as TF Serving links them: a SentencePiece export's graph
    uses them, and the export may have been made in another process)."""
    import tensorflow_text  # noqa: F401

    from keras_nmt.export.loaders import SessionModel, TF2Model

    path = export_dir / "nmt" / "1"
    return {"tf2": TF2Model(path), "tf1": SessionModel(path)}


def shortlist_candidates(translator, lines, shortlist) -> list[set[int]]:
    """The target ids a selecting search may say for each of ``lines`` (one sentence
    each) decoded in one call: every id for a line with a source word the lexical table
    marks rare; for the others, which share their batch, the reserved ids, the F most
    frequent ones and the B best translations of each of their source ids."""
    from keras_nmt.core.constants import RESERVED

    frequent, best = shortlist
    table, rare = translator.lexicon.targets, translator.lexicon.rare_sources()
    sources = translator.encode(lines)
    marked = [bool(rare[source].any()) for source in sources]
    common = set(range(len(RESERVED) + frequent)) | {
        int(x) for source, is_rare in zip(sources, marked) if not is_rare
        for s in source for x in table[s, :best]}
    every = set(range(len(translator.target_vocab)))
    return [every if is_rare else common for is_rare in marked]


def check_selecting_export(export_dir, lines, selected, beam_size) -> list[str]:
    """Assert that an export made with ``--shortlist`` decodes ``lines`` (one batch, as
    the SavedModel gets them: a batch's candidates are its sentences') as the Keras search
    did (``selected``, its translations with the same shortlist at ``beam_size``): the
    SavedModel through both loaders (translations and scores), ONNX with the export's
    shortlist (ties of equal scores allowed). Returns the int8 model's translations, from
    ``onnx-translate --int8``."""
    import numpy as np

    from keras_nmt.cli import onnx_translate
    from keras_nmt.export import parity
    from keras_nmt.decoding.onnx_translator import OnnxTranslator

    for name, model in savedmodel_loaders(export_dir).items():
        out = model.run("serving_default", sentences=lines)
        assert [x.decode("utf-8") for x in out["translations"]] == [t.text for t in selected], name
        np.testing.assert_allclose(out["scores"], [t.score for t in selected], atol=1e-4)
    got = OnnxTranslator.from_export_dir(export_dir).translate(lines, beam_size=beam_size,
                                                               shortlist=True)
    result = parity.compare(parity.from_translations(selected), parity.from_translations(got))
    assert parity.agrees(result, allow_ties=True), result
    stdin, stdout = io.BytesIO(("\n".join(lines) + "\n").encode("utf-8")), io.StringIO()
    assert onnx_translate.main([str(export_dir), "--int8", "--quiet"], stdin=stdin,
                               stdout=stdout) == 0
    out = stdout.getvalue().splitlines()
    assert len(out) == len(lines) and "\u2581" not in "".join(out)
    return out


def run_translator(run_dir):
    from keras_nmt.decoding.keras_translator import Translator

    return Translator.from_run_dir(run_dir)


# Hostile input for an export: empty, blank, emoji, control characters, mixed scripts,
# 2000 tokens (cut to 100), one 10,000-character token.
BAD_INPUTS = [
    "",
    "   ",
    "\t\n \u00a0\u3000",
    "😀👍🏽 👨‍👩‍👧 🇫🇷",
    "ctl\x00nul\x07bell\x1besc\x7fdel\ufeffbom",
    "mixed Ελληνικά 中文 עברית e\u0301 «quoted» \"x\"",
    ("word " * 2000)[:10_000],
    "a" * 10_000,
]


def scored_pairs(corpus, count=9):
    """Pairs to force-decode: ``count`` test pairs, an empty target, an empty source, and
    a pair longer than translate's default maximum source length (translate would cut
    its source; scoring must not): 8 sentences, about 200 words, twice the 100 of a
    search30 run."""
    sources = (corpus / "test.en").read_text(encoding="utf-8").splitlines()
    targets = (corpus / "test.fr").read_text(encoding="utf-8").splitlines()
    return (sources[:count] + [sources[count], "", " ".join(sources[:8])],
            targets[:count] + ["", targets[count], " ".join(targets[:8])])


def training_nll(run_dir, model, sources, targets, tmp_path, batch_size=5):
    """Per pair, the NLL as training's evaluation computes it: the run's graph encoders,
    tf.data batches (data.evaluation_batches) and models.sentence_nll."""
    import numpy as np

    from keras_nmt.data import pipelines as data
    from keras_nmt.corpus.readers import ParallelFiles
    from keras_nmt.models.rnnsearch import sentence_nll
    from keras_nmt.rundir.run_directory import RunDir

    files = ParallelFiles(tmp_path / "nll.src", tmp_path / "nll.tgt")
    for path, lines in ((files.source, sources), (files.target, targets)):
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    batches = data.evaluation_batches(files, *RunDir(run_dir).graph_encoders(),
                                      batch_size=batch_size)
    out = []
    for (source, target_in), target_out in batches:
        out.extend(sentence_nll(model((source, target_in), training=False), target_out).numpy())
    return np.array(out)


def peaked_weights_run(source, target, unk_bias=0.0):
    """A copy of run ``source`` at ``target`` whose best weights are peaked random ones (a
    barely trained model only repeats a word or two), with ``unk_bias`` added to the
    <unk> output bias (a large one: a model that generates <unk> most of the time)."""
    import shutil

    import numpy as np
    import tensorflow as tf

    from keras_nmt.core.constants import UNK_ID
    from keras_nmt.models.rnnsearch import TranslationModel
    from keras_nmt.rundir.run_directory import RunDir

    shutil.copytree(source, target,
                    ignore=shutil.ignore_patterns("tensorboard", "checkpoints", "best"))
    model = TranslationModel(RunDir(target).load_config())
    rng = np.random.default_rng(3)
    for weight in model.weights:
        shape = tuple(weight.shape)
        values = rng.normal(0.0, 2.0 / np.sqrt(shape[0]) if len(shape) == 2 else 0.5, shape)
        if weight.path.endswith("readout/output_bias"):
            values[UNK_ID] += unk_bias
        weight.assign(values.astype("float32"))
    tf.train.CheckpointManager(tf.train.Checkpoint(model=model), str(target / "best"), 1).save()
    return target


def run_logged(command, log, env, launch=None, timeout=900):
    """Run ``command`` (in the checkout, with ``env``) and return (exit status, its
    stdout and stderr together), also written to the file ``log``. ``launch``: what
    starts the process (a background job's, see :class:`Background`; default
    subprocess.Popen). The output goes through a pipe, not into the file: a process that
    limits the size of the files it writes (a test's full disk) still gets to say so."""
    import subprocess

    process = (launch or subprocess.Popen)(
        [str(arg) for arg in command], cwd=ROOT, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT)
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
    text = output.decode("utf-8", errors="replace")
    pathlib.Path(log).write_text(text, encoding="utf-8")
    return process.returncode, text


class Background:
    """Work for session fixtures (train a run, export it, ...), done by child processes
    that start with the session's first test, so that they use the core a test leaves
    idle while the tests before the fixture's first user run. :meth:`result` waits for
    a job and gives its value, or raises its error.

    A job is a function of ``launch``, the subprocess.Popen it starts its processes
    with (:meth:`stop` kills those still running); ``after`` names the jobs whose
    results it needs. Jobs run one after the other in the order added (the order in
    which the tests first need them), except ``early`` ones: long jobs needed late,
    which start at once beside them with a low priority (niceness 15 and up, the later
    needed the lower), so that they take mostly CPU time nothing else wants.

    When the suite runs in several pytest-xdist workers, one of them runs the jobs and
    ``board`` is a folder they share: each job's outcome is published there as it ends
    (:class:`PublishedJobs` reads it in the others), and :meth:`stop` waits until the
    other workers, ``others``, have said that they are done (``finished-WORKER``) before
    it kills what still runs: a job is needed by a test that may not have run yet."""

    LANE_NICE, EARLY_NICE = 1, 15

    def __init__(self, board=None, others=()):
        import threading

        self._threading = threading
        self._jobs: dict = {}
        self._stopping = False
        self._threads: list = []
        self._board, self._others = board, tuple(others)
        self.processes: list = []

    def add(self, name, work, after=(), early=False) -> None:
        earlier = sum(job["early"] for job in self._jobs.values())
        self._jobs[name] = {"work": work, "after": after, "done": self._threading.Event(),
                            "early": early,
                            # The later an early job is needed, the lower its priority.
                            "nice": min(19, self.EARLY_NICE + 2 * earlier) if early
                            else self.LANE_NICE}

    def start(self) -> None:
        lanes = [[name] for name, job in self._jobs.items() if job["early"]]
        lanes.append([name for name, job in self._jobs.items() if not job["early"]])
        for lane in lanes:
            thread = self._threading.Thread(target=self._run, args=(lane,), daemon=True,
                                            name=f"background {', '.join(lane)}")
            thread.start()
            self._threads.append(thread)

    def _run(self, lane) -> None:
        for name in lane:
            job, nice = self._jobs[name], self._jobs[name]["nice"]
            try:
                for other in job["after"]:
                    if other in self._jobs:
                        self._jobs[other]["done"].wait()
                        if "error" in self._jobs[other]:
                            raise RuntimeError(f"{name} needs {other}, which failed")
                job["value"] = job["work"](lambda command, nice=nice, **options: self._launch(
                    nice, command, **options))
            except BaseException as error:  # noqa: BLE001 (given to the fixture that waits)
                job["error"] = error
            finally:
                if self._board is not None:
                    _publish(self._board, name, job)
                job["done"].set()

    def _launch(self, nice, command, **options):
        import subprocess

        if self._stopping:
            raise RuntimeError("the test session ended first")
        process = subprocess.Popen(["nice", "-n", str(nice), *map(str, command)], **options)
        self.processes.append(process)
        return process

    def result(self, name):
        if name not in self._jobs:
            raise _unknown_job(name)
        job = self._jobs[name]
        job["done"].wait()
        if "error" in job:
            raise job["error"]
        return job["value"]

    def stop(self) -> None:
        import time

        while not all(job["done"].is_set() for job in self._jobs.values()) and not all(
                (self._board / f"finished-{other}").exists() for other in self._others):
            time.sleep(0.5)
        self._stopping = True
        for process in list(self.processes):
            if process.poll() is None:
                process.kill()
        for thread in self._threads:
            thread.join()


def _unknown_job(name) -> LookupError:
    return LookupError(f"fixture {name} is made in the background for the tests that name it "
                       "among their arguments; request.getfixturevalue() asks too late: name it")


def _publish(board, name, job) -> None:
    """Write a finished job's value or error to ``board/NAME.pickle``, whole or not at
    all (a reader polls for the name)."""
    import pickle

    from keras_nmt.core.atomic import write_bytes_atomic

    try:
        outcome = pickle.dumps(("error", job["error"]) if "error" in job else ("value", job["value"]))
    except Exception as error:  # noqa: BLE001 (an error that does not pickle: its words)
        outcome = pickle.dumps(("error", RuntimeError(f"{job.get('error', error)!r}")))
    write_bytes_atomic(board / f"{name}.pickle", outcome)


class PublishedJobs:
    """The jobs of :class:`Background` as another pytest-xdist worker runs them, read from
    the ``board`` where it publishes each outcome: :meth:`result` waits for it. ``owner``
    is that worker's process id: if it ends before a job does, the wait ends with an
    error instead of lasting for ever."""

    def __init__(self, board, names, owner: int):
        self._board, self._names, self._owner = board, set(names), owner

    def result(self, name):
        import pickle
        import time

        if name not in self._names:
            raise _unknown_job(name)
        published = self._board / f"{name}.pickle"
        while not published.exists():
            try:
                os.kill(self._owner, 0)
            except ProcessLookupError:
                if published.exists():
                    break
                raise RuntimeError(f"the pytest-xdist worker that made {name} ended first")
            time.sleep(0.2)
        kind, outcome = pickle.loads(published.read_bytes())
        if kind == "error":
            raise outcome
        return outcome

    def stop(self) -> None:
        """Nothing runs here: the owner's :meth:`Background.stop` ends the jobs."""


def claim(path) -> bool:
    """Create the file ``path`` holding this process's id, if no process did first."""
    try:
        descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(descriptor, "w") as claimed:
        claimed.write(str(os.getpid()))
    return True


def claimed_by(path) -> int:
    """The process id that :func:`claim` wrote to ``path`` (waiting for it to be written)."""
    import time

    while not (text := pathlib.Path(path).read_text().strip()):
        time.sleep(0.05)
    return int(text)

# Lines that have broken translators before: empty, blank, control characters, emoji,
# combining marks, a 10,000-character line, a right-to-left script.
HARD_LINES = [
    "the cat sat on the mat .",
    "",
    "   \t ",
    "the\x00cat\x07sat\x1b[31m",
    "the 🐈 sat 👍🏽 on ZWJ 👨‍👩‍👧",
    "e\u0301te\u0301 cafe\u0301",
    "cat " * 2500,
    "القط جلس",
    "\ufeffthe\u2028cat\u00a0sat",
]


def onnx_translate_probe(args: list[str], lines: list[str], then: str = ""):
    """Run onnx_translate.py's command line in a fresh interpreter where none of the
    training install's packages can be imported, as on the plain (ONNX) install (then the
    code ``then``); return its stdout lines, its stderr lines, and the loaded modules of
    TensorFlow or Keras (none expected)."""
    import subprocess
    import sys

    probe = (
        "import json, runpy, sys\n"
        "from keras_nmt.cli import TRAINING_PACKAGES\n"
        "for name in TRAINING_PACKAGES: sys.modules[name] = None\n"
        f"sys.argv = ['onnx_translate.py', *{args!r}]\n"
        "try:\n"
        f"    runpy.run_path({str(ROOT / 'serving' / 'onnx_translate.py')!r}, run_name='__main__')\n"
        "except SystemExit as stop:\n"
        "    assert not stop.code, stop.code\n"
        f"{then}"
        "heavy = sorted(m for m, module in sys.modules.items()\n"
        "               if module is not None and (m.split('.')[0] in ('tensorflow', 'keras')\n"
        "                                          or m == 'keras_nmt.corpus.builtin'))\n"
        "print(json.dumps(heavy), file=sys.stderr)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], input="\n".join(lines).encode("utf-8") + b"\n",
        capture_output=True, env=child_env(TF_CPP_MIN_LOG_LEVEL="3"), cwd=ROOT, timeout=120,
    )
    stderr = result.stderr.decode("utf-8").splitlines()
    assert result.returncode == 0, "\n".join(stderr)
    stdout = result.stdout.decode("utf-8").split("\n")
    assert stdout[-1] == "" and len(stdout) == len(lines) + 1
    return stdout[:-1], stderr[:-1], json.loads(stderr[-1])


class ServerThread:
    """A :class:`TranslationServer` on 127.0.0.1, port 0, in a thread of its own event
    loop: the test talks to it over real sockets."""

    def __init__(self, registry: Registry, **options):
        from keras_nmt.serving.options import ServerOptions
        from keras_nmt.serving.server import TranslationServer

        self.log = io.StringIO()
        self.server = TranslationServer(registry, ServerOptions(port=0, **options), log=self.log)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> "ServerThread":
        self.thread.start()
        url = asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(30)
        self.port = urllib.parse.urlsplit(url).port
        self.url = url
        return self

    def __exit__(self, *exc) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()
        assert "internal error" not in self.log.getvalue(), self.log.getvalue()

    def call(self, path: str, body=None, method: str | None = None, timeout: float = 60,
             headers: dict | None = None):
        return call(self.port, path, body, method, timeout, headers)


def call_raw(port: int, path: str, body=None, method: str | None = None,
             timeout: float = 60, headers: dict | None = None) -> tuple[int, str, bytes]:
    """(status, content type, body) of one request; ``body``: bytes as they are,
    anything else as JSON; a body is sent as ``application/json`` unless ``headers``
    say otherwise."""
    if body is not None and not isinstance(body, bytes):
        body = json.dumps(body).encode("utf-8")
    sent = {"Content-Type": "application/json"} if body is not None else {}
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request(method or ("GET" if body is None else "POST"), path, body,
                           {**sent, **(headers or {})})
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type", ""), response.read()
    finally:
        connection.close()


def call(port: int, path: str, body=None, method: str | None = None, timeout: float = 60,
         headers: dict | None = None):
    """(status, parsed JSON answer) of one request (see :func:`call_raw`)."""
    status, _, answer = call_raw(port, path, body, method, timeout, headers)
    return status, json.loads(answer.decode("utf-8"))


# Tiny random models for the search tests (test_search, test_constraints). Their initial
# weights (std 0.01) give near-uniform next-word distributions, so every weight is
# redrawn with a fan-in scaled normal: peaked distributions that depend on the context.
DIMS = {"embedding": 8, "hidden": 8, "attention": 6, "maxout": 4, "src_vocab_size": 12}

# Sentences of different lengths, each ending with EOS, padded with 0.
SOURCES = [
    [4, 5, 6, 3, 0, 0, 0],
    [7, 3, 0, 0, 0, 0, 0],
    [4, 4, 5, 6, 8, 9, 3],
    [9, 10, 11, 3, 0, 0, 0],
    [11, 5, 3, 0, 0, 0, 0],
]


def build_model(
    variant: str, seed: int, tgt_vocab_size: int = 9, gain: float = 2.0, eos_bias: float = 0.0
):
    import keras
    import numpy as np

    from keras_nmt.core.config import variant_config
    from keras_nmt.core.constants import EOS_ID
    from keras_nmt.models.rnnsearch import TranslationModel

    keras.utils.set_random_seed(seed)
    model = TranslationModel(variant_config(variant, {**DIMS, "tgt_vocab_size": tgt_vocab_size}))
    rng = np.random.default_rng(seed)
    for weight in model.weights:
        shape = tuple(weight.shape)
        if weight.path.endswith("embeddings"):
            std = 1.0
        elif len(shape) == 2:
            std = gain / np.sqrt(shape[0])
        else:
            std = 0.5
        values = rng.normal(0.0, std, shape).astype("float32")
        if weight.path.endswith("readout/output_bias"):
            values[EOS_ID] += eos_bias
        weight.assign(values)
    return model


# The page at / in a real browser (tests of keras-nmt serve): Debian's packages, no download.
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


def headless_chromium():
    """Debian's Chromium driven by selenium through Debian's chromedriver (no download)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=900,700", "--no-proxy-server"):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def page_wait(driver, seconds: float = 30):
    """A WebDriverWait over ``driver`` that tries again on a stale element: the page
    replaces its results while a wait reads them, so an element found one moment can be
    gone the next."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, seconds, ignored_exceptions=(StaleElementReferenceException,))
