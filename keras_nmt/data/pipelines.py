"""tf.data pipelines: token ids -> length-bucketed, padded batches.

Training pairs come in a new random order every epoch, whatever their order on disk
(many corpora are sorted by length): a permutation of the whole training split. A run
reads its training split as token ids prepared once (:mod:`keras_nmt.data.prepared`,
:func:`prepared_batches`): the permutation is over pair indices, so it costs the same
at any corpus size and memory does not grow with the corpus. Text files can also be
tokenized on the fly with the run's graph encoders (:func:`training_batches`; runs made
before prepared data, benchmarks), permuted in memory (:func:`permuted_pairs`) or
streamed through a shuffle buffer. Evaluation files are streamed. Batches are
``((source_ids, target_in), target_out)``, int32, padded with PAD_ID (0).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import tensorflow as tf

from keras_nmt.core.config import Config
from keras_nmt.core.constants import BOS_ID, PAD_ID
from keras_nmt.corpus.readers import ParallelFiles
from keras_nmt.text.graph_ids import append_eos

_ENCODE_CHUNK = 512  # lines tokenized per vectorized call
# Runs made before prepared data read their text: a training split larger than this (both
# files, on disk) is not permuted in memory but streamed through a shuffle buffer of
# LARGE_CORPUS_SHUFFLE_BUFFER pairs.
PERMUTATION_MAX_BYTES = 2 * 2**30
LARGE_CORPUS_SHUFFLE_BUFFER = 1_000_000


@dataclasses.dataclass(frozen=True)
class Batching:
    """How training pairs become batches, the same for both pipelines
    (:func:`training_batches` from text, :func:`prepared_batches` from token ids).

    Pairs with a side over ``max_len`` tokens are not trained on. ``shuffle_buffer`` = 0
    gives each epoch as a permutation of the whole split; > 0 reads the split through a
    shuffle buffer of that many pairs (memory bounded, but the order on disk shows
    through). ``batch_size``, ``sort_batches``, ``batch_tokens``, ``mean_length`` and
    ``length_multiple`` are the bucketing's, as :func:`bucketed_batches` says; ``seed``
    orders the pairs and the batches."""

    max_len: int
    batch_size: int
    sort_batches: int
    seed: int
    shuffle_buffer: int = 0
    batch_tokens: int = 0
    mean_length: float | None = None
    length_multiple: int = 0

    @classmethod
    def from_config(cls, config: Config, mean_length: float | None = None) -> Batching:
        """A run's batching: its config's settings, with ``mean_length`` from its training
        scan (:func:`mean_pair_length`) for token batching."""
        return cls(max_len=config.max_len, batch_size=config.batch_size,
                   sort_batches=config.sort_batches, seed=config.seed,
                   shuffle_buffer=config.shuffle_buffer, batch_tokens=config.batch_tokens,
                   mean_length=mean_length, length_multiple=config.length_multiple)

    def replace(self, **changes) -> Batching:
        return dataclasses.replace(self, **changes)

    @property
    def window(self) -> int:
        """Pairs sorted together (see :func:`bucketed_batches`)."""
        if not self.batch_tokens:
            return self.batch_size * self.sort_batches
        rows = self.batch_tokens / max(1.0, self.mean_length or (self.max_len + 1) / 2)
        return max(1, int(self.sort_batches * rows))


def text_pairs(files: ParallelFiles) -> tf.data.Dataset:
    """(source line, target line) in file order, CR stripped."""
    def read(path):
        compression = "GZIP" if path.suffix == ".gz" else None
        # Strip CR so CRLF files give the same tokens as LF files.
        return tf.data.TextLineDataset(str(path), compression_type=compression).map(
            lambda line: tf.strings.regex_replace(line, "\r$", "")
        )

    return tf.data.Dataset.zip((read(files.source), read(files.target)))


def permuted_pairs(files: ParallelFiles, seed: int) -> tf.data.Dataset:
    """The training pairs, endlessly, each epoch a new permutation of the whole split.

    The lines are read into memory once (about the files' size); the order comes from
    ``tf.random.experimental.index_shuffle``, a stateless function of (seed, epoch,
    position). The pipeline's only state is a counter, so a checkpoint of it is a few
    bytes and ``--resume`` continues with exactly the next pair of the same permutation."""
    sources, targets = [], []
    for source, target in files.pairs():
        sources.append(source)
        targets.append(target)
    count = len(sources)
    if count == 0:
        raise ValueError(f"{files.source} holds no sentence pairs")
    sources, targets = tf.constant(sources, tf.string), tf.constant(targets, tf.string)
    seed = tf.constant(seed, tf.int64)
    size = tf.constant(count, tf.int64)

    def pair(position):
        epoch, index = position // size, position % size
        chosen = tf.random.experimental.index_shuffle(index, tf.stack([seed, epoch]), size - 1)
        return tf.gather(sources, chosen), tf.gather(targets, chosen)

    return tf.data.Dataset.counter().map(pair)


def pair_indices(count: int, seed: int, window: int, shuffle_buffer: int = 0) -> tf.data.Dataset:
    """Pair indices, endlessly, ``window`` at a time: each epoch a permutation of
    range(count), the stateless function of (seed, epoch, position) that
    :func:`permuted_pairs` uses, computed for a whole window at once; with
    ``shuffle_buffer`` > 0, file order through a shuffle buffer of that many indices."""
    size = tf.constant(count, tf.int64)
    if shuffle_buffer:
        return (tf.data.Dataset.range(size)
                .shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True).repeat()
                .batch(window))
    seed = tf.constant(seed, tf.int64)

    def indices(start):
        positions = start * window + tf.range(window, dtype=tf.int64)
        epochs, offsets = positions // size, positions % size
        first = epochs[0]
        # One call per epoch the window spans (one or two unless the corpus is smaller
        # than a window), then each position takes its epoch's.
        per_epoch = tf.map_fn(
            lambda epoch: tf.random.experimental.index_shuffle(offsets, tf.stack([seed, epoch]), size - 1),
            tf.range(first, epochs[-1] + 1), fn_output_signature=tf.int64)
        return tf.gather_nd(per_epoch, tf.stack([epochs - first, tf.range(window, dtype=tf.int64)], axis=1))

    return tf.data.Dataset.counter().map(indices)


def mixed_pair_indices(count: int, drawn: int, pool: int, seed: int, window: int,
                       shuffle_buffer: int = 0) -> tf.data.Dataset:
    """Windows ``(indices, epochs)`` of ``window`` pairs each, endlessly, over a split
    of ``count`` pairs with ``drawn`` pairs an epoch mixed in from another of ``pool``
    pairs (``train --mix``): an epoch is ``count + drawn`` positions, ordered as
    :func:`pair_indices` orders them, where an index i < ``count`` is the own pair i and
    ``count + j`` the other split's pair j.

    The drawn pairs walk through the other split in permutations of their own, the
    next ``drawn`` of them each epoch: every pair of it is drawn once before any is
    drawn again, and its size costs nothing. Like :func:`pair_indices`, a stateless
    function of (seed, position), so a checkpoint of the stream is its counters."""
    size = count + drawn
    base = pair_indices(size, seed, window, shuffle_buffer)
    seed = tf.constant(seed, tf.int64)
    pool = tf.constant(pool, tf.int64)

    def mix(number, local):
        positions = number * window + tf.range(window, dtype=tf.int64)
        epochs = positions // size
        # How many pairs were drawn from the other split before this one.
        before = epochs * drawn + tf.maximum(local - count, 0)
        rounds, offsets = before // pool, before % pool
        first = tf.reduce_min(rounds)
        # One permutation per pass over the other split that the window reaches (as
        # pair_indices does per epoch), seeded apart from the own split's (seed, epoch).
        per_round = tf.map_fn(
            lambda round_: tf.random.experimental.index_shuffle(
                offsets, tf.stack([seed, -1 - round_]), pool - 1),
            tf.range(first, tf.reduce_max(rounds) + 1), fn_output_signature=tf.int64)
        rows = tf.stack([rounds - first, tf.range(window, dtype=tf.int64)], axis=1)
        other = tf.gather_nd(per_round, rows)
        return tf.where(local < count, local, count + other), epochs

    return base.enumerate().map(mix)


def prepared_pairs(split, seed: int, window: int = _ENCODE_CHUNK,
                   shuffle_buffer: int = 0) -> tf.data.Dataset:
    """A :class:`keras_nmt.data.prepared.PreparedSplit`'s pairs, endlessly, as ragged windows
    ``(source [window, (T)], target [window, (T)])`` ending with EOS, in the order of
    :func:`pair_indices`.

    Reading is a ``tf.numpy_function`` of the indices: a pure function of them, so
    the iterator's checkpoint (taken with the external state ignored, see
    :func:`prepared_batches`) holds the index stream's counter and the buffers after
    it, and ``--resume`` continues with exactly the next pair.

    A split with sampled copies (subword regularisation) gives the pairs of epoch E from
    its copy E mod copies: window W holds positions W x window onwards, and position P
    is of epoch P // count in either order. A :class:`keras_nmt.data.prepared.MixedSplit`
    gives its own pairs and those it draws, in the order of :func:`mixed_pair_indices`."""
    if split.count == 0:
        raise ValueError(f"{split.directory} holds no training pair")

    def read(indices, epochs=None):
        arguments = [indices] if epochs is None else [indices, epochs]
        source, source_lengths, target, target_lengths = tf.numpy_function(
            split.gather, arguments, [tf.int32, tf.int64, tf.int32, tf.int64], stateful=False)
        return tuple(
            append_eos(tf.RaggedTensor.from_row_lengths(
                tf.ensure_shape(values, [None]), tf.ensure_shape(lengths, [window]), validate=False))
            for values, lengths in ((source, source_lengths), (target, target_lengths))
        )

    drawn = getattr(split, "drawn_per_epoch", 0)  # a prepared.MixedSplit's
    if drawn:
        mixed = mixed_pair_indices(split.count, drawn, split.other.count, seed, window,
                                   shuffle_buffer)
        return mixed.map(read, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    indices = pair_indices(split.count, seed, window, shuffle_buffer)
    if split.copies:
        def read_sampled(number, indices):
            positions = number * window + tf.range(window, dtype=tf.int64)
            return read(indices, positions // split.count)

        # Only here a counter of windows: a split without copies keeps the stages its
        # runs' checkpointed iterators were saved with.
        return indices.enumerate().map(read_sampled, num_parallel_calls=tf.data.AUTOTUNE,
                                       deterministic=True)
    return indices.map(read, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def decoder_io(target_ids: tf.RaggedTensor) -> tuple[tf.RaggedTensor, tf.RaggedTensor]:
    """Targets ending with EOS -> (decoder inputs BOS y_1..y_T, outputs y_1..y_T EOS)."""
    bos = tf.fill([target_ids.nrows(), 1], tf.constant(BOS_ID, tf.int32))
    return tf.concat([bos, target_ids[:, :-1]], axis=1), target_ids


def _encode(source_encoder, target_encoder):
    def encode(source_lines, target_lines):
        return source_encoder(source_lines), target_encoder(target_lines)

    return encode


def _padder(length_multiple: int = 0):
    """Ragged (source, target) -> ((source_ids, target_in), target_out), padded with PAD_ID:
    each to its longest row, or with ``length_multiple`` > 0 all three to one width, the
    longest row of either side rounded up to a multiple of ``length_multiple``."""

    def pad(source, target):
        target_in, target_out = decoder_io(target)
        tensors = [t.to_tensor(PAD_ID) for t in (source, target_in, target_out)]
        if length_multiple:
            longest = tf.maximum(tf.shape(tensors[0])[1], tf.shape(tensors[1])[1])
            width = (longest + length_multiple - 1) // length_multiple * length_multiple
            tensors = [tf.pad(t, [[0, 0], [0, width - tf.shape(t)[1]]], constant_values=PAD_ID)
                       for t in tensors]
        return (tensors[0], tensors[1]), tensors[2]

    return pad


def training_batches(files: ParallelFiles, source_encoder, target_encoder,
                     batching: Batching) -> tf.data.Dataset:
    """An endless stream of training batches from text files, tokenized on the fly by
    the graph encoders, the pairs with an empty side or over ``max_len`` tokens dropped,
    and bucketed as :func:`bucketed_batches` says.

    With ``shuffle_buffer`` = 0 the permutation of each epoch is over the split held in
    memory (:func:`permuted_pairs`).
    """
    if batching.shuffle_buffer:
        ordered = (text_pairs(files)
                   .shuffle(batching.shuffle_buffer, seed=batching.seed,
                            reshuffle_each_iteration=True)
                   .repeat())
    else:
        ordered = permuted_pairs(files, batching.seed)
    limit = batching.max_len + 1  # + EOS

    def keep(source, target):
        source_len, target_len = tf.size(source), tf.size(target)
        return (source_len > 1) & (target_len > 1) & (source_len <= limit) & (target_len <= limit)

    # Sentence by sentence, as runs made before prepared data have it in their
    # checkpoints (an iterator's state only restores into the same stages).
    windows = (ordered.batch(_ENCODE_CHUNK).map(_encode(source_encoder, target_encoder))
               .unbatch().filter(keep)
               .ragged_batch(batching.window)
               .map(_sorter(batching.max_len)))
    if batching.batch_tokens:
        batches = windows.map(_token_batches(batching.batch_tokens)).unbatch()
    else:
        batches = windows.unbatch().ragged_batch(batching.batch_size)
    return _shuffled_padded(batches, batching)


def text_shuffle_buffer(shuffle_buffer: int, files: ParallelFiles, warn: Callable[[str], None]) -> int:
    """The shuffle buffer of :func:`training_batches` for a run's configured
    ``shuffle_buffer`` (0: a whole-split permutation) on the text ``files``."""
    corpus_bytes = sum(path.stat().st_size for path in (files.source, files.target))
    if shuffle_buffer or corpus_bytes <= PERMUTATION_MAX_BYTES:
        return shuffle_buffer
    warn(f"the training split holds {corpus_bytes / 2**30:.1f} GiB, more than a whole-corpus "
         f"permutation keeps in memory ({PERMUTATION_MAX_BYTES / 2**30:.0f} GiB): pairs are "
         f"shuffled in a streaming buffer of {LARGE_CORPUS_SHUFFLE_BUFFER:,} pairs instead")
    return LARGE_CORPUS_SHUFFLE_BUFFER


def prepared_batches(split, batching: Batching) -> tf.data.Dataset:
    """An endless stream of training batches from a prepared split
    (:func:`prepared_pairs`), bucketed as :func:`bucketed_batches` says: the same
    batches as :func:`training_batches` gives from the split's text, in another order.

    Its iterator is checkpointed with ``ExternalStatePolicy.IGNORE``: the only external
    state is the read of the prepared files, which a checkpoint need not hold since
    the same indices read the same pairs."""
    if split.info.get("max_len") != batching.max_len:
        raise ValueError(f"{split.directory} was prepared for max_len={split.info.get('max_len')}, "
                         f"not {batching.max_len}")
    options = tf.data.Options()
    options.experimental_external_state_policy = tf.data.experimental.ExternalStatePolicy.IGNORE
    windows = prepared_pairs(split, batching.seed, batching.window, batching.shuffle_buffer)
    return bucketed_batches(windows, batching).with_options(options)


def mean_pair_length(train: dict[str, int]) -> float | None:
    """Mean tokens of the longer side of a kept training pair, EOS included (the token
    batching's window size), from data.json's "train" scan; None for runs made before
    the scan counted tokens."""
    if "source_tokens" not in train or not train.get("kept"):
        return None
    return max(train["source_tokens"], train["target_tokens"]) / train["kept"] + 1


def bucketed_batches(windows: tf.data.Dataset, batching: Batching) -> tf.data.Dataset:
    """Windows of pairs ``(source [W, (T)], target [W, (T)])`` (rows ending with EOS, of
    :attr:`Batching.window` pairs each, none empty or over ``max_len``) -> an endless stream
    of training batches, bucketed the paper's way: each window is sorted by length and
    cut into minibatches, whose order is shuffled, so each batch holds sentences of
    similar length and little padding. Every stage works on a whole window or batch,
    none on single sentences.

    With ``batch_tokens`` = 0 (the paper's way), the window holds ``sort_batches``
    minibatches of ``batch_size`` sentences. With ``batch_tokens`` > 0, a minibatch
    holds as many sentences as fit in ``batch_tokens`` padded slots (rows x longest
    side, EOS included), and the window holds about ``sort_batches`` such minibatches:
    ``sort_batches * batch_tokens / mean_length`` pairs, where ``mean_length`` is a
    pair's mean token count, EOS included, on its longer side on average
    (:func:`mean_pair_length` of the training scan).

    ``length_multiple`` > 0 pads each batch to one width, a multiple of it (see
    :func:`_padder`), for XLA: with ``batch_tokens`` = 0 every batch then has
    ``batch_size`` rows and one of ``ceil((max_len + 1) / length_multiple)`` widths.
    """
    def sentence_batches(source, target):
        return tuple(tf.RaggedTensor.from_uniform_row_length(side, batching.batch_size)
                     for side in (source, target))

    cut = _token_batches(batching.batch_tokens) if batching.batch_tokens else sentence_batches
    sort = _sorter(batching.max_len)
    batches = windows.map(lambda source, target: cut(*sort(source, target))).unbatch()
    return _shuffled_padded(batches, batching)


def _sorter(max_len: int):
    """A window of pairs [W, (T)] x 2 -> the same pairs sorted by length."""
    limit = max_len + 1  # + EOS

    def sort_window(source, target):
        # Longer side first, then the shorter: consecutive pairs then have both sides of
        # similar length. (Sorting on the target alone left the source of a batch
        # spanning every length that translates to that target: 0.79 of source slots
        # were real tokens on Multi30k, against 0.87 with this key; bench/pipeline.py.)
        source_len, target_len = source.row_lengths(), target.row_lengths()
        key = tf.maximum(source_len, target_len) * (limit + 1) + tf.minimum(source_len, target_len)
        order = tf.argsort(key, stable=True)
        return tf.gather(source, order), tf.gather(target, order)

    return sort_window


def _shuffled_padded(batches: tf.data.Dataset, batching: Batching) -> tf.data.Dataset:
    """Ragged batches -> padded ones (:func:`_padder`), their order shuffled."""
    return (
        batches
        .shuffle(batching.sort_batches, seed=batching.seed + 1, reshuffle_each_iteration=True)
        .map(_padder(batching.length_multiple))
        .prefetch(2)
    )


def _token_batches(batch_tokens: int):
    """Cut a sorted window into consecutive minibatches of at most ``batch_tokens``
    padded slots each: [W, (tokens)] -> [batches, (rows), (tokens)]."""
    budget = tf.constant(batch_tokens, tf.int64)

    def cut(source, target):
        lengths = tf.maximum(source.row_lengths(), target.row_lengths())

        def place(state, length):
            batch, rows, longest = state
            wider = tf.maximum(longest, length)
            fits = (rows + 1) * wider <= budget
            return (
                tf.where(fits, batch, batch + 1),
                tf.where(fits, rows + 1, tf.ones_like(rows)),
                tf.where(fits, wider, length),
            )

        zero = tf.constant(0, tf.int64)
        # Every pair fits a batch alone (Config checks batch_tokens > max_len), so the
        # first pair opens batch 0 and no batch is empty.
        batch_ids, _, _ = tf.scan(place, lengths, initializer=(zero, zero, zero))
        return (
            tf.RaggedTensor.from_value_rowids(source, batch_ids),
            tf.RaggedTensor.from_value_rowids(target, batch_ids),
        )

    return cut


def evaluation_batches(
    files: ParallelFiles,
    source_encoder,
    target_encoder,
    *,
    batch_size: int,
) -> tf.data.Dataset:
    """Every pair once, in file order (nothing dropped), as padded batches."""
    return (
        text_pairs(files)
        .batch(batch_size)
        .map(_encode(source_encoder, target_encoder))
        .map(_padder())
        .prefetch(2)
    )
