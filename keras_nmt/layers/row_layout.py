"""The beam row layout: the contract between a beam search and the decoder's layers.

A search over B sentences with K hypotheses each (the beam size) hands the decoder's step
B*K rows, sentence by sentence: hypothesis h of sentence b is row b*K + h, so a sentence's
hypotheses are K consecutive rows, and [B*K, ...] and [B, K, ...] are the same tensor
reshaped. What a step keeps per sentence (the encoder's memory) has one row per sentence,
B rows, which every hypothesis of the sentence reads. Teacher forcing is K = 1.

The search writes rows in this layout (:func:`tile_rows`, :func:`rows_of`); the layers
read K back with :func:`hypotheses_per_sentence`. Neither side computes the layout
itself.
"""

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


def rows_of(sentences, hypotheses, beam_size):
    """The rows of hypotheses ``hypotheses`` of sentences ``sentences`` (int tensors that
    broadcast together to [S, H]), sentence by sentence: int [S*H]."""
    return tf.reshape(sentences * beam_size + hypotheses, [-1])


def hypotheses_per_sentence(rows, sentences):
    """K, for a step over ``rows`` rows whose memory has ``sentences`` rows (scalar
    ints; ``rows`` is a multiple of ``sentences``)."""
    return rows // sentences
