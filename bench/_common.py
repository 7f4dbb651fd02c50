"""The benchmark harness: what every benchmark under bench/ shares.

Running: from the checkout's root, ``python -m bench.NAME [options]``; the package that
runs is this checkout's (``bench`` is found in the working directory, ``keras_nmt`` is
installed from it). A benchmark that measures in fresh interpreters starts them the same
way (:func:`run_child`).

Options: a benchmark builds its command line with :func:`parser` and :func:`add`, so an
option more than one benchmark takes has one spelling and one meaning (:data:`OPTIONS`):
``--batch-size N`` is one value, ``--batch-sizes N,N`` a list to sweep, ``--batches N``
a number of batches, ``--rounds N`` how many times a measurement is repeated, ``--json
FILE`` where the report goes. Older spellings still work for a release, with a one-line
notice (``OneLineParser.rename``, as the package's commands do).

The report (:meth:`Bench.write`), one schema for every benchmark::

    {"benchmark": NAME, "command": "python -m bench.NAME ...", "started": ISO 8601 UTC,
     "seconds": wall seconds, "machine": {cpu, cores, memory, AVX-512/VNNI, versions},
     "matmul_gflops": numpy float32 matmul rate measured in the same run,
     "note": --note, "settings": {...}, "results": the figures}

No goal is written into a benchmark: the results pages compare the figures with theirs.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import pathlib
import platform
import resource
import shlex
import shutil
import subprocess
import sys
import time
from typing import Any, Callable, Sequence

ROOT = pathlib.Path(__file__).resolve().parent.parent
MATMUL_SIZE = 2048


# ---------------------------------------------------------------------------- the machine

def _cpuinfo(field: str) -> str | None:
    """The first value of ``field`` in /proc/cpuinfo (Linux), else None."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.split(":", 1)[0].strip() == field:
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, else platform.processor()."""
    return _cpuinfo("model name") or platform.processor() or platform.machine()


def _memory_gib() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 2)
    except (ValueError, OSError, AttributeError):
        return None


def _version(module: str, installed: bool) -> str | None:
    """``module``'s version where this process has imported it (or, with ``installed``,
    where it is installed: the benchmark's children import it)."""
    loaded = sys.modules.get(module)
    if loaded is not None:
        return getattr(loaded, "__version__", None)
    if installed:
        from importlib import metadata

        try:
            return metadata.version(module)
        except metadata.PackageNotFoundError:
            return None
    return None


def machine(libraries: Sequence[str] = ()) -> dict[str, Any]:
    """CPU model, logical cores (and those this process may use), memory, the vector
    instructions that matter to the kernels timed (AVX-512, VNNI), and the versions of
    Python and of the libraries loaded (and of ``libraries``, which children load)."""
    flags = set((_cpuinfo("flags") or "").split())
    report = {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_gib": _memory_gib(),
        "avx512": "avx512f" in flags,
        "vnni": bool(flags & {"avx512_vnni", "avx_vnni"}),
        "platform": platform.platform(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "python": platform.python_version(),
    }
    for module in ("numpy", "tensorflow", "keras", "onnxruntime"):
        report[module] = _version(module, module in libraries)
    return report


def peak_rss_mib() -> float:
    """This process's peak resident set size so far (ru_maxrss is KiB on Linux)."""
    scale = 1 if sys.platform == "darwin" else 1024  # macOS reports bytes
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


def matmul_gflops(rounds: int = 5, size: int = MATMUL_SIZE) -> float:
    """This machine's float32 matrix-multiply rate in GFLOP/s: numpy ``size x size`` @
    ``size x size`` (2 size^3 FLOPs), best of ``rounds`` after one untimed warm-up, with
    numpy's BLAS using every core it is allowed."""
    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    a @ b
    best = min(timed(lambda: a @ b)[0] for _ in range(rounds))
    return 2.0 * size**3 / best / 1e9


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """(wall seconds, value) of ``fn()``."""
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


# ---------------------------------------------------------------------------- options

def int_list(text: str) -> list[int]:
    """``N,N,...`` (argparse type): positive integers."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, comma-separated, got {text!r}")
    return values


def _positive_int(text: str) -> int:
    from keras_nmt.cli.common import positive_int

    return positive_int(text)


def _size_list(text: str) -> list[tuple[str, dict[str, Any]]]:
    try:
        sizes = [(name, model_size(name)) for name in text.split(",") if name]
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    if not sizes:
        raise argparse.ArgumentTypeError("give at least one size")
    return sizes


def _size(text: str) -> tuple[str, dict[str, Any]]:
    [size] = _size_list(text)
    return size


def _weights() -> tuple[str, ...]:
    from keras_nmt.rundir.run_directory import WEIGHTS

    return WEIGHTS


# name: (flags, argparse keywords, older spellings). A benchmark may change the default
# and the help of an option, never its spelling or its meaning.
OPTIONS: dict[str, tuple[tuple[str, ...], dict[str, Any], tuple[str, ...]]] = {
    "data": (
        ("--data",),
        dict(metavar="DIR", help="corpus directory with train.SRC/.TGT and valid.SRC/.TGT"),
        ("--corpus",)),
    "src_lang": (
        ("--src-lang",),
        dict(dest="src", metavar="LANG", default="en",
             help="source language, the corpus files' suffix (default en)"),
        ()),
    "tgt_lang": (
        ("--tgt-lang",),
        dict(dest="tgt", metavar="LANG", default="fr",
             help="target language, the corpus files' suffix (default fr)"),
        ()),
    "vocab_size": (
        ("--vocab-size",),
        dict(type=_positive_int, default=30000, metavar="N",
             help="shortlist per side (default %(default)s)"),
        ()),
    "max_len": (
        ("--max-len",),
        dict(type=_positive_int, default=50, metavar="N",
             help="training pairs longer than this are dropped (default %(default)s)"),
        ()),
    "size": (
        ("--size",),
        dict(type=_size, metavar="SIZE",
             help="a model size as keras-nmt train --size names it (compact, medium, paper), "
                  "or E/H/N/L@B"),
        ()),
    "sizes": (
        ("--sizes",),
        dict(type=_size_list, metavar="SIZE,...",
             help="model sizes to sweep, comma-separated: compact, medium, paper (as keras-nmt "
                  "train --size names them) or E/H/N/L@B"),
        ()),
    "batch_size": (
        ("--batch-size",),
        dict(type=_positive_int, metavar="N", help="sentences a batch"),
        ("--batch",)),
    "batch_sizes": (
        ("--batch-sizes",),
        dict(type=int_list, metavar="N,...", help="batch sizes to sweep, comma-separated"),
        ()),
    "batches": (
        ("--batches",),
        dict(type=_positive_int, metavar="N", help="batches taken"),
        ()),
    "beam": (
        ("--beam",),
        dict(type=_positive_int, default=5, metavar="N", help="beam size (default %(default)s)"),
        ()),
    "beams": (
        ("--beams",),
        dict(type=int_list, metavar="N,...", help="beam sizes to sweep, comma-separated"),
        ()),
    "rounds": (
        ("--rounds",),
        dict(type=_positive_int, default=1, metavar="N",
             help="times each measurement is repeated (default %(default)s)"),
        ("--repeats",)),
    "warmup": (
        ("--warmup",),
        dict(type=_positive_int, metavar="N", help="untimed steps first (tracing)"),
        ()),
    "steps": (
        ("--steps",),
        dict(type=_positive_int, metavar="N", help="timed steps"),
        ()),
    "sentences": (
        ("--sentences",),
        dict(metavar="FILE", help="source sentences, one a line"),
        ()),
    "count": (
        ("--count",),
        dict(type=_positive_int, metavar="N", help="sentences used, spread evenly through the file"),
        ()),
    "weights": (
        ("--weights",),
        dict(choices=None, default="reported",
             help="which of the run's weights (default: those its report used)"),
        ()),
    "name": (
        ("--name",),
        dict(default="nmt", help="the model's name in the export (default nmt)"),
        ()),
    "clients": (
        ("--clients",),
        dict(type=_positive_int, default=32, metavar="N",
             help="clients sending at once, each one request at a time (default %(default)s)"),
        ()),
    "per_request": (
        ("--per-request",),
        dict(type=_positive_int, default=1, metavar="N",
             help="sentences a client's request (default %(default)s)"),
        ()),
    "no_spin": (
        ("--no-spin",),
        dict(dest="spin", action="store_false",
             help="serve with keras-nmt serve --no-spin (onnxruntime's idle threads sleep)"),
        ()),
    "work_niceness": (
        ("--work-niceness",),
        dict(type=int, default=0, metavar="N",
             help="serve with keras-nmt serve --work-niceness N: decoding below the event "
                  "loop's priority (default 0)"),
        ()),
    "copies": (
        ("--copies",),
        dict(type=int_list, default="1,10", metavar="R,...",
             help="corpus sizes, as copies of the corpus's training files (default 1,10)"),
        ("--repeat",)),
}


def add(parser: argparse.ArgumentParser, name: str, **changes) -> None:
    """Add the shared option ``name`` (a key of :data:`OPTIONS`) to ``parser``, with
    ``changes`` to its default, help or requiredness; its older spellings keep working."""
    flags, keywords, older = OPTIONS[name]
    keywords = {**keywords, **changes}
    if name == "weights":
        keywords["choices"] = _weights()
    parser.add_argument(*flags, **keywords)
    for spelling in older:
        parser.rename(spelling, flags[0])


def add_run_and_split(parser: argparse.ArgumentParser, batch_size: int = 64) -> None:
    """RUN_DIR, ``--src``/``--ref`` (a split to translate and score), ``--weights``,
    ``--beam`` and ``--batch-size``: what a benchmark of a run on a split takes."""
    parser.add_argument("run_dir")
    parser.add_argument("--src", required=True, metavar="FILE", help="source sentences")
    parser.add_argument("--ref", required=True, metavar="FILE", help="their references")
    add(parser, "weights")
    add(parser, "beam")
    add(parser, "batch_size", default=batch_size, help=f"sentences a batch (default {batch_size})")


def add_report_options(parser: argparse.ArgumentParser) -> None:
    """``--json FILE``, ``--note`` and ``--matmul-rounds``: the report's options."""
    parser.add_argument("--json", metavar="FILE", help="write the report (JSON) here")
    parser.add_argument("--note", default="", help="stored in the report (e.g. 'under load')")
    parser.add_argument("--matmul-rounds", type=_positive_int, default=5, metavar="N",
                        help="numpy matmul timings, the best of which is the machine's rate "
                             "in the report (default %(default)s)")
    parser.rename("--matmul-repeats", "--matmul-rounds")


def module(name: str) -> str:
    """The module a benchmark's ``name`` runs as: ``bench.NAME``, or the name itself when
    it is a module path already (``experiments.NAME``, the one-off experiments)."""
    return name if "." in name else f"bench.{name}"


def parser(name: str, doc: str, report: bool = True):
    """A benchmark's command line: one-line errors, no abbreviated options (an option
    is spelled as :data:`OPTIONS` spells it), and with ``report`` the report's options."""
    from keras_nmt.cli.common import OneLineParser

    made = OneLineParser(prog=f"python -m {module(name)}", description=doc.split("\n\n")[0],
                         allow_abbrev=False)
    if report:
        add_report_options(made)
    return made


def subparser(subparsers, name: str, help: str, report: bool = True):
    """A subcommand of a benchmark, with the report's options after it."""
    made = subparsers.add_parser(name, help=help, allow_abbrev=False)
    if report:
        add_report_options(made)
    return made


# ---------------------------------------------------------------------------- the report

class Bench:
    """One run of a benchmark: its name, command line and start, the machine's matmul
    rate (measured once, when first asked for), and the report written at the end."""

    def __init__(self, name: str, args: argparse.Namespace, argv: Sequence[str] | None = None,
                 libraries: Sequence[str] = ()):
        self.name, self.args = name, args
        self.argv = list(sys.argv[1:] if argv is None else argv)
        self.libraries = tuple(libraries)  # loaded by children: their versions are reported
        self.started = datetime.datetime.now(datetime.timezone.utc)
        self._clock = time.perf_counter()
        self._matmul: float | None = None

    @property
    def command(self) -> str:
        """The command line as a user types it."""
        return shlex.join(["python", "-m", module(self.name), *self.argv])

    def matmul_gflops(self) -> float:
        if self._matmul is None:
            rounds = getattr(self.args, "matmul_rounds", 5)
            self._matmul = matmul_gflops(rounds)
            self.log(f"numpy float32 {MATMUL_SIZE}x{MATMUL_SIZE} matmul: {self._matmul:.1f} "
                     f"GFLOP/s (best of {rounds})")
        return self._matmul

    def log(self, text: str) -> None:
        print(f"{module(self.name)}: {text}", file=sys.stderr, flush=True)

    def report(self, results: Any, settings: dict[str, Any] | None = None) -> dict[str, Any]:
        matmul = self.matmul_gflops()  # measured by now, its time among the run's seconds
        return {
            "benchmark": self.name,
            "command": self.command,
            "started": self.started.isoformat(timespec="seconds"),
            "seconds": round(time.perf_counter() - self._clock, 3),
            "machine": machine(self.libraries),
            "matmul_gflops": matmul,
            "note": getattr(self.args, "note", ""),
            "settings": settings or {},
            "results": results,
        }

    def write(self, results: Any, settings: dict[str, Any] | None = None,
              path: str | os.PathLike | None = None) -> dict[str, Any]:
        """The report, written atomically to ``path`` (default ``--json``; nothing is
        written without one); returned either way."""
        report = self.report(results, settings)
        path = path if path is not None else getattr(self.args, "json", None)
        if path:
            write_json(path, report)
        return report


def write_json(path: str | os.PathLike, value: Any) -> None:
    """``value`` as JSON, its keys in their order, written atomically (nothing
    half-written if interrupted; a non-finite number becomes null)."""
    from keras_nmt.core.atomic import json_text, write_text_atomic

    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json_text(value, indent=2, default=str) + "\n")


def table(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str, str]]) -> str:
    """Rows as an aligned plain-text table. ``columns``: (key, heading, format spec);
    a missing or None value prints as '-'."""
    def cell(row, key, spec):
        value = row.get(key)
        if value is None:
            return "-"
        return format(value, spec) if spec else str(value)

    cells = [[cell(row, key, spec) for key, _, spec in columns] for row in rows]
    widths = [max([len(heading)] + [len(r[k]) for r in cells]) for k, (_, heading, _) in enumerate(columns)]
    lines = ["  ".join(h.rjust(w) for (_, h, _), w in zip(columns, widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in cells]
    return "\n".join(lines)


# ---------------------------------------------------------------------------- children

def module_argv(name: str, *args: str) -> list[str]:
    """The command line of ``python -m bench.NAME ARGS`` with this interpreter."""
    return [sys.executable, "-m", module(name), *args]


def checkout_env(**extra: str) -> dict[str, str]:
    """The environment of a child: this one, with the checkout's root first on
    PYTHONPATH (its ``bench``, ``export`` and ``serving`` whatever the working directory)."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, **extra}


class ChildFailed(RuntimeError):
    """A child measurement exited with an error; the message ends with its stderr."""


def run_child(name: str, *args: str, **env: str) -> dict[str, Any]:
    """``python -m bench.NAME ARGS`` in a fresh interpreter (so its imports and its peak
    RSS are its own), from the checkout's root; returns the JSON object it printed last."""
    done = subprocess.run(module_argv(name, *args), capture_output=True, text=True, cwd=ROOT,
                          env=checkout_env(**env))
    if done.returncode != 0:
        raise ChildFailed(f"{module(name)} {' '.join(args[:1])} failed (exit status "
                          f"{done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------- sentences

def corpus_files(directories: Sequence[pathlib.Path], splits: Sequence[str],
                 languages: Sequence[str] | None = None) -> list[pathlib.Path]:
    """The SPLIT.LANG files of each corpus directory in ``directories``, or of the
    corpora one level under it, sorted; ``languages``: only those suffixes (else any
    two-letter one)."""
    return sorted({path for directory in directories for split in splits
                   for pattern in (f"{split}.*", f"*/{split}.*")
                   for path in pathlib.Path(directory).glob(pattern)
                   if (path.suffix[1:] in languages if languages else len(path.suffix) == 3)})


def spread(lines: Sequence[str], count: int) -> list[str]:
    """``count`` lines evenly spaced through ``lines``, in file order (all of them when
    there are no more): a file sorted by length still gives every length."""
    if len(lines) <= count:
        return list(lines)
    return [lines[(i * len(lines)) // count] for i in range(count)]


def spread_sentences(text: str, count: int) -> list[str]:
    """:func:`spread` over the non-empty lines of ``text``."""
    return spread([line for line in text.splitlines() if line.strip()], count)


def sentences(path: str | os.PathLike | None, count: int, run_dir: str | None = None,
              parser: argparse.ArgumentParser | None = None) -> list[str]:
    """``count`` non-empty lines spread through ``path``; without one, through the valid
    source file of ``run_dir``, or without a run, ``count`` sentences of the built-in
    corpus generator (seed 0). A file that cannot be read, or holds no sentence, is the
    user's error: ``parser.error`` with its message, else OSError or ValueError."""
    try:
        return _sentences(path, count, run_dir)
    except (OSError, ValueError) as error:
        if parser is None:
            raise
        parser.error(str(error))


def _sentences(path, count: int, run_dir) -> list[str]:
    if path is None and run_dir is not None:
        from keras_nmt.rundir.run_directory import RunDir

        path = RunDir(run_dir).split_files("valid", needed_for="the benchmark").source
    if path is not None:
        lines = spread_sentences(pathlib.Path(path).read_text(encoding="utf-8"), count)
        if not lines:
            raise ValueError(f"{path} has no non-empty line")
        return lines
    import random

    from keras_nmt.corpus import builtin
    from keras_nmt.text import word

    rng = random.Random(0)
    return [word.detokenize(builtin.generate_pair(rng).source, "en") for _ in range(count)]


# ---------------------------------------------------------------------------- decoding

def warm_then_time(translate: Callable[[Sequence[str]], Any], lines: Sequence[str],
                   batch_size: int) -> tuple[float, Any]:
    """(seconds, outputs) of ``translate(lines)``, after one untimed call on the first
    batch (tracing, session warm-up)."""
    translate(lines[:batch_size])
    return timed(lambda: translate(lines))


def export(run_dir: str | os.PathLike, out: pathlib.Path, name: str = "nmt",
           weights: str = "reported", options: Sequence[str] = ()) -> pathlib.Path:
    """``keras-nmt export RUN_DIR --out OUT --name NAME --weights W OPTIONS``, unless
    ``out`` already holds that export (from an earlier run of a benchmark: ONNX too where
    ``--onnx`` is asked). Returns ``out``."""
    from keras_nmt.cli import export as cli
    from keras_nmt.export import layout

    out = pathlib.Path(out)
    newest = max(layout.versions(out / name), default=None)
    if newest is not None and ("--onnx" not in options or (
            layout.onnx_dir(out, name, newest) / layout.metadata_name(name)).is_file()):
        return out
    print(f"bench: exporting {run_dir} to {out} {' '.join(options)}", file=sys.stderr, flush=True)
    if cli.main([str(run_dir), "--out", str(out), "--name", name, "--weights", weights,
                 *options]) != 0:
        raise SystemExit(f"bench: error: the export of {run_dir} failed (its message is above)")
    return out


# ---------------------------------------------------------------------------- training

# The fields a model size sets (keras_nmt.core.config.SIZES), the first four its dimensions.
DIMENSIONS = ("embedding", "hidden", "attention", "maxout")
SIZE_FIELDS = DIMENSIONS + ("batch_size", "optimizer", "learning_rate")


def model_size(text: str) -> dict[str, Any]:
    """A model size, every field of :data:`SIZE_FIELDS`: a name of
    ``keras_nmt.core.config.SIZES`` (as ``keras-nmt train --size`` takes it), or ``E/H/N/L@B``
    (those dimensions at batch B, Adam 2e-3)."""
    from keras_nmt.core.config import SIZES, Config

    if text in SIZES:
        defaults = Config()
        size = {field: getattr(defaults, field) for field in SIZE_FIELDS}
        size.update({k: v for k, v in SIZES[text].items() if k in SIZE_FIELDS})
        return size
    try:
        dims, batch = text.split("@")
        values = dict(zip(DIMENSIONS, (int(x) for x in dims.split("/")), strict=True))
        values["batch_size"] = int(batch)
    except ValueError:
        raise ValueError(f"size {text!r}: expected {', '.join(SIZES)} or E/H/N/L@B "
                         "(e.g. 256/256/256/128@64)") from None
    if min(values.values()) < 1:
        raise ValueError(f"size {text!r}: every number must be positive")
    return {**values, "optimizer": "adam", "learning_rate": 2e-3}


def new_trainer(config, batches, run_path: str | os.PathLike, **options):
    """A Trainer of a fresh model of ``config`` on ``batches`` (seeded with config.seed),
    with no development set; it writes nothing, but needs a run directory.

    It trains what an adapted run would: all but ``config.freeze``'s parts, and with
    ``config.parent_pull`` pulls toward the fresh model's first weights, which stand in
    for a parent's (a child's pull is the same ops over the same weights)."""
    import keras

    from keras_nmt.runner.adaptation import trained_variables
    from keras_nmt.models.rnnsearch import TranslationModel
    from keras_nmt.rundir.run_directory import RunDir
    from keras_nmt.training import Trainer
    from keras_nmt.training.pull import ParentPull

    keras.utils.set_random_seed(config.seed)
    options.setdefault("train_pairs", 1)
    model = TranslationModel(config)
    variables = trained_variables(model, config)
    pull = (ParentPull(config.parent_pull, variables, [None] * len(variables))
            if config.parent_pull else None)
    return Trainer(config, model, RunDir(run_path), batches, lambda: None,
                   variables=variables, pull=pull, **options)


def train_step(trainer, batch) -> dict[str, Any]:
    """One training step on ``batch``, ended by reading its figures back (the step is
    asynchronous): loss, target tokens, padded target slots and sentences."""
    (source, target_in), target_out = batch
    loss, tokens, _ = trainer.train_step(source, target_in, target_out)
    return {"loss": float(loss), "tokens": int(tokens), "sentences": int(target_out.shape[0]),
            "slots": int(target_out.shape[0] * target_out.shape[1])}


@dataclasses.dataclass
class Corpus:
    """A corpus directory's splits, the training split's statistics, and the source and
    target shortlists (``vocab_size`` words each, the reserved symbols included), built
    the way training builds a run's."""

    path: pathlib.Path
    splits: dict
    train: dict  # scan_training_split(...).summary()
    source_vocab: Any
    target_vocab: Any
    src: str = "en"
    tgt: str = "fr"
    max_len: int = 50

    @classmethod
    def scan(cls, path: str | os.PathLike, src: str, tgt: str, max_len: int,
             vocab_size: int) -> "Corpus":
        from keras_nmt.corpus.readers import find_corpus
        from keras_nmt.corpus.scan import scan_training_split
        from keras_nmt.text.vocab import Vocabulary

        path = pathlib.Path(path)
        splits = find_corpus(path, src, tgt)
        stats = scan_training_split(splits["train"], src, tgt, max_len)
        return cls(
            path, splits, stats.summary(),
            Vocabulary.from_counts(stats.source_counts, vocab_size),
            Vocabulary.from_counts(stats.target_counts, vocab_size),
            src, tgt, max_len,
        )

    def encoders(self):
        """The graph encoders of the two shortlists (what training batches with)."""
        from keras_nmt.text.word_graph import WordEncoder

        return WordEncoder(self.source_vocab, self.src), WordEncoder(self.target_vocab, self.tgt)


# ---------------------------------------------------------------------------- browsers

def headless_chromium(width: int = 900, height: int = 800):
    """Debian's headless Chromium driven by selenium through Debian's chromedriver
    (``apt-get install chromium chromium-driver``; nothing downloaded); SystemExit with
    that advice where either is missing."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if not (chromium and driver_path):
        raise SystemExit("needs Chromium and chromedriver (apt-get install chromium "
                         "chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--no-proxy-server",
                     "--disable-dev-shm-usage", f"--window-size={width},{height}"):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(driver_path), options=options)
