"""The decoder's GRU, conditioned on the previous word and a context vector (A.2.2)."""

from __future__ import annotations

import keras
import tensorflow as tf

from keras_nmt.layers import gru, initializers
from keras_nmt.layers.linear import apply_kernel


@keras.saving.register_keras_serializable(package="keras_nmt")
class ConditionalGRUCell(keras.layers.Layer):
    """s_i = (1 - z_i) o s_(i-1) + z_i o s~_i, where

        z_i  = sigmoid(W_z E y_(i-1) + U_z s_(i-1) + C_z c_i)
        r_i  = sigmoid(W_r E y_(i-1) + U_r s_(i-1) + C_r c_i)
        s~_i = tanh(W E y_(i-1) + U [r_i o s_(i-1)] + C c_i)

    The three gates' matrices are fused ([z | r | candidate]) so each input costs one
    matmul. The word term W E y does not depend on the recurrence, so callers project
    whole target sequences at once with :meth:`project_inputs` and the step only adds
    the context and recurrent terms. ``reset_after=True`` gives the cuDNN-style gate,
    r o (U s), offered for speed; the paper's form applies r before the product.
    """

    def __init__(self, units: int, reset_after: bool = False, init: str = "paper", **kwargs):
        super().__init__(**kwargs)
        self.init = initializers.check_scheme(init)
        self.units = units
        self.reset_after = reset_after

    def build(self, input_dim: int, context_dim: int):
        n = self.units
        self.input_kernel = self.add_weight(
            name="input_kernel", shape=(int(input_dim), 3 * n), initializer=initializers.weight(self.init)
        )
        self.context_kernel = self.add_weight(
            name="context_kernel", shape=(int(context_dim), 3 * n), initializer=initializers.weight(self.init)
        )
        self.recurrent_kernel = self.add_weight(
            name="recurrent_kernel", shape=(n, 3 * n), initializer=initializers.recurrent(self.init)
        )
        self.bias = self.add_weight(name="bias", shape=(3 * n,), initializer="zeros")
        if self.reset_after:
            self.recurrent_bias = self.add_weight(
                name="recurrent_bias", shape=(n,), initializer="zeros"
            )
        self.built = True

    def project_inputs(self, embedded):
        """W E y + b for any leading shape: [..., m] -> [..., 3n]."""
        return apply_kernel(embedded, self.input_kernel) + self.bias

    def project_context(self, context):
        """C c: [B, context_dim] -> [B, 3n]."""
        return tf.matmul(context, self.context_kernel)

    def recurrent_kernels(self):
        """(kernels, recurrent bias) as :func:`keras_nmt.layers.gru.gates` takes them.
        Teacher forcing takes them once, outside its loop."""
        kernels = gru.recurrent_kernels(self.recurrent_kernel, self.units, self.reset_after)
        if not self.reset_after:
            return kernels, None
        # This cell's recurrent bias is the candidate's only: b in r o (U s + b).
        bias = tf.convert_to_tensor(self.recurrent_bias)  # in the compute dtype
        return kernels, tf.concat([tf.zeros([2 * self.units], bias.dtype), bias], axis=0)

    def call(self, projected_input, projected_context, state, kernels=None):
        """One step from the two projections and s_(i-1) [B, n] to s_i [B, n].
        ``kernels``: :meth:`recurrent_kernels`, when the caller has them already."""
        kernels, bias = self.recurrent_kernels() if kernels is None else kernels
        z, candidate = gru.gates(projected_input + projected_context, state, kernels, bias)
        return (1.0 - z) * state + z * candidate

    def get_config(self):
        return {**super().get_config(), "units": self.units, "reset_after": self.reset_after,
                "init": self.init}
