"""Sentence splitting inside TensorFlow graphs (the exported SavedModel), and the join of a
line's translations.

:func:`split` runs the rewrite table of :mod:`keras_nmt.text.sentences` with
``tf.strings.regex_replace``, so the SavedModel splits a line where the Python translator
does. The ``join_*`` functions give a line's translation from its sentences' by the rules
of that module (texts joined as :func:`~keras_nmt.text.line_join.join_texts` joins them,
counts summed, the n-best list and its scores of
:func:`~keras_nmt.text.line_join.line_nbest`, attention block-diagonal).
"""

from __future__ import annotations

import tensorflow as tf

from keras_nmt.text import line_join, sentences


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


def join_nbest(texts: tf.Tensor, scores: tf.Tensor, filled: tf.Tensor, weights: tf.Tensor,
               row_splits: tf.Tensor, lang: str = "") -> tuple[tf.Tensor, tf.Tensor]:
    """The n-best lists of the sentences (texts, scores, and whether the slot holds a
    hypothesis; [S, K] each) and their weights (source tokens + EOS, [S]) -> those of the
    lines ([N, K]), as :func:`keras_nmt.text.line_join.line_nbest` gives them: the best
    combinations of one hypothesis per sentence, ranked by the weighted mean of their
    scores, texts joined for the target language ``lang``. A line has as many as its
    longest list; the slots past them are empty ("", -inf). A line of one sentence keeps
    its sentence's list.

    The lists are merged one position in the line after another, all lines at once: the K
    best sums of the line's K kept combinations and the next sentence's K hypotheses are
    the top K of their outer sum ([N, K * K]), exact for the top K. tf.math.top_k puts the
    lower index first among ties, which is the Python merge's order."""
    lines, line_of = _lines(row_splits), _line_of(row_splits)
    width = tf.shape(texts)[1]
    starts = tf.cast(row_splits[:-1], tf.int32)
    counts = tf.cast(row_splits[1:] - row_splits[:-1], tf.int32)
    inf = tf.constant(float("inf"), scores.dtype)
    # Each sentence's list best first (unfilled slots last), as the Python merge sorts it.
    present = tf.where(filled, scores, -inf)
    ranked, order = tf.math.top_k(present, k=width)
    ranked_texts = tf.gather(texts, order, batch_dims=1)
    weighted = ranked * tf.cast(weights, scores.dtype)[:, None]
    last = tf.maximum(tf.shape(texts)[0] - 1, 0)
    separator = tf.constant(line_join.sentence_separator(lang), tf.string)

    def merge(position, sums, joined):
        at = tf.minimum(starts + position, last)  # lines without this position: discarded
        outer = sums[:, :, None] + tf.gather(weighted, at)[:, None, :]
        best, flat = tf.math.top_k(tf.reshape(outer, [lines, width * width]), k=width)
        left = tf.gather(joined, flat // width, batch_dims=1)
        right = tf.gather(tf.gather(ranked_texts, at), flat % width, batch_dims=1)
        gap = tf.where(tf.not_equal(left, "") & tf.not_equal(right, ""), separator, "")
        joined_next = tf.strings.join([left, gap, right])
        more = (position < counts)[:, None]
        return (position + 1, tf.where(more, best, sums), tf.where(more, joined_next, joined))

    # One empty combination to start from: score 0 in slot 0, nothing in the others.
    start_sums = tf.where(tf.equal(tf.range(width), 0)[None, :],
                          tf.zeros([lines, width], scores.dtype), -inf)
    start_texts = tf.fill([lines, width], "")
    positions = tf.reduce_max(tf.concat([counts, [0]], 0))  # the most sentences of a line
    _, sums, joined = tf.while_loop(
        lambda position, *_: position < positions, merge,
        (tf.constant(0), start_sums, start_texts),
        shape_invariants=(tf.TensorShape([]), tf.TensorShape([None, None]),
                          tf.TensorShape([None, None])))
    total = tf.math.unsorted_segment_sum(tf.cast(weights, scores.dtype), line_of, lines)
    line_scores = sums / total[:, None]
    # A line of one sentence keeps its list in its own order: the filled slots in turn.
    single = tf.equal(counts, 1)[:, None]
    first = tf.minimum(starts, last)
    _, own = tf.math.top_k(tf.cast(tf.gather(filled, first), tf.int32), k=width)
    line_scores = tf.where(single, tf.gather(tf.gather(present, first), own, batch_dims=1),
                           line_scores)
    joined = tf.where(single, tf.gather(tf.gather(texts, first), own, batch_dims=1), joined)
    longest = tf.math.unsorted_segment_max(
        tf.reduce_sum(tf.cast(filled, tf.int32), axis=1), line_of, lines)
    kept = tf.range(width)[None, :] < longest[:, None]
    return (tf.where(kept, joined, tf.constant("", tf.string)),
            tf.where(kept, line_scores, -inf))


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
