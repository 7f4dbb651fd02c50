"""What every benchmark under bench/ shares: the machine and library versions, a plain
text table, the JSON report, and a corpus directory's shortlists and encoders.

The benchmarks are scripts (``python bench/NAME.py``); each puts the checkout's root on
``sys.path`` before importing this module, so ``keras_nmt``, ``export`` and ``serving``
are this checkout's.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import platform
import resource
import sys
import time
from typing import Any, Callable, Sequence

ROOT = pathlib.Path(__file__).resolve().parent.parent


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else platform.processor()."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(module: str) -> str | None:
    try:
        from importlib import metadata

        return metadata.version(module)
    except Exception:  # not installed: the report says so with null
        return None


def machine() -> dict[str, Any]:
    """CPU model, logical cores (and those this process may use), RAM, OS and the versions
    of the libraries the benchmarks time."""
    import psutil

    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "ram_gib": round(psutil.virtual_memory().total / 2**30, 2),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "tensorflow": _version("tensorflow"),
        "keras": _version("keras"),
        "onnxruntime": _version("onnxruntime"),
        "numpy": _version("numpy"),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def peak_rss_mib() -> float:
    """This process's peak resident set size so far (ru_maxrss is KiB on Linux)."""
    scale = 1 if sys.platform == "darwin" else 1024  # macOS reports bytes
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


def matmul_flops(size: int = 2048, repeats: int = 5) -> dict[str, Any]:
    """This machine's float32 matrix-multiply rate: numpy ``size x size`` @ ``size x size``
    (2 size^3 FLOPs), best of ``repeats`` after one untimed warm-up, with numpy's BLAS
    using every core it is allowed."""
    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    a @ b
    best = min(_seconds(lambda: a @ b) for _ in range(repeats))
    return {"size": size, "repeats": repeats, "best_seconds": best,
            "flops_per_second": 2.0 * size**3 / best}


def _seconds(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


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


def spread(lines: Sequence[str], count: int) -> list[str]:
    """``count`` lines evenly spaced through ``lines``, in file order (all of them when
    there are no more): a file sorted by length still gives every length."""
    if len(lines) <= count:
        return list(lines)
    return [lines[(i * len(lines)) // count] for i in range(count)]


def spread_sentences(text: str, count: int) -> list[str]:
    """:func:`spread` over the non-empty lines of ``text``."""
    return spread([line for line in text.splitlines() if line.strip()], count)


def write_report(path: str | os.PathLike | None, report: dict[str, Any]) -> None:
    """The JSON report, written atomically (nothing half-written if interrupted)."""
    if path is None:
        return
    from keras_nmt.rundir import write_json_atomic

    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, report)


@dataclasses.dataclass
class Corpus:
    """A corpus directory's splits, the training split's statistics, and the source and
    target shortlists (``vocab_size`` words each, the reserved symbols included), built
    the way ``experiment.train`` builds a run's."""

    path: pathlib.Path
    splits: dict
    train: dict  # scan_training_split(...).summary()
    source_vocab: Any
    target_vocab: Any

    @classmethod
    def scan(cls, path: str | os.PathLike, src: str, tgt: str, max_len: int,
             vocab_size: int) -> "Corpus":
        from keras_nmt.corpus.readers import find_corpus, scan_training_split
        from keras_nmt.vocab import Vocabulary

        path = pathlib.Path(path)
        splits = find_corpus(path, src, tgt)
        stats = scan_training_split(splits["train"], src, tgt, max_len)
        return cls(
            path, splits, stats.summary(),
            Vocabulary.from_counts(stats.source_counts, vocab_size),
            Vocabulary.from_counts(stats.target_counts, vocab_size),
        )
