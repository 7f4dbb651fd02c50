"""A run's training pairs as token ids, sampled evenly through its training split: what
the lexical table (:mod:`keras_nmt.lexicon.table`) and the unknown-word dictionary
(:mod:`keras_nmt.lexicon.unk_dictionary`) learn from.

The sample is deterministic and spread through the whole split, not its first lines:
pair ``i`` (from 0) of N is taken when ``(i + 1) S // N`` passes ``i S // N`` for a
sample of S (:func:`sampled_lines`, :func:`sampled_indices`); a split no larger than S is
taken whole. From a prepared split (:mod:`keras_nmt.data.prepared`) the pairs are gathered
with the ids training read (:func:`prepared_training_pairs`); without one, the sampled
lines of the text are tokenized again (:func:`sampled_training_pairs`), pairs empty or
longer than the run's ``max_len`` left out, as training leaves them out.

Cost: from a prepared split O(S) whatever N (one gather a chunk of pairs); from text one
reading pass, O(N) lines, tokenizing the S sampled ones in Python. The pairs are held in
:class:`TokenizedPairs`: 4 bytes a token (8 while they are gathered), 8 a pair.
"""

from __future__ import annotations

import contextlib
from typing import Callable, Sequence

import numpy as np

from keras_nmt.corpus.readers import count_lines
from keras_nmt.core.errors import LexiconError, RunDirError
from keras_nmt.core.progress import Phase, Progress


def sampled_lines(total: int, sample: int) -> Callable[[int], bool]:
    """Whether line ``i`` (from 0) of a ``total``-line file is in a sample of ``sample``
    lines spread evenly through it: all of them when the file is no longer."""
    if total <= sample:
        return lambda i: True
    return lambda i: (i + 1) * sample // total > i * sample // total


def sampled_indices(total: int, sample: int) -> np.ndarray:
    """The numbers of the lines :func:`sampled_lines` takes, int64 ascending, computed
    without visiting the others: the k-th (from 0) is the first ``i`` at which
    ``(i + 1) * sample // total`` reaches ``k + 1``."""
    if total <= sample:
        return np.arange(total, dtype=np.int64)
    k = np.arange(1, sample + 1, dtype=np.int64)
    return -(-k * total // sample) - 1


class TokenizedPairs:
    """Id pairs held compactly: every source id in one int32 array, every target id in
    another, and the lengths (4 bytes a token, 8 a pair)."""

    BLOCK = 8192  # pairs gathered in Python lists before they become arrays

    def __init__(self):
        self._blocks: list[tuple[np.ndarray, ...]] = []
        self._pending: tuple[list[int], list[int], list[int], list[int]] = ([], [], [], [])

    def add(self, source: Sequence[int], target: Sequence[int]) -> None:
        src, tgt, src_lens, tgt_lens = self._pending
        src.extend(source)
        tgt.extend(target)
        src_lens.append(len(source))
        tgt_lens.append(len(target))
        if len(src_lens) >= self.BLOCK:
            self._flush()

    def _flush(self) -> None:
        if self._pending[2]:
            self._blocks.append(tuple(np.asarray(part, np.int32) for part in self._pending))
            self._pending = ([], [], [], [])

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(source ids, target ids, source lengths, target lengths), the blocks joined."""
        self._flush()
        if len(self._blocks) != 1:
            joined = tuple(np.concatenate([b[k] for b in self._blocks]) if self._blocks
                           else np.zeros(0, np.int32) for k in range(4))
            self._blocks = [joined]
        return self._blocks[0]

    def add_block(self, source: np.ndarray, target: np.ndarray, source_lengths: np.ndarray,
                  target_lengths: np.ndarray) -> None:
        """Pairs already flat: their ids one side after the other, and their lengths."""
        self._flush()
        self._blocks.append((np.asarray(source, np.int32), np.asarray(target, np.int32),
                             np.asarray(source_lengths, np.int32),
                             np.asarray(target_lengths, np.int32)))

    def __len__(self) -> int:
        return sum(b[2].size for b in self._blocks) + len(self._pending[2])

    def mapped(self, source: np.ndarray, target: np.ndarray) -> "TokenizedPairs":
        """The same pairs with each source id ``i`` read as ``source[i]`` and each target
        id as ``target[i]`` (one gather a side)."""
        src, tgt, src_lens, tgt_lens = self.arrays()
        out = TokenizedPairs()
        out._blocks = [(source[src].astype(np.int32), target[tgt].astype(np.int32),
                        src_lens, tgt_lens)]
        return out


PREPARED_CHUNK = 8192  # pairs gathered at a time from a prepared split


def prepared_training_pairs(run, sample: int, progress: Progress
                            ) -> tuple[TokenizedPairs, int, int] | None:
    """(the id pairs, the split's lines, the pairs sampled) from the run's prepared split:
    ``sample`` of the pairs training kept, spread evenly through them (all of a smaller
    split), with the ids training reads, so the table and the model see the same tokens.
    None for a run without one (made before it, or moved without it)."""
    split = open_prepared_split(run)
    if split is None:
        return None
    with contextlib.closing(split):
        return prepared_sample(split, sample, progress)


def open_prepared_split(run, needed_for: str = "the lexical table"):
    """The run's prepared training split, open; None without one (or a damaged one: the
    text is read instead)."""
    try:
        return run.prepared_split(needed_for=needed_for)
    except RunDirError:
        return None


def prepared_sample(split, sample: int, progress: Progress, what: str = "lexical table"
                    ) -> tuple[TokenizedPairs, int, int]:
    """:func:`prepared_training_pairs` of a split already open; ``what`` names the work
    in the progress line."""
    chosen = sampled_indices(split.count, sample)
    phase = Phase(progress, f"{what}: reading {len(chosen):,} of {split.count:,} "
                  "prepared training pairs", total=len(chosen), unit="pairs")
    pairs = TokenizedPairs()
    for start in range(0, len(chosen), PREPARED_CHUNK):
        source, source_lengths, target, target_lengths = split.gather(
            chosen[start:start + PREPARED_CHUNK])
        pairs.add_block(source, target, source_lengths, target_lengths)
        phase.advance(len(source_lengths))
    phase.finish(f"{len(pairs):,} pairs")
    return pairs, int(split.info["train"]["pairs"]), len(chosen)


def sampled_training_pairs(
    run, encode_source: Callable[[str], Sequence[int]], encode_target: Callable[[str], Sequence[int]],
    sample: int, progress: Progress, what: str,
) -> tuple[TokenizedPairs, int, int]:
    """(the id pairs, the split's lines, the lines sampled): ``sample`` lines of a run's
    training split spread evenly through it (all of a shorter split), each side
    encoded; pairs empty or longer than the run's ``max_len`` are left out, as training
    leaves them out. ``what`` names the work in the progress line."""
    config = run.load_config()
    files = run.split_files("train", needed_for=f"the {what}")
    if files is None:
        raise LexiconError(f"{run.path}: data.json names no training split")
    lines = count_lines(files.source)
    sampled = min(lines, sample)
    chosen = sampled_lines(lines, sample)
    phase = Phase(progress, f"{what}: tokenizing a sample of {sampled:,} of {lines:,} training "
                  "lines", total=sampled, unit="lines")
    pairs = TokenizedPairs()
    for number, (source_line, target_line) in enumerate(files.pairs()):
        if not chosen(number):
            continue
        source, target = encode_source(source_line), encode_target(target_line)
        if 0 < len(source) <= config.max_len and 0 < len(target) <= config.max_len:
            pairs.add(source, target)
        phase.advance()
    phase.finish(f"{len(pairs):,} pairs kept")
    return pairs, lines, sampled
