"""The lexical table p(t | s) of a run: IBM Model 1 over a sample of its training pairs.

Owns the table that vocabulary selection reads (:func:`keras_nmt.search.output_columns`), the
rare-word rule the search takes from it, the checks of a shortlist against it and the build
of a run's table (stored by :meth:`keras_nmt.rundir.run_directory.RunDir.write_lexicon`). No
TensorFlow. EM runs on the prepared split's ids (:mod:`keras_nmt.data.prepared`; without one,
on the text tokenized again), so the table speaks the model's ids. It keeps each source
word's ``best`` most probable targets, best first, never a reserved id; the reserved source
ids (padding, BOS, EOS) have none. :class:`TableLimits` bound the memory whatever the corpus:
about 8 B a sample token (``sample_pairs``, :mod:`keras_nmt.data.pair_sample`), 70 B an entry
of an EM chunk (``chunk_entries``), 150 B a word pair (``max_word_pairs``,
:mod:`keras_nmt.lexicon.model1`) and 8 B x source vocabulary x ``best`` for the result. Time:
one reading pass (all that grows past the sample), then O(E log P) an EM round for the
sample's E alignment entries and the table's P pairs (docs/decoding.md).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import Callable, Iterable, Sequence

import numpy as np

from keras_nmt.lexicon import model1
from keras_nmt.core.constants import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from keras_nmt.core.errors import LexiconError, RunDirError
from keras_nmt.data.pair_sample import (
    TokenizedPairs, open_prepared_split, prepared_sample, sampled_training_pairs,
)
from keras_nmt.core.progress import Progress

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
    sequences (no EOS), starting from uniform (:func:`keras_nmt.lexicon.model1.estimate`); the
    ``best`` targets of each source id, and how often each source id stands in ``pairs``.
    The pairs are streamed in chunks of ``limits.chunk_entries`` alignment entries and the
    table holds at most ``limits.max_word_pairs`` pairs (module docstring); all of
    ``pairs`` is used (the sample is :func:`build_for_run`'s). ``progress`` shows the
    rounds (with an ETA)."""
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
    targets, probs, info = model1.estimate(
        src_flat, tgt_flat, src_lens, tgt_lens, source_vocab_size, target_vocab_size,
        iterations, best, progress or Progress(enabled=False), limits.chunk_entries,
        limits.max_word_pairs)
    info["limits"] = dataclasses.asdict(limits)
    info["seconds"] = time.perf_counter() - started
    return Lexicon(targets, probs, info, np.bincount(src_flat, minlength=source_vocab_size))


def build_for_run(run, iterations: int = DEFAULT_ITERATIONS, best: int = DEFAULT_BEST,
                  progress: Progress | None = None, limits: TableLimits = TableLimits(),
                  sample: Callable[[], tuple[TokenizedPairs, int, int]] | None = None) -> Lexicon:
    """Build the table of a run directory (a :class:`~keras_nmt.rundir.run_directory.RunDir`) from a
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
    split = open_prepared_split(run)
    with contextlib.closing(split) if split is not None else contextlib.nullcontext():
        pairs, lines, sampled = (
            prepared_sample(split, limits.sample_pairs, progress) if split is not None
            else sample() if sample is not None
            else sampled_training_pairs(run, source_codec.encode, target_codec.encode,
                                        limits.sample_pairs, progress, "lexical table"))
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
