"""The best one-token extensions of every hypothesis, and the score of a dead one.

Contract: log-probabilities are the log-softmax over every column scored (the
vocabulary, or a shortlist's columns), banned columns included, as ``log_softmax``
followed by a ban would give. Cost for R rows of C columns: one top-k over C
(:func:`~keras_nmt.search.top_k.top_k_over_vocabulary`) and one log-sum-exp pass over
the R * C logits; the rest works on K + 3 columns per row.
"""

from __future__ import annotations

import tensorflow as tf

from keras_nmt.core.constants import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from keras_nmt.search.top_k import take_along_rows, top_k_over_vocabulary

# Log-probability of a dead or empty hypothesis. Finite on purpose: tf2onnx lowers
# tf.where to arithmetic (cond * x + (1 - cond) * y), where -inf would give NaN.
DEAD = -1e9
ALIVE = -5e8  # anything above this is a real hypothesis


def normalised_best(logits, wide, count=None):
    """The ``wide`` (at most the row's count) best columns of every row with their
    log-softmax values: (log-probs [R, W], columns [R, W], the row's maximum [R, 1], the
    row's log-sum-exp after it [R, 1], the count of real columns). ``logits`` [R, C] are
    over the whole vocabulary, or with ``count`` over a shortlist's whole blocks of
    columns, the first ``count`` real (:func:`row_candidates`). The normaliser covers every
    column, so a ban applied after it leaves the others' log-probabilities as they were."""
    whole_blocks = count is not None
    if count is None:
        count = tf.shape(logits)[1]
    top_logits, top_tokens = top_k_over_vocabulary(logits, tf.minimum(wide, count),
                                                   whole_blocks)
    peak = top_logits[:, :1]  # the row's maximum, log_softmax's shift, without another pass
    log_norm = tf.math.log(tf.reduce_sum(tf.exp(logits - peak), axis=1, keepdims=True))
    return (top_logits - peak) - log_norm, top_tokens, peak, log_norm, count


def never_generated(columns, forbid_unk, count):
    """Which ``columns`` no search may extend with: PAD, BOS, UNK when ``forbid_unk``, and
    a shortlist's padding columns (at or past ``count``)."""
    return (
        tf.equal(columns, PAD_ID)
        | tf.equal(columns, BOS_ID)
        | (forbid_unk & tf.equal(columns, UNK_ID))
        | (columns >= count)
    )


def only_first(lp, tokens, rows, first_lp, first_token, width):
    """``lp`` and ``tokens`` [R, width] with the rows ``rows`` (bool [R]) reduced to one
    candidate: ``first_token`` with ``first_lp`` (each [R, 1]), the others dead."""
    first = tf.equal(tf.range(width), 0)[None, :]
    rows = rows[:, None]
    return (tf.where(rows, tf.where(first, first_lp, DEAD), lp),
            tf.where(rows, tf.where(first, first_token, PAD_ID), tokens))


def row_candidates(logits, k, at_limit, forbid_unk, count=None):
    """The best extensions of every hypothesis: (log-probs, columns), each [B*K, R] with
    R = min(K, C), best first. ``logits`` [B*K, C] are over the whole vocabulary (column
    = word), or with ``count`` over the output columns of
    :func:`~keras_nmt.search.shortlist.output_columns`, whole blocks of which the first
    ``count`` are words (column i < 4 is reserved word i).

    The K best extensions of a sentence are among the K best of each of its rows, and
    within a row log-softmax keeps the order of the logits. So the vocabulary-wide work
    is one top-k over the raw logits (its first value is the row's maximum) and the
    row's log-sum-exp (:func:`normalised_best`); the log-softmax, the ban and the sum with
    the beam scores run on K + 3 columns, not on [B*K, V]. The normaliser covers every
    word, banned ones included, exactly as ``log_softmax`` followed by a ban would. Rows
    at their limit (``at_limit``) get EOS with its model log-probability and nothing else.
    """
    # Three more than K, so that K remain after dropping PAD, BOS and UNK.
    lp, top_tokens, peak, log_norm, count = normalised_best(logits, k + 3, count)
    narrow = tf.minimum(k, count)
    banned = never_generated(top_tokens, forbid_unk, count)
    lp, order = tf.math.top_k(tf.where(banned, DEAD, lp), k=narrow)
    tokens = take_along_rows(top_tokens, order)
    eos_lp = (logits[:, EOS_ID : EOS_ID + 1] - peak) - log_norm  # [B*K, 1]
    return only_first(lp, tokens, at_limit, eos_lp, EOS_ID, narrow)
