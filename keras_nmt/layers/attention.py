"""Additive attention, the alignment model of RNNsearch (paper, A.1.2)."""

from __future__ import annotations

import keras
import tensorflow as tf

from keras_nmt.layers import initializers
from keras_nmt.layers.row_layout import hypotheses_per_sentence


@keras.saving.register_keras_serializable(package="keras_nmt")
class AdditiveAttention(keras.layers.Layer):
    """e_ij = v_a' tanh(W_a s_(i-1) + U_a h_j), alpha_ij = softmax_j(e_ij), c_i = sum_j alpha_ij h_j.

    U_a h_j does not depend on the decoder step, so :meth:`precompute_keys` computes it
    once per sentence and every step only adds W_a s_(i-1) to it. Source padding gets no
    weight: the softmax is taken over the unmasked positions only. The weighted values
    are the annotations h_j, or any linear map of them (a search's decoder weights its
    context projections directly, see ``Decoder.start``).
    """

    def __init__(self, units: int, init: str = "paper", **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.init = initializers.check_scheme(init)

    def build(self, query_shape, annotation_shape):
        query_dim, annotation_dim = int(query_shape[-1]), int(annotation_shape[-1])
        self.query_kernel = self.add_weight(  # W_a
            name="query_kernel", shape=(query_dim, self.units),
            initializer=initializers.alignment_weight(self.init),
        )
        self.key_kernel = self.add_weight(  # U_a
            name="key_kernel", shape=(annotation_dim, self.units),
            initializer=initializers.alignment_weight(self.init),
        )
        self.energy_kernel = self.add_weight(  # v_a
            name="energy_kernel", shape=(self.units,), initializer="zeros"
        )
        self.built = True

    def precompute_keys(self, annotations):
        """U_a h_j for every source position: [B, Tx, units]."""
        return tf.matmul(annotations, self.key_kernel)

    def call(self, query, keys, values, mask):
        """query s_(i-1) [B*K, n] -> (sum_j alpha_ij values_j [B*K, d], weights alpha_i
        [B*K, Tx]), with keys, values and mask of B sentences, each shared by its K
        queries (a beam's hypotheses, laid out as :mod:`keras_nmt.layers.row_layout` says;
        K = 1 in teacher forcing). With the annotations as ``values`` [B, Tx, 2n], the
        context c_i."""
        sentences, positions = tf.shape(keys)[0], tf.shape(keys)[1]
        beam = hypotheses_per_sentence(tf.shape(query)[0], sentences)
        projected = tf.reshape(tf.matmul(query, self.query_kernel), [sentences, beam, 1, self.units])
        # v_a' tanh(.) as one [rows, units] x [units, 1] product. Not tf.linalg.matvec on
        # the rank-4 tensor: with oneDNN on (TensorFlow 2.21's CPU default) that corrupted
        # the heap.
        hidden = tf.reshape(tf.tanh(keys[:, None] + projected), [-1, self.units])
        energies = tf.reshape(tf.matmul(hidden, self.energy_kernel[:, None]),
                              [sentences, beam, positions])
        # The most negative finite value of the compute dtype: -1e9 is -inf in float16,
        # and a row of -inf (a padding row of the batch) would give NaN weights.
        energies = tf.where(mask[:, None], energies, tf.constant(energies.dtype.min, energies.dtype))
        weights = tf.nn.softmax(energies, axis=-1)  # [B, K, Tx]
        context = tf.matmul(weights, values)  # [B, K, d]
        return (tf.reshape(context, [-1, tf.shape(values)[2]]),
                tf.reshape(weights, [-1, positions]))

    def get_config(self):
        return {**super().get_config(), "units": self.units, "init": self.init}
