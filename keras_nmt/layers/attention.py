"""Additive attention, the alignment model of RNNsearch (paper, A.1.2)."""

from __future__ import annotations

import keras
import tensorflow as tf

from keras_nmt.layers import initializers


@keras.saving.register_keras_serializable(package="keras_nmt")
class AdditiveAttention(keras.layers.Layer):
    """e_ij = v_a' tanh(W_a s_(i-1) + U_a h_j), alpha_ij = softmax_j(e_ij), c_i = sum_j alpha_ij h_j.

    U_a h_j does not depend on the decoder step, so :meth:`precompute_keys` computes it
    once per sentence and every step only adds W_a s_(i-1) to it. Source padding gets no
    weight: the softmax is taken over the unmasked positions only.
    """

    def __init__(self, units: int, **kwargs):
        super().__init__(**kwargs)
        self.units = units

    def build(self, query_shape, annotation_shape):
        query_dim, annotation_dim = int(query_shape[-1]), int(annotation_shape[-1])
        self.query_kernel = self.add_weight(  # W_a
            name="query_kernel", shape=(query_dim, self.units),
            initializer=initializers.alignment_weight(),
        )
        self.key_kernel = self.add_weight(  # U_a
            name="key_kernel", shape=(annotation_dim, self.units),
            initializer=initializers.alignment_weight(),
        )
        self.energy_kernel = self.add_weight(  # v_a
            name="energy_kernel", shape=(self.units,), initializer="zeros"
        )
        self.built = True

    def precompute_keys(self, annotations):
        """U_a h_j for every source position: [B, Tx, units]."""
        return tf.matmul(annotations, self.key_kernel)

    def call(self, query, keys, annotations, mask):
        """query s_(i-1) [B, n] -> (context c_i [B, 2n], weights alpha_i [B, Tx])."""
        projected = tf.expand_dims(tf.matmul(query, self.query_kernel), 1)
        energies = tf.linalg.matvec(tf.tanh(keys + projected), self.energy_kernel)
        # The most negative finite value of the compute dtype: -1e9 is -inf in float16,
        # and a row of -inf (a padding row of the batch) would give NaN weights.
        energies = tf.where(mask, energies, tf.constant(energies.dtype.min, energies.dtype))
        weights = tf.nn.softmax(energies, axis=-1)
        context = tf.einsum("bt,btd->bd", weights, annotations)
        return context, weights

    def get_config(self):
        return {**super().get_config(), "units": self.units}
