"""Id rows in TensorFlow graphs, the same for every tokenizer kind: EOS appended to an
encoded batch, and a search output cut back to the ids of its text."""

from __future__ import annotations

import tensorflow as tf

from keras_nmt.core.constants import BOS_ID, EOS_ID, PAD_ID


def append_eos(ids: tf.RaggedTensor) -> tf.RaggedTensor:
    eos = tf.fill([ids.nrows(), 1], tf.constant(EOS_ID, tf.int32))
    return tf.concat([ids, eos], axis=1)


def ids_before_eos(ids) -> tf.RaggedTensor:
    """Id rows [N, T] (dense or ragged) -> ragged rows up to their first EOS, PAD and BOS
    skipped: :func:`keras_nmt.text.vocab.ids_before_eos` as graph ops."""
    if not isinstance(ids, tf.RaggedTensor):
        ids = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(ids))
    ids = tf.cast(ids, tf.int32)
    return tf.ragged.boolean_mask(ids, kept_before_eos(ids))


def kept_before_eos(ids):
    """Which positions of id rows [N, T] :func:`ids_before_eos` keeps (bool, the same
    shape): those before the row's first EOS that are neither PAD nor BOS."""
    before_eos = tf.math.cumsum(tf.cast(tf.equal(ids, EOS_ID), tf.int32), axis=1) == 0
    return before_eos & tf.not_equal(ids, PAD_ID) & tf.not_equal(ids, BOS_ID)
