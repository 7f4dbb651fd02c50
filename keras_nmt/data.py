"""tf.data pipelines: text files -> tokenized, length-bucketed, padded batches.

Training pairs come in a new random order every epoch, whatever their order on disk
(many corpora are sorted by length): a permutation of the whole training split, held in
memory (:func:`permuted_pairs`), or for a corpus too large for that, a streaming shuffle
buffer. Evaluation files are streamed. Text is tokenized with the run's graph encoders
(:mod:`keras_nmt.text`). Batches are ``((source_ids, target_in), target_out)``, int32,
padded with PAD_ID (0).
"""

from __future__ import annotations

import tensorflow as tf

from keras_nmt.constants import BOS_ID, PAD_ID
from keras_nmt.corpus.readers import ParallelFiles

_ENCODE_CHUNK = 512  # lines tokenized per vectorized call


def _lines(files: ParallelFiles) -> tf.data.Dataset:
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


def training_batches(
    files: ParallelFiles,
    source_encoder,
    target_encoder,
    *,
    max_len: int,
    batch_size: int,
    sort_batches: int,
    seed: int,
    shuffle_buffer: int = 0,
    batch_tokens: int = 0,
    mean_length: float | None = None,
    length_multiple: int = 0,
) -> tf.data.Dataset:
    """An endless stream of training batches, bucketed the paper's way.

    Pairs with an empty side or more than ``max_len`` tokens on either side are dropped.
    Then a window of pairs is sorted by length and cut into minibatches, whose order is
    shuffled, so each batch holds sentences of similar length and little padding.

    With ``batch_tokens`` = 0 (the paper's way), the window holds ``sort_batches``
    minibatches of ``batch_size`` sentences. With ``batch_tokens`` > 0, a minibatch
    holds as many sentences as fit in ``batch_tokens`` padded slots (rows x longest
    side, EOS included), and the window holds about ``sort_batches`` such minibatches:
    ``sort_batches * batch_tokens / mean_length`` pairs, where ``mean_length`` is a
    pair's mean token count, EOS included, on its longer side on average
    (:func:`keras_nmt.experiment.mean_pair_length` of the training scan).

    ``length_multiple`` > 0 pads each batch to one width, a multiple of it (see
    :func:`_padder`), for XLA: with ``batch_tokens`` = 0 every batch then has
    ``batch_size`` rows and one of ``ceil((max_len + 1) / length_multiple)`` widths.

    ``shuffle_buffer`` = 0 gives each epoch as a permutation of the whole split
    (:func:`permuted_pairs`); > 0 streams the files through a shuffle buffer of that many
    pairs (memory bounded, but the order on disk shows through).
    """
    limit = max_len + 1  # + EOS

    def keep(source, target):
        source_len, target_len = tf.size(source), tf.size(target)
        return (source_len > 1) & (target_len > 1) & (source_len <= limit) & (target_len <= limit)

    def sort_window(source, target):
        # Longer side first, then the shorter: consecutive pairs then have both sides of
        # similar length. (Sorting on the target alone left the source of a batch
        # spanning every length that translates to that target: 0.79 of source slots
        # were real tokens on Multi30k, against 0.87 with this key; bench/pipeline.py.)
        source_len, target_len = source.row_lengths(), target.row_lengths()
        key = tf.maximum(source_len, target_len) * (limit + 1) + tf.minimum(source_len, target_len)
        order = tf.argsort(key, stable=True)
        return tf.gather(source, order), tf.gather(target, order)

    if shuffle_buffer:
        ordered = (_lines(files)
                   .shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
                   .repeat())
    else:
        ordered = permuted_pairs(files, seed)
    pairs = (
        ordered
        .batch(_ENCODE_CHUNK)
        .map(_encode(source_encoder, target_encoder))
        .unbatch()
        .filter(keep)
    )
    if batch_tokens:
        rows = batch_tokens / max(1.0, mean_length or limit / 2)
        window = max(1, int(sort_batches * rows))
        batches = (
            pairs.ragged_batch(window)
            .map(sort_window)
            .map(_token_batches(batch_tokens))
            .unbatch()
        )
    else:
        batches = (
            pairs.ragged_batch(batch_size * sort_batches)
            .map(sort_window)
            .unbatch()
            .ragged_batch(batch_size)
        )
    return (
        batches
        .shuffle(sort_batches, seed=seed + 1, reshuffle_each_iteration=True)
        .map(_padder(length_multiple))
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
        _lines(files)
        .batch(batch_size)
        .map(_encode(source_encoder, target_encoder))
        .map(_padder())
        .prefetch(2)
    )
