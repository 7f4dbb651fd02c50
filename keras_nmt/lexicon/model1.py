"""IBM Model 1 (Brown et al., 1993) by EM over id pairs, in bounded memory: the
estimation behind the lexical table (:mod:`keras_nmt.lexicon.table`, which says what the table
is for and how the memory limits are chosen).

A round: every target token spreads one count over the source words of its sentence
(NULL included) in proportion to their current t(t | s); t(t | s) becomes each pair's
count over its source word's total. The pairs are streamed in chunks of about
``chunk_entries`` (sentence, source position with NULL, target position) entries, about
70 bytes an entry; the table is sparse and holds at most ``max_word_pairs`` pairs (about
150 bytes a pair at its peak): the first round collects every pair that co-occurs in a
sentence, and when they outgrow twice the limit keeps, for every source word, its best
pairs by count(s, t) / count(s) so far, as many as half the room allows, and the best of
the rest whatever their word. The later rounds re-estimate those pairs only.

Cost: per round O(E log P) for the E alignment entries of the pairs and the P pairs of
the table.
"""

from __future__ import annotations

import time
from typing import Iterator

import numpy as np

from keras_nmt.core.constants import BOS_ID, EOS_ID, PAD_ID, RESERVED
from keras_nmt.core.progress import Phase, Progress

NULL = PAD_ID  # the NULL source word of Model 1 borrows the padding id (never a real word)


def estimate(src_flat: np.ndarray, tgt_flat: np.ndarray, src_lens: np.ndarray,
             tgt_lens: np.ndarray, source_vocab_size: int, target_vocab_size: int,
             iterations: int, best: int, progress: Progress, chunk_entries: int,
             max_word_pairs: int) -> tuple[np.ndarray, np.ndarray, dict]:
    """t(t | s) by ``iterations`` rounds of EM from uniform over the pairs given as flat
    ids and lengths (no EOS, none empty): (targets int32 [source vocabulary, best], the
    ``best`` most probable target ids of each source id, best first, padded with 0;
    their probabilities float32, 0 in padding; what was done). Reserved target ids and
    the NULL, BOS and EOS source ids get no translations. ``progress`` shows the rounds."""
    started = time.perf_counter()
    chunks = list(_chunks(src_lens, tgt_lens, chunk_entries))
    table = _Table(target_vocab_size, source_vocab_size, max_word_pairs)
    phase = Phase(progress, f"lexicon: EM, {iterations} rounds "
                  f"of {len(chunks)} chunks", total=iterations * len(chunks), unit="chunks")
    for round_ in range(iterations):
        for first, end, src_at, tgt_at in chunks:
            lens = src_lens[first:end], tgt_lens[first:end]
            table.e_step(*_alignment_grid(src_flat[src_at:src_at + int(lens[0].sum())], lens[0],
                                          tgt_flat[tgt_at:tgt_at + int(lens[1].sum())], lens[1]))
            phase.advance()
        table.m_step()
        phase.progress.message(f"lexicon: EM round {round_ + 1}/{iterations} "
                               f"({time.perf_counter() - started:.1f} s)")
    pair_source, pair_target = table.keys // target_vocab_size, table.keys % target_vocab_size
    prob = table.prob
    usable = (pair_target >= len(RESERVED)) & ~np.isin(pair_source, (NULL, BOS_ID, EOS_ID))
    order = np.lexsort((-prob[usable], pair_source[usable]))
    src_sorted = pair_source[usable][order]
    rank = np.arange(src_sorted.size) - np.searchsorted(src_sorted, src_sorted, side="left")
    keep = rank < best
    targets = np.zeros((source_vocab_size, best), np.int32)
    probs = np.zeros((source_vocab_size, best), np.float32)
    targets[src_sorted[keep], rank[keep]] = pair_target[usable][order][keep]
    probs[src_sorted[keep], rank[keep]] = prob[usable][order][keep]
    cells = (src_lens.astype(np.int64) + 1) * tgt_lens
    info = {
        "method": "IBM Model 1, EM from uniform",
        "iterations": iterations,
        "best": best,
        "pairs": int(src_lens.size),
        "source_tokens": int(src_lens.sum()),
        "target_tokens": int(tgt_lens.sum()),
        "alignment_entries": int(cells.sum()),
        "chunks": len(chunks),
        "word_pairs": int(table.keys.size),
        "word_pairs_pruned": table.pruned,
    }
    return targets, probs, info


def _chunks(src_lens: np.ndarray, tgt_lens: np.ndarray,
            entries: int) -> Iterator[tuple[int, int, int, int]]:
    """(first pair, end pair, first source token, first target token) of consecutive runs
    of pairs holding about ``entries`` alignment entries each (a run may pass it by one
    pair's entries)."""
    cells = (src_lens.astype(np.int64) + 1) * tgt_lens
    before = np.cumsum(cells) - cells
    starts = np.concatenate([[0], np.flatnonzero(np.diff(before // entries)) + 1, [cells.size]])
    src_offsets = np.concatenate([[0], np.cumsum(src_lens, dtype=np.int64)])
    tgt_offsets = np.concatenate([[0], np.cumsum(tgt_lens, dtype=np.int64)])
    for first, end in zip(starts[:-1], starts[1:]):
        yield int(first), int(end), int(src_offsets[first]), int(tgt_offsets[first])


def _alignment_grid(src_flat: np.ndarray, src_lens: np.ndarray, tgt_flat: np.ndarray,
                    tgt_lens: np.ndarray):
    """One entry per (sentence, source position incl. NULL, target position) of the
    sentences given as flat ids and lengths: the source id, the target id and the target
    position's index (what an E-step normalises over), and the number of positions."""
    src_lens1 = src_lens.astype(np.int64) + 1  # + NULL
    tgt_lens = tgt_lens.astype(np.int64)
    src_start = np.cumsum(src_lens1) - src_lens1
    with_null = np.full(int(src_lens1.sum()), NULL, np.int64)
    real = np.ones(with_null.size, bool)
    real[src_start] = False
    with_null[real] = src_flat
    tgt_start = np.cumsum(tgt_lens) - tgt_lens
    cells = src_lens1 * tgt_lens
    sentence = np.repeat(np.arange(src_lens.size), cells)
    offset = np.arange(int(cells.sum())) - np.repeat(np.cumsum(cells) - cells, cells)
    i, j = np.divmod(offset, tgt_lens[sentence])
    del offset
    position = tgt_start[sentence] + j
    source = with_null[src_start[sentence] + i]
    return source, tgt_flat[position].astype(np.int64), position, int(tgt_lens.sum())


class _Table:
    """The sparse t-table: sorted keys (source x target vocabulary + target) and, per
    key, the counts of the round under way and the probabilities of the last."""

    def __init__(self, target_vocab_size: int, source_vocab_size: int, max_pairs: int):
        self.width, self.sources, self.max_pairs = target_vocab_size, source_vocab_size, max_pairs
        self.keys = np.zeros(0, np.int64)
        self.counts = np.zeros(0)
        self.prob: np.ndarray | None = None  # None: uniform (the first round)
        self.pruned = 0  # pairs dropped to stay within max_pairs

    def e_step(self, source: np.ndarray, target: np.ndarray, position: np.ndarray,
               positions: int) -> None:
        """Add one chunk's expected counts: each target position spreads one count over
        its sentence's source words in proportion to their t(t | s)."""
        keys = source * self.width + target
        if self.prob is None:  # uniform: every co-occurring pair joins the table
            chunk_keys, index = np.unique(keys, return_inverse=True)
            del keys
            share = 1.0 / np.bincount(position, minlength=positions)[position]
            self._merge(chunk_keys, np.bincount(index, weights=share, minlength=chunk_keys.size))
            return
        # Sorted needles let the binary searches share their path: 5-7x faster.
        order = np.argsort(keys)
        index = np.empty_like(order)
        index[order] = np.searchsorted(self.keys, keys[order])
        del order
        np.minimum(index, self.keys.size - 1, out=index)
        known = self.keys[index] == keys
        del keys
        p = np.where(known, self.prob[index], 0.0)
        total = np.bincount(position, weights=p, minlength=positions)[position]
        share = np.divide(p, total, out=np.zeros_like(p), where=total > 0)
        self.counts += np.bincount(index[known], weights=share[known], minlength=self.keys.size)

    def _merge(self, keys: np.ndarray, counts: np.ndarray) -> None:
        """Add a chunk's counts (sorted unique ``keys``) to the first round's table."""
        if not self.keys.size:
            self.keys, self.counts = keys, counts
        else:
            at = np.searchsorted(self.keys, keys)
            present = at < self.keys.size
            present[present] = self.keys[at[present]] == keys[present]
            self.counts[at[present]] += counts[present]
            self.keys = np.insert(self.keys, at[~present], keys[~present])
            self.counts = np.insert(self.counts, at[~present], counts[~present])
        if self.keys.size > 2 * self.max_pairs:
            self._prune()

    def _prune(self) -> None:
        """Keep ``max_pairs`` pairs: half the room goes to the best pairs of every source
        word (by count(s, t) / count(s), as many per word as fit), the rest to the best
        of the others, whatever their source word. A frequent word, whose estimates are
        spread over thousands of co-occurring words, so keeps its likely translations
        beside the few pairs of every rare word."""
        if self.keys.size <= self.max_pairs:
            return
        source = self.keys // self.width
        estimate = self.counts / np.bincount(source, weights=self.counts,
                                             minlength=self.sources)[source]
        order = np.lexsort((-estimate, source))  # by source, best first
        by_source = source[order]
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size) - np.searchsorted(by_source, by_source, side="left")
        del order, by_source, source
        floor = max(1, self.max_pairs // (2 * int(np.unique(self.keys // self.width).size)))
        estimate[rank < floor] = np.inf  # always kept
        del rank
        keep = np.sort(np.argpartition(-estimate, self.max_pairs - 1)[: self.max_pairs])
        self.pruned += self.keys.size - keep.size
        self.keys, self.counts = self.keys[keep], self.counts[keep]

    def m_step(self) -> None:
        """t(t | s) = count(s, t) / count(s); the counts start again from 0."""
        if self.prob is None:
            self._prune()
        source = self.keys // self.width
        totals = np.bincount(source, weights=self.counts, minlength=self.sources)
        self.prob = self.counts / totals[source]
        self.counts = np.zeros(self.keys.size)
