"""Sentence splitting inside TensorFlow graphs (the exported SavedModel), and the join of a
line's translations.

:func:`split` runs the rewrite table of :mod:`keras_nmt.text.sentences` with
``tf.strings.regex_replace``, so the SavedModel splits a line where the Python translator
does. The ``join_*`` functions give a line's translation from its sentences' by the rules
of that module (text one space apart, scores and counts summed, n-best hypothesis k from
hypothesis k of each sentence, attention block-diagonal).
"""

from __future__ import annotations

import tensorflow as tf

from keras_nmt.text import sentences


def split(lines, lang: str) -> tf.RaggedTensor:
    """Lines [N] (tf.string) -> their sentences, ragged [N, None] (at least one a line)."""
    lines = tf.convert_to_tensor(lines, tf.string)
    for pattern, rewrite in sentences.rules_for(lang):
        lines = tf.strings.regex_replace(lines, pattern, rewrite)
    pieces = tf.strings.split(lines, sep=sentences.BREAK)
    return tf.ragged.map_flat_values(_unescape, pieces)


def _unescape(pieces: tf.Tensor) -> tf.Tensor:
    for pattern, rewrite in sentences.UNESCAPE_RULES:
        pieces = tf.strings.regex_replace(pieces, pattern, rewrite)
    return pieces


def _line_of(row_splits: tf.Tensor) -> tf.Tensor:
    """The line of each sentence, int32 [S]."""
    return tf.cast(tf.ragged.row_splits_to_segment_ids(row_splits), tf.int32)


def _lines(row_splits: tf.Tensor) -> tf.Tensor:
    return tf.cast(tf.shape(row_splits)[0] - 1, tf.int32)


def join_sums(values: tf.Tensor, row_splits: tf.Tensor) -> tf.Tensor:
    """Per sentence [S, ...] -> per line [N, ...]: the sum over the line's sentences."""
    return tf.math.unsorted_segment_sum(values, _line_of(row_splits), _lines(row_splits))


def join_nbest(texts: tf.Tensor, scores: tf.Tensor, filled: tf.Tensor,
               row_splits: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """The n-best lists of the sentences (texts, scores, and whether the slot holds a
    hypothesis; [S, K] each) -> those of the lines ([N, K]): slot k joins slot k of each
    sentence (slot 0 where that one is empty), texts one space apart without the empty
    ones, scores summed; a slot empty in every sentence is empty ("", -inf)."""
    lines, line_of = _lines(row_splits), _line_of(row_splits)
    width = tf.shape(texts)[1]
    slot = tf.where(filled, tf.range(width)[None, :], 0)
    texts = tf.gather(texts, slot, batch_dims=1)
    scores = tf.gather(scores, slot, batch_dims=1)
    segments = line_of[:, None] * width + tf.range(width)[None, :]  # (line, slot), [S, K]
    kept = tf.not_equal(texts, "")
    joined = tf.strings.unsorted_segment_join(
        tf.boolean_mask(texts, kept), tf.boolean_mask(segments, kept), lines * width,
        separator=" ")
    joined = tf.reshape(joined, [lines, width])
    summed = tf.math.unsorted_segment_sum(scores, line_of, lines)
    any_filled = tf.math.unsorted_segment_max(tf.cast(filled, tf.int32), line_of, lines) > 0
    return (tf.where(any_filled, joined, tf.constant("", tf.string)),
            tf.where(any_filled, summed, tf.constant(float("-inf"), scores.dtype)))


def join_attention(attention: tf.Tensor, rows: tf.Tensor, columns: tf.Tensor,
                   row_splits: tf.Tensor) -> tf.Tensor:
    """The sentences' attention [S, T, X] (the first ``rows`` x ``columns`` of each are
    its own) -> each line's block-diagonal matrix [N, T', X'], zero-padded."""
    lines, line_of = _lines(row_splits), _line_of(row_splits)
    starts = tf.gather(tf.cast(row_splits[:-1], tf.int32), line_of)

    def offsets(sizes):  # where each sentence's block starts within its line
        before = tf.math.cumsum(sizes, exclusive=True)
        return before - tf.gather(before, starts)

    shape = tf.shape(attention)
    inside = ((tf.range(shape[1])[None, :, None] < rows[:, None, None])
              & (tf.range(shape[2])[None, None, :] < columns[:, None, None]))
    where = tf.cast(tf.where(inside), tf.int32)  # [K, 3]: sentence, row, column
    sentence = where[:, 0]
    target = tf.stack([tf.gather(line_of, sentence),
                       tf.gather(offsets(rows), sentence) + where[:, 1],
                       tf.gather(offsets(columns), sentence) + where[:, 2]], axis=1)
    size = [lines,
            tf.maximum(tf.reduce_max(join_sums(rows, row_splits)), 0),
            tf.maximum(tf.reduce_max(join_sums(columns, row_splits)), 0)]
    return tf.scatter_nd(target, tf.gather_nd(attention, where), size)
