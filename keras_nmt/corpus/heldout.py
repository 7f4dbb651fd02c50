"""Development data cut once into two halves: one that selects, one that is only reported.

A score is honest only on data that chose nothing. When a corpus has no test split, its
development (valid) split does two jobs: it picks the checkpoints, the early stop,
``evaluate --tune`` and every recipe choice, and it is where results are reported. Here
it is cut once, by a rule that depends on nothing but each pair's source line:

- a pair goes to the **report** half when the CRC-32 of its source line (UTF-8, with
  surrounding white space removed) is odd, else to the **select** half;
- so identical source lines always fall into the same half, the cut does not depend on
  the order of the file or on the machine, and a pair keeps its half when lines are
  added to the file.

``keras-nmt train`` on such a corpus writes both halves into ``RUN_DIR/heldout/``,
selects on ``select.*`` and reports on ``report.*``; :func:`write_halves` cuts any pair
of files the same way.

Cost: two passes over the development split (count, then write), memory for one line
at a time.
"""

from __future__ import annotations

import collections
import contextlib
import pathlib
import zlib

from keras_nmt.core.atomic import open_atomic
from keras_nmt.corpus.readers import ParallelFiles

SELECT = "select"
REPORT = "report"
HALVES = (SELECT, REPORT)
RULE = "report when crc32(source line, UTF-8, stripped) is odd, else select"


def half_of(source_line: str) -> str:
    """The half a pair belongs to, from its source line alone."""
    return REPORT if zlib.crc32(source_line.strip().encode("utf-8")) & 1 else SELECT


def half_files(directory: pathlib.Path, src: str, tgt: str) -> dict[str, ParallelFiles]:
    """Where :func:`write_halves` puts each half in ``directory``."""
    return {half: ParallelFiles(directory / f"{half}.{src}", directory / f"{half}.{tgt}")
            for half in HALVES}


def write_halves(files: ParallelFiles, directory: pathlib.Path, src: str,
                 tgt: str) -> dict[str, ParallelFiles] | None:
    """Cut ``files`` into ``directory/{select,report}.{src,tgt}``; returns the two halves'
    files, or None (and writes nothing) when one half would be empty, as for a
    development split of one sentence. Each file is written atomically."""
    counts = collections.Counter(half_of(source) for source, _ in files.pairs())
    if not all(counts[half] for half in HALVES):
        return None
    directory.mkdir(parents=True, exist_ok=True)
    halves = half_files(directory, src, tgt)
    with contextlib.ExitStack() as stack:
        outputs = {half: tuple(stack.enter_context(open_atomic(path, "w", encoding="utf-8",
                                                               newline="\n"))
                               for path in (f.source, f.target))
                   for half, f in halves.items()}
        for source, target in files.pairs():
            source_file, target_file = outputs[half_of(source)]
            source_file.write(source + "\n")
            target_file.write(target + "\n")
    return halves
