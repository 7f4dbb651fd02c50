"""The row layout a beam search gives the decoder: a sentence's K hypotheses are K
consecutive rows. The search tiles the decoder state this way; the decoder's step
repeats a sentence's memory row for its hypotheses the same way."""

from __future__ import annotations

import tensorflow as tf


def tile_rows(x, beam_size):
    """[B, ...] -> [B*K, ...], each row repeated K times in a row (hypotheses of a
    sentence are contiguous). Static trailing dimensions are kept."""
    x = tf.convert_to_tensor(x)
    rank = x.shape.rank
    tiled = tf.tile(tf.expand_dims(x, 1), [1, beam_size] + [1] * (rank - 1))
    dynamic = tf.shape(x)
    trailing = [x.shape[i] if x.shape[i] is not None else dynamic[i] for i in range(1, rank)]
    return tf.reshape(tiled, [-1] + trailing)
