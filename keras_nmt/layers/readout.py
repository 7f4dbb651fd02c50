"""The deep output with a maxout hidden layer (A.2.2)."""

from __future__ import annotations

import keras
import tensorflow as tf

from keras_nmt.layers import initializers
from keras_nmt.layers.linear import apply_kernel


@keras.saving.register_keras_serializable(package="keras_nmt")
class MaxoutReadout(keras.layers.Layer):
    """t~_i = U_o s_(i-1) + V_o E y_(i-1) + C_o c_i; t_i = max over pairs of t~_i;
    logits = W_o t_i. Works on any leading shape, so teacher forcing runs it once over
    the whole target sequence instead of once per step."""

    def __init__(self, units: int, vocab_size: int, init: str = "paper", **kwargs):
        super().__init__(**kwargs)
        self.init = initializers.check_scheme(init)
        self.units = units  # l
        self.vocab_size = vocab_size

    def build(self, state_dim: int, embedding_dim: int, context_dim: int):
        two_l = 2 * self.units
        self.state_kernel = self.add_weight(  # U_o
            name="state_kernel", shape=(int(state_dim), two_l), initializer=initializers.weight(self.init)
        )
        self.embedding_kernel = self.add_weight(  # V_o
            name="embedding_kernel", shape=(int(embedding_dim), two_l), initializer=initializers.weight(self.init)
        )
        self.context_kernel = self.add_weight(  # C_o
            name="context_kernel", shape=(int(context_dim), two_l), initializer=initializers.weight(self.init)
        )
        self.bias = self.add_weight(name="bias", shape=(two_l,), initializer="zeros")
        self.output_kernel = self.add_weight(  # W_o
            name="output_kernel", shape=(self.units, self.vocab_size), initializer=initializers.weight(self.init)
        )
        self.output_bias = self.add_weight(
            name="output_bias", shape=(self.vocab_size,), initializer="zeros"
        )
        self.built = True

    def project_context(self, context):
        """C_o c: [..., context_dim] -> [..., 2l]."""
        return apply_kernel(context, self.context_kernel)

    def hidden(self, state, embedded, context=None, projected_context=None):
        """The maxout layer t_i: [..., l], from the context c_i or its projection C_o c_i."""
        if projected_context is None:
            projected_context = self.project_context(context)
        pre = (
            apply_kernel(state, self.state_kernel)
            + apply_kernel(embedded, self.embedding_kernel)
            + projected_context
            + self.bias
        )
        pairs = tf.reshape(pre, tf.concat([tf.shape(pre)[:-1], [self.units, 2]], axis=0))
        return tf.reduce_max(pairs, axis=-1)

    def project(self, hidden, projection=None):
        """The maxout layer [..., l] -> unnormalised log-probabilities [..., V], or over
        the columns of ``projection`` (from :meth:`columns`): [..., C]."""
        kernel, bias = projection if projection is not None else (self.output_kernel, self.output_bias)
        # bias_add, not +: TF's graph optimizer fuses MatMul + BiasAdd into one kernel,
        # which saves a pass over [..., V] floats in every decoding step.
        return tf.nn.bias_add(apply_kernel(hidden, kernel), bias)

    def columns(self, columns, count):
        """W_o and its bias restricted to the words ``columns`` (int [C]), for
        :meth:`project`: (kernel [l, C], bias [C]). Columns from ``count`` on are padding:
        their bias is so low that their probability is 0 (a search never picks them)."""
        kernel = tf.gather(self.output_kernel, columns, axis=1)
        bias = tf.gather(self.output_bias, columns)
        # -1e9, or half the most negative float16 (whose -1e9 is -inf).
        low = max(-1e9, float(bias.dtype.min) / 2)
        padding = tf.cast(tf.range(tf.shape(columns)[0]) >= count, bias.dtype)
        return kernel, bias + padding * tf.constant(low, bias.dtype)

    def call(self, state, embedded, context):
        """Unnormalised log-probabilities over the target shortlist: [..., V]."""
        return self.project(self.hidden(state, embedded, context))

    def get_config(self):
        return {**super().get_config(), "units": self.units, "vocab_size": self.vocab_size,
                "init": self.init}
