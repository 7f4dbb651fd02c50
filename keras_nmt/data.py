"""tf.data pipelines: text files -> tokenized, length-bucketed, padded batches.

Files are streamed with TextLineDataset, so memory does not grow with the corpus, and
tokenized with the graph tokenizer of :mod:`keras_nmt.text`. Batches are
``((source_ids, target_in), target_out)``, int32, padded with 0.
"""

from __future__ import annotations

import tensorflow as tf

from keras_nmt.corpus.readers import ParallelFiles
from keras_nmt.text import TokenEncoder, decoder_io

_ENCODE_CHUNK = 512  # lines tokenized per vectorized call


def _lines(files: ParallelFiles) -> tf.data.Dataset:
    def read(path):
        compression = "GZIP" if path.suffix == ".gz" else None
        # Strip CR so CRLF files give the same tokens as LF files.
        return tf.data.TextLineDataset(str(path), compression_type=compression).map(
            lambda line: tf.strings.regex_replace(line, "\r$", "")
        )

    return tf.data.Dataset.zip((read(files.source), read(files.target)))


def _encode(source_encoder: TokenEncoder, target_encoder: TokenEncoder):
    def encode(source_lines, target_lines):
        return source_encoder(source_lines), target_encoder(target_lines)

    return encode


def _pad(source, target):
    target_in, target_out = decoder_io(target)
    return (source.to_tensor(), target_in.to_tensor()), target_out.to_tensor()


def training_batches(
    files: ParallelFiles,
    source_encoder: TokenEncoder,
    target_encoder: TokenEncoder,
    *,
    max_len: int,
    batch_size: int,
    sort_batches: int,
    seed: int,
    shuffle_buffer: int = 10_000,
) -> tf.data.Dataset:
    """An endless stream of training batches, bucketed the paper's way.

    Pairs with an empty side or more than ``max_len`` tokens on either side are dropped.
    Then ``sort_batches`` minibatches' worth of pairs are sorted by length and cut into
    minibatches, whose order is shuffled, so each batch holds sentences of similar
    length and little padding.
    """
    window = batch_size * sort_batches
    limit = max_len + 1  # + EOS

    def keep(source, target):
        source_len, target_len = tf.size(source), tf.size(target)
        return (source_len > 1) & (target_len > 1) & (source_len <= limit) & (target_len <= limit)

    def sort_window(source, target):
        key = target.row_lengths() * (limit + 1) + source.row_lengths()
        order = tf.argsort(key, stable=True)
        return tf.gather(source, order), tf.gather(target, order)

    return (
        _lines(files)
        .shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
        .repeat()
        .batch(_ENCODE_CHUNK)
        .map(_encode(source_encoder, target_encoder))
        .unbatch()
        .filter(keep)
        .ragged_batch(window)
        .map(sort_window)
        .unbatch()
        .ragged_batch(batch_size)
        .shuffle(sort_batches, seed=seed + 1, reshuffle_each_iteration=True)
        .map(_pad)
        .prefetch(2)
    )


def evaluation_batches(
    files: ParallelFiles,
    source_encoder: TokenEncoder,
    target_encoder: TokenEncoder,
    *,
    batch_size: int,
) -> tf.data.Dataset:
    """Every pair once, in file order (nothing dropped), as padded batches."""
    return (
        _lines(files)
        .batch(batch_size)
        .map(_encode(source_encoder, target_encoder))
        .map(_pad)
        .prefetch(2)
    )
