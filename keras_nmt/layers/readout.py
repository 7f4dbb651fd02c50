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
        if projection is None:
            kernel, bias = self.output_kernel, self.output_bias
        else:
            kernel, bias, rest_kernel, rest_column = projection
        # bias_add, not +: TF's graph optimizer fuses MatMul + BiasAdd into one kernel,
        # which saves a pass over [..., V] floats in every decoding step.
        logits = tf.nn.bias_add(apply_kernel(hidden, kernel), bias)
        if projection is None:
            return logits
        # The left-out words' logit, a product of its own: inside the gathered kernel
        # it would hide that kernel's Gather from the int8 export, which quantizes it.
        rest = tf.linalg.matvec(hidden, rest_kernel)[..., None] + tf.gather(bias, rest_column)
        return tf.where(tf.equal(tf.range(tf.shape(bias)[0]), rest_column), rest, logits)

    def columns(self, columns, count):
        """W_o and its bias restricted to the words ``columns`` (int [C]), for
        :meth:`project`: (kernel [l, C], bias [C], the left-out words' kernel [l], their
        column). The first ``count`` columns are words. Column ``count`` stands for the N
        words left out: the mean of their columns of W_o, and the mean of their biases
        plus log N, so that its exp is N exp(mean logit), a lower bound (Jensen) on the
        probability mass they hold. Without it a softmax over the chosen words alone
        raises every step by the mass left out, most where the model is unsure, and
        hypotheses through unsure steps overtake; the bound takes back the part of that
        mass the words share. The columns after it are padding. Neither is a word: the
        padding's bias, and the left-out column's with no word left out, are so low
        that their probability is 0, and a search bans both (``row_candidates``)."""
        kernel = tf.gather(self.output_kernel, columns, axis=1)
        bias = tf.gather(self.output_bias, columns)
        position = tf.range(tf.shape(columns)[0])
        chosen = tf.cast(position < count, tf.float32)
        left = tf.cast(self.vocab_size - count, tf.float32)
        # Sums in float32: the biases of a vocabulary summed in float16 overflow.
        full_kernel, full_bias = (tf.cast(w, tf.float32) for w in (self.output_kernel, self.output_bias))
        kept_kernel = tf.linalg.matvec(tf.cast(kernel, tf.float32), chosen)
        kept_bias = tf.reduce_sum(tf.cast(bias, tf.float32) * chosen)
        share = 1.0 / tf.maximum(left, 1.0)
        rest_kernel = (tf.reduce_sum(full_kernel, axis=1) - kept_kernel) * share
        rest_bias = (tf.reduce_sum(full_bias) - kept_bias) * share + tf.math.log(tf.maximum(left, 1.0))
        # -1e9, or half the most negative float16 (whose -1e9 is -inf).
        low = max(-1e9, float(bias.dtype.min) / 2)
        rest_bias = tf.where(left > 0, rest_bias, low)
        padding = tf.cast(position > count, bias.dtype)
        bias = tf.where(tf.equal(position, count), tf.cast(rest_bias, bias.dtype),
                        bias + padding * tf.constant(low, bias.dtype))
        return kernel, bias, tf.cast(rest_kernel, kernel.dtype), count

    def call(self, state, embedded, context):
        """Unnormalised log-probabilities over the target shortlist: [..., V]."""
        return self.project(self.hidden(state, embedded, context))

    def get_config(self):
        return {**super().get_config(), "units": self.units, "vocab_size": self.vocab_size,
                "init": self.init}
