"""The lexical table p(t | s) of a run: IBM Model 1 over its training pairs.

Vocabulary selection (:func:`keras_nmt.search.shortlist_columns`) needs, for every source
word, the target words it is most likely translated by: Jean et al. (2015) took them
from word alignments, Marian from a ``lex.s2t`` table. Here they come from IBM Model 1
(Brown et al., 1993), trained by EM on the run's own training pairs, tokenized by the
run's codecs, so that the table speaks the ids the model speaks. No external aligner.

The EM runs on numpy arrays holding one entry per (sentence, source position, target
position), the source side with a NULL word at position 0, so the memory is about
48 bytes times the sum over sentences of (source length + 1) x target length (Anki:
11M entries, about 0.6 GB; it is reported). Every word pair that co-occurs in a sentence
is a parameter; pairs that never do have probability 0. The table keeps the ``best``
most probable targets of each source word (reserved ids excluded), best first; the
reserved source ids (padding, BOS, EOS) get no translations, so a batch's padding adds
nothing to its shortlist.

No TensorFlow here: the run directory reads and writes the table
(:meth:`keras_nmt.rundir.RunDir.write_lexicon`), the search gathers from it.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, Iterable, Sequence

import numpy as np

from keras_nmt.constants import BOS_ID, EOS_ID, PAD_ID, RESERVED

NULL = PAD_ID  # the NULL source word of Model 1 borrows the padding id (never a real word)
DEFAULT_ITERATIONS = 5
DEFAULT_BEST = 50  # translations kept per source word; a search may use fewer


class LexiconError(ValueError):
    """A lexical table that cannot be built or used; the message says why."""


@dataclasses.dataclass(frozen=True)
class Lexicon:
    """``targets`` int32 [source vocabulary, best]: the most probable target ids of each
    source id, best first, padded with PAD_ID; ``probs`` float32, the same shape: their
    p(t | s), 0 in padding. ``info``: how it was built (corpus size, iterations, seconds,
    memory)."""

    targets: np.ndarray
    probs: np.ndarray
    info: dict

    @property
    def best(self) -> int:
        return int(self.targets.shape[1])

    def translations(self, source_id: int, count: int | None = None) -> list[int]:
        """The target ids of one source id, best first (no padding)."""
        row = self.targets[source_id, : count or self.best]
        return [int(t) for t in row if t != PAD_ID]

    def check(self, source_vocab_size: int, target_vocab_size: int) -> None:
        """Raise :class:`LexiconError` unless the table fits the run's vocabularies."""
        if self.targets.ndim != 2 or self.targets.shape != self.probs.shape:
            raise LexiconError(f"malformed lexical table: shapes {self.targets.shape} and "
                               f"{self.probs.shape}")
        if self.targets.shape[0] != source_vocab_size:
            raise LexiconError(f"the lexical table has {self.targets.shape[0]} source words, "
                               f"the run's vocabulary {source_vocab_size}: rebuild it "
                               f"(keras-nmt lexicon RUN_DIR)")
        if self.targets.size and not (0 <= self.targets.min() and self.targets.max() < target_vocab_size):
            raise LexiconError("the lexical table names target ids outside the run's vocabulary: "
                               "rebuild it (keras-nmt lexicon RUN_DIR)")


def shortlist_inputs(shortlist: tuple[int, int] | None, lexicon: Lexicon | None) -> tuple[int, ...]:
    """The extra inputs of the search function: () without a lexical table, (0, 0) (off)
    or (F, B) with one. :class:`LexiconError` for a shortlist without a table or with
    sizes it cannot serve."""
    if shortlist is None:
        return () if lexicon is None else (0, 0)
    if lexicon is None:
        raise LexiconError("vocabulary selection needs the run's lexical table: build it with "
                           "keras-nmt lexicon RUN_DIR")
    frequent, best = shortlist
    for name, value in (("frequent", frequent), ("best", best)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise LexiconError(f"shortlist {name} must be an integer >= 0, got {value!r}")
    if best > lexicon.best:
        raise LexiconError(f"shortlist best ({best}) exceeds the {lexicon.best} translations per "
                           f"source word the lexical table keeps")
    if frequent == 0 and best == 0:
        raise LexiconError("shortlist (0, 0) selects no word: give F or B > 0")
    return int(frequent), int(best)


def _alignment_grid(sources: Sequence[np.ndarray], targets: Sequence[np.ndarray]):
    """One entry per (sentence, source position incl. NULL, target position): the source
    id, the target id and the target position's global index (what an E-step
    normalises over)."""
    src_lens = np.array([len(s) + 1 for s in sources], np.int64)  # + NULL
    tgt_lens = np.array([len(t) for t in targets], np.int64)
    src_flat = np.concatenate([np.concatenate([[NULL], s]) for s in sources]).astype(np.int64)
    tgt_flat = np.concatenate([np.asarray(t, np.int64) for t in targets] or [np.zeros(0, np.int64)])
    src_start = np.concatenate([[0], np.cumsum(src_lens)[:-1]])
    tgt_start = np.concatenate([[0], np.cumsum(tgt_lens)[:-1]])
    cells = src_lens * tgt_lens
    sentence = np.repeat(np.arange(len(sources)), cells)
    offset = np.arange(int(cells.sum())) - np.repeat(np.cumsum(cells) - cells, cells)
    width = tgt_lens[sentence]
    i, j = offset // width, offset % width
    position = tgt_start[sentence] + j
    return src_flat[src_start[sentence] + i], tgt_flat[position], position, int(tgt_lens.sum())


def train_model1(
    pairs: Iterable[tuple[Sequence[int], Sequence[int]]],
    source_vocab_size: int,
    target_vocab_size: int,
    iterations: int = DEFAULT_ITERATIONS,
    best: int = DEFAULT_BEST,
    log: Callable[[str], None] | None = None,
) -> Lexicon:
    """IBM Model 1's t(t | s) by ``iterations`` rounds of EM over ``pairs`` of id
    sequences (no EOS), starting from uniform; the ``best`` targets of each source id.

    A round: every target token spreads one count over the source words of its sentence
    (NULL included) in proportion to their current t(t | s); t(t | s) becomes each
    pair's count over its source word's total."""
    if iterations < 1 or best < 1:
        raise LexiconError(f"iterations and best must be positive, got {iterations} and {best}")
    started = time.perf_counter()
    sources, targets = [], []
    for source, target in pairs:
        if len(source) and len(target):
            sources.append(np.asarray(source, np.int64))
            targets.append(np.asarray(target, np.int64))
    if not sources:
        raise LexiconError("no non-empty training pair to build a lexical table from")
    src_ids, tgt_ids, position, positions = _alignment_grid(sources, targets)
    keys = src_ids * target_vocab_size + tgt_ids
    pair_keys, pair_of = np.unique(keys, return_inverse=True)
    del keys, tgt_ids
    pair_source = pair_keys // target_vocab_size
    entries = int(src_ids.size)
    # Peak: the grid (4 arrays) plus one float64 array of the same length per E-step.
    grid_bytes = entries * 8 * 6 + pair_keys.size * 8 * 4
    prob = np.ones(pair_keys.size)
    for round_ in range(iterations):
        p = prob[pair_of]
        share = p / np.bincount(position, weights=p, minlength=positions)[position]
        counts = np.bincount(pair_of, weights=share, minlength=pair_keys.size)
        totals = np.bincount(pair_source, weights=counts, minlength=source_vocab_size)
        prob = counts / totals[pair_source]
        if log:
            log(f"lexicon: EM round {round_ + 1}/{iterations} "
                f"({time.perf_counter() - started:.1f} s)")
    pair_target = pair_keys % target_vocab_size
    usable = (pair_target >= len(RESERVED)) & ~np.isin(pair_source, (NULL, BOS_ID, EOS_ID))
    order = np.lexsort((-prob[usable], pair_source[usable]))
    src_sorted = pair_source[usable][order]
    rank = np.arange(src_sorted.size) - np.searchsorted(src_sorted, src_sorted, side="left")
    keep = rank < best
    table = np.zeros((source_vocab_size, best), np.int32)
    probs = np.zeros((source_vocab_size, best), np.float32)
    table[src_sorted[keep], rank[keep]] = pair_target[usable][order][keep]
    probs[src_sorted[keep], rank[keep]] = prob[usable][order][keep]
    info = {
        "method": "IBM Model 1, EM from uniform",
        "iterations": iterations,
        "best": best,
        "pairs": len(sources),
        "source_tokens": int(sum(len(s) for s in sources)),
        "target_tokens": positions,
        "alignment_entries": entries,
        "word_pairs": int(pair_keys.size),
        "peak_bytes_estimate": grid_bytes,
        "seconds": time.perf_counter() - started,
    }
    return Lexicon(table, probs, info)


def build_for_run(run, iterations: int = DEFAULT_ITERATIONS, best: int = DEFAULT_BEST,
                  log: Callable[[str], None] | None = None) -> Lexicon:
    """Build the table of a run directory (a :class:`~keras_nmt.rundir.RunDir`) from its
    training split, tokenized by its codecs, pairs longer than its ``max_len`` left out
    as training leaves them out, and write it there."""
    started = time.perf_counter()
    config = run.load_config()
    files = run.split_files("train", needed_for="the lexical table")
    if files is None:
        raise LexiconError(f"{run.path}: data.json names no training split")
    source_codec, target_codec = run.codecs()
    pairs = []
    for source_line, target_line in files.pairs():
        source, target = source_codec.encode(source_line), target_codec.encode(target_line)
        if len(source) <= config.max_len and len(target) <= config.max_len:
            pairs.append((source, target))
    if log:
        log(f"lexicon: {len(pairs):,} training pairs tokenized "
            f"({time.perf_counter() - started:.1f} s)")
    lexicon = train_model1(pairs, len(source_codec.vocabulary), len(target_codec.vocabulary),
                           iterations, best, log)
    lexicon.info["total_seconds"] = time.perf_counter() - started
    run.write_lexicon(lexicon)
    return lexicon
