"""How many tokens a search may generate for each sentence: the ratio rule or a given
maximum (:func:`decode_limits`); one pass over the [B, Tx] source ids."""

from __future__ import annotations

import tensorflow as tf

from keras_nmt.core.constants import PAD_ID


def decode_limits(source_ids, max_length=None, max_decode_ratio: float = 2.0):
    """Maximum number of generated tokens (EOS included) per sentence: int32 [B], >= 1.

    ``max_length`` (a scalar, Python or tensor) overrides the ratio rule when it is
    positive; ``None`` or a value <= 0 means ``ceil(max_decode_ratio * source_length) + 1``,
    the source length counted without padding.
    """
    source_ids = tf.convert_to_tensor(source_ids)
    source_length = tf.reduce_sum(tf.cast(tf.not_equal(source_ids, PAD_ID), tf.float32), axis=1)
    ratio = tf.cast(max_decode_ratio, tf.float32)
    limits = tf.cast(tf.math.ceil(ratio * source_length), tf.int32) + 1
    if max_length is not None:
        max_length = tf.cast(max_length, tf.int32)
        limits = tf.where(max_length > 0, tf.fill(tf.shape(limits), max_length), limits)
    return tf.maximum(limits, 1)
