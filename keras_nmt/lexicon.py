"""The lexical table p(t | s) of a run: IBM Model 1 over a sample of its training pairs.

Vocabulary selection (:func:`keras_nmt.search.output_columns`) needs, for every source
word, the target words it is most likely translated by: Jean et al. (2015) took them
from word alignments, Marian from a ``lex.s2t`` table. Here they come from IBM Model 1
(Brown et al., 1993), trained by EM on the run's own training pairs as its prepared
split holds them (:mod:`keras_nmt.prepared`: the ids training read, from the one
tokenization pass), so that the table speaks the ids the model speaks; a run without a
prepared split is tokenized again by its codecs. No external aligner.
The table keeps the ``best`` most probable targets of each source word (reserved ids
excluded), best first; the reserved source ids (padding, BOS, EOS) get no translations,
so a batch's padding adds nothing to its shortlist.

Memory is bounded whatever the corpus size, by three limits (:class:`TableLimits`):

- **The sample.** EM runs on at most ``sample_pairs`` pairs (default 300,000), spread
  evenly through the prepared split's pairs (pair i, from 0, is taken when
  ``(i + 1) S // N`` passes ``i S // N``, N its pairs): deterministic, and from every
  part of the corpus, not its first lines. A split no larger than the sample is taken
  whole. Without a prepared split, the same rule picks lines of the text, and pairs
  empty or longer than ``max_len`` are left out, as training leaves them out. The
  sample's ids stay in memory: 4 bytes a token (8 while they are gathered).
- **The chunk.** An EM round streams the sample in chunks of about ``chunk_entries``
  (sentence, source position with NULL, target position) entries (default 1,000,000);
  a chunk's arrays take about 70 bytes an entry.
- **The table.** t(t | s) is a sparse table of at most ``max_word_pairs`` word pairs
  (default 4,000,000; about 150 bytes a pair at its peak). The first round (from
  uniform) collects every pair that co-occurs in a sentence; when they outgrow twice the
  limit, the table keeps ``max_word_pairs`` of them: for every source word its best
  pairs by count(s, t) / count(s) so far, as many as half the room allows, and the best
  of the rest whatever their word (the tiny probabilities go). The later rounds
  re-estimate those pairs only; a pair outside the table has probability 0.

So the peak is about 8 B x sample tokens + 70 B x ``chunk_entries`` + 150 B x
``max_word_pairs`` + 8 B x source vocabulary x ``best`` (the result), measured with
tracemalloc: at most about 0.8 GB with the defaults and 30-word news sentences, the same
at 1M or 36M pairs. On Anki (161,124 pairs, 1.4M word pairs) the whole corpus fits: the
table is the EM of the whole corpus, as before the limits, at 184 MB peak RSS instead of
1.05 GB.

Cost: the sample's pairs gathered from the prepared split (O(sample), whatever N; a run
without one reads its text in one pass, O(N) lines, and tokenizes the sampled ones in
Python), then per EM round O(E log P) for the E alignment entries of the sample and the P
pairs of the table. Nothing but the reading pass grows once N passes the sample (Anki:
12.3M entries; 300,000 news pairs of 30 words: about 280M, some 23 times more EM work).

No TensorFlow here: the run directory reads and writes the table
(:meth:`keras_nmt.rundir.RunDir.write_lexicon`), the search gathers from it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np

from keras_nmt.constants import BOS_ID, EOS_ID, PAD_ID, RESERVED, UNK_ID
from keras_nmt.corpus.readers import count_lines
from keras_nmt.errors import LexiconError, RunDirError
from keras_nmt.progress import Phase, Progress

NULL = PAD_ID  # the NULL source word of Model 1 borrows the padding id (never a real word)
DEFAULT_ITERATIONS = 5
DEFAULT_BEST = 50  # translations kept per source word; a search may use fewer
# A source word seen at most this many times in training has its translations estimated
# from as many sentences: too few to choose a sentence's candidates by. A batch that holds
# one is scored on the whole vocabulary (RARE_MARK in its rows of selection_table); the
# translators give such sentences batches of their own. Before this, a shortlist moved
# Anki's rare-word pairs by -1.6 to +2.1 BLEU from run to run (docs/benchmarks.md).
RARE_COUNT = 2
RARE_MARK = -1  # a row of selection_table whose source word selects the whole vocabulary
# Source ids that are never words: padding, BOS and EOS (the search appends EOS).
NOT_WORDS = (PAD_ID, BOS_ID, EOS_ID)


@dataclasses.dataclass(frozen=True)
class TableLimits:
    """What bounds the memory of :func:`train_model1` and :func:`build_for_run` (see the
    module's docstring for what each costs)."""

    sample_pairs: int = 300_000  # training lines EM runs on, spread through the split
    chunk_entries: int = 1_000_000  # alignment entries an EM step holds at once
    max_word_pairs: int = 4_000_000  # (source, target) pairs the t-table keeps

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise LexiconError(f"{field.name} must be a positive integer, got {value!r}")


@dataclasses.dataclass(frozen=True)
class Lexicon:
    """``targets`` int32 [source vocabulary, best]: the most probable target ids of each
    source id, best first, padded with PAD_ID; ``probs`` float32, the same shape: their
    p(t | s), 0 in padding. ``info``: how it was built (corpus size, sample, iterations,
    seconds, memory). ``source_counts`` int64 [source vocabulary]: how often training saw
    each source id (the whole prepared split; None in a table built before they were
    kept, whose search then selects for every sentence)."""

    targets: np.ndarray
    probs: np.ndarray
    info: dict
    source_counts: np.ndarray | None = None

    @property
    def best(self) -> int:
        return int(self.targets.shape[1])

    def translations(self, source_id: int, count: int | None = None) -> list[int]:
        """The target ids of one source id, best first (no padding)."""
        row = self.targets[source_id, : count or self.best]
        return [int(t) for t in row if t != PAD_ID]

    def rare_sources(self) -> np.ndarray:
        """bool [source vocabulary]: the source ids seen at most :data:`RARE_COUNT` times in
        training; never padding, BOS or EOS. UNK is rare when training never saw it, or
        when every word it stands for is rare (``info["unk_rare"]``: a vocabulary cut by
        ``vocab_min_count`` alone). All False without ``source_counts``."""
        rare = np.zeros(self.targets.shape[0], bool)
        if self.source_counts is not None:
            rare = self.source_counts <= RARE_COUNT
            rare[list(NOT_WORDS)] = False
            rare[UNK_ID] |= bool(self.info.get("unk_rare"))
        return rare

    def selection_table(self) -> np.ndarray:
        """The table the search selects by (:class:`keras_nmt.search.Shortlist`):
        ``targets`` with every row of a :meth:`rare_sources` id set to :data:`RARE_MARK`,
        so that a batch holding such a word is scored on the whole vocabulary."""
        table = np.array(self.targets, np.int32)
        table[self.rare_sources()] = RARE_MARK
        return table

    def check(self, source_vocab_size: int, target_vocab_size: int) -> None:
        """Raise :class:`LexiconError` unless the table fits the run's vocabularies."""
        if self.targets.ndim != 2 or self.targets.shape != self.probs.shape:
            raise LexiconError(f"malformed lexical table: shapes {self.targets.shape} and "
                               f"{self.probs.shape}")
        if self.source_counts is not None and self.source_counts.shape != self.targets.shape[:1]:
            raise LexiconError(f"malformed lexical table: {self.source_counts.shape[0]} source "
                               f"counts for {self.targets.shape[0]} source words")
        if self.targets.shape[0] != source_vocab_size:
            raise LexiconError(f"the lexical table has {self.targets.shape[0]} source words, "
                               f"the run's vocabulary {source_vocab_size}: rebuild it "
                               f"(keras-nmt lexicon RUN_DIR)")
        if self.targets.size and not (0 <= self.targets.min() and self.targets.max() < target_vocab_size):
            raise LexiconError("the lexical table names target ids outside the run's vocabulary: "
                               "rebuild it (keras-nmt lexicon RUN_DIR)")


def marked_sources(table: np.ndarray) -> np.ndarray:
    """bool [source vocabulary]: the rows of a :meth:`Lexicon.selection_table` marked
    :data:`RARE_MARK`, the rare source ids, read back from the table alone."""
    return np.asarray(table)[:, 0] == RARE_MARK


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


def train_model1(
    pairs: Iterable[tuple[Sequence[int], Sequence[int]]] | TokenizedPairs,
    source_vocab_size: int,
    target_vocab_size: int,
    iterations: int = DEFAULT_ITERATIONS,
    best: int = DEFAULT_BEST,
    progress: Progress | None = None,
    limits: TableLimits = TableLimits(),
) -> Lexicon:
    """IBM Model 1's t(t | s) by ``iterations`` rounds of EM over ``pairs`` of id
    sequences (no EOS), starting from uniform; the ``best`` targets of each source id.

    A round: every target token spreads one count over the source words of its sentence
    (NULL included) in proportion to their current t(t | s); t(t | s) becomes each
    pair's count over its source word's total. The pairs are streamed in chunks of
    ``limits.chunk_entries`` alignment entries and the table holds at most
    ``limits.max_word_pairs`` pairs (module docstring); all of ``pairs`` is used (the
    sample is :func:`build_for_run`'s). ``progress`` shows the rounds (with an ETA)."""
    if iterations < 1 or best < 1:
        raise LexiconError(f"iterations and best must be positive, got {iterations} and {best}")
    started = time.perf_counter()
    if not isinstance(pairs, TokenizedPairs):
        held = TokenizedPairs()
        for source, target in pairs:
            if len(source) and len(target):
                held.add(source, target)
        pairs = held
    src_flat, tgt_flat, src_lens, tgt_lens = pairs.arrays()
    if not src_lens.size:
        raise LexiconError("no non-empty training pair to build a lexical table from")
    chunks = list(_chunks(src_lens, tgt_lens, limits.chunk_entries))
    table = _Table(target_vocab_size, source_vocab_size, limits.max_word_pairs)
    phase = Phase(progress or Progress(enabled=False), f"lexicon: EM, {iterations} rounds "
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
    pair_source, pair_target, prob = table.keys // target_vocab_size, table.keys % target_vocab_size, table.prob
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
        "limits": dataclasses.asdict(limits),
        "seconds": time.perf_counter() - started,
    }
    return Lexicon(targets, probs, info, np.bincount(src_flat, minlength=source_vocab_size))


def build_for_run(run, iterations: int = DEFAULT_ITERATIONS, best: int = DEFAULT_BEST,
                  progress: Progress | None = None, limits: TableLimits = TableLimits(),
                  sample: Callable[[], tuple[TokenizedPairs, int, int]] | None = None) -> Lexicon:
    """Build the table of a run directory (a :class:`~keras_nmt.rundir.RunDir`) from a
    sample of its training pairs and write it there: ``limits.sample_pairs`` of the pairs
    its prepared split holds (:func:`prepared_training_pairs`: training's own ids), or,
    for a run without one, as many lines spread through its training split, tokenized by
    its codecs, pairs empty or longer than its ``max_len`` left out as training leaves
    them out (``sample``: gives those ids when they are already read, as
    :func:`sampled_training_pairs` does; called only for a run without a prepared split).
    ``progress`` shows the reading and the EM rounds, each with an ETA."""
    started = time.perf_counter()
    progress = progress or Progress(enabled=False)
    source_codec, target_codec = run.codecs()
    split = _prepared_split(run)
    with contextlib.closing(split) if split is not None else contextlib.nullcontext():
        pairs, lines, sampled = (
            _prepared_sample(split, limits, progress) if split is not None
            else sample() if sample is not None
            else sampled_training_pairs(run, source_codec.encode, target_codec.encode, limits,
                                        progress, "lexical table"))
        lexicon = train_model1(pairs, len(source_codec.vocabulary),
                               len(target_codec.vocabulary), iterations, best, progress, limits)
        lexicon, counts_from = _with_training_counts(split, lexicon, whole=sampled == lines)
    lexicon, parent_rows = _with_parents_rows(run, lexicon)
    left_out_most = run.load_data_info().get("source_left_out_most")  # None: older runs
    lexicon.info.update(corpus_lines=lines, sampled_lines=sampled, counts_from=counts_from,
                        unk_rare=left_out_most is not None and left_out_most <= RARE_COUNT,
                        parent_rows=parent_rows, total_seconds=time.perf_counter() - started)
    run.write_lexicon(lexicon)
    return lexicon


def _with_parents_rows(run, lexicon: Lexicon) -> tuple[Lexicon, int | str | None]:
    """A child's table (a run ``--init-from`` another) with its parent's row for each
    source word its own training saw at most :data:`RARE_COUNT` times and the parent's
    more often: the parent's translations still hold for the words the new data barely
    has, and its ids are the child's (a child's vocabularies begin with its parent's, in
    order). Such a word counts what both trainings saw, so it is no longer rare to the
    search. Returns the table and how many rows came from the parent (None: no parent;
    a string: why none could)."""
    parent = run.parent_run()
    if parent is None:
        return lexicon, None
    if lexicon.source_counts is None:
        return lexicon, "none: the child's counts are unknown"
    try:
        theirs = parent.load_lexicon()
    except (LexiconError, RunDirError) as error:
        return lexicon, f"none: {error}"
    if theirs.source_counts is None:
        return lexicon, "none: the parent's table keeps no counts"
    shared = min(len(theirs.source_counts), len(lexicon.source_counts))
    counts = np.array(lexicon.source_counts)
    take = np.zeros(len(counts), bool)
    take[:shared] = (counts[:shared] <= RARE_COUNT) & (theirs.source_counts[:shared] > RARE_COUNT)
    take[list(NOT_WORDS) + [UNK_ID]] = False  # <unk> stands for other words in the child
    width = min(lexicon.best, theirs.best)
    targets = np.array(lexicon.targets)
    probs = np.array(lexicon.probs)
    rows = np.flatnonzero(take)
    targets[rows] = PAD_ID
    probs[rows] = 0.0
    targets[rows, :width] = theirs.targets[rows, :width]
    probs[rows, :width] = theirs.probs[rows, :width]
    counts[rows] += theirs.source_counts[rows]
    merged = dataclasses.replace(lexicon, targets=targets, probs=probs, source_counts=counts)
    return merged, len(rows)


PREPARED_CHUNK = 8192  # pairs gathered at a time from a prepared split


def prepared_training_pairs(run, limits: TableLimits, progress: Progress
                            ) -> tuple[TokenizedPairs, int, int] | None:
    """(the id pairs, the split's lines, the pairs sampled) from the run's prepared split:
    ``limits.sample_pairs`` of the pairs training kept, spread evenly through them (all of
    a smaller split), with the ids training reads, so the table and the model see the
    same tokens. None for a run without one (made before it, or moved without it)."""
    split = _prepared_split(run)
    if split is None:
        return None
    with contextlib.closing(split):
        return _prepared_sample(split, limits, progress)


def _prepared_split(run):
    """The run's prepared training split, open; None without one (or a damaged one: the
    text is read instead)."""
    try:
        return run.prepared_split(needed_for="the lexical table")
    except RunDirError:
        return None


def _prepared_sample(split, limits: TableLimits, progress: Progress
                     ) -> tuple[TokenizedPairs, int, int]:
    chosen = sampled_indices(split.count, limits.sample_pairs)
    phase = Phase(progress, f"lexical table: reading {len(chosen):,} of {split.count:,} "
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
    limits: TableLimits, progress: Progress, what: str,
) -> tuple[TokenizedPairs, int, int]:
    """(the id pairs, the split's lines, the lines sampled): ``limits.sample_pairs`` lines
    of a run's training split spread evenly through it (all of a shorter split), each side
    encoded; pairs empty or longer than the run's ``max_len`` are left out, as training
    leaves them out. ``what`` names the work in the progress line."""
    config = run.load_config()
    files = run.split_files("train", needed_for=f"the {what}")
    if files is None:
        raise LexiconError(f"{run.path}: data.json names no training split")
    lines = count_lines(files.source)
    sampled = min(lines, limits.sample_pairs)
    chosen = sampled_lines(lines, limits.sample_pairs)
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


def _with_training_counts(split, lexicon: Lexicon, whole: bool) -> tuple[Lexicon, str | None]:
    """``lexicon`` with the source counts the rare-word rule reads, and where they come
    from: every pair training kept (the prepared ``split``, one streamed pass), else the
    EM's pairs when they are the whole split. Else none, and no word is rare: a sample's
    counts would call a word rare that the split holds many times."""
    if split is not None:
        counts = split.token_counts(0, lexicon.targets.shape[0])
        return dataclasses.replace(lexicon, source_counts=counts), "prepared split"
    if whole:
        return lexicon, "training split"
    return dataclasses.replace(lexicon, source_counts=None), None
