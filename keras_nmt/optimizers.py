"""Adam and Adadelta with TensorFlow's fused update kernels.

Keras's own update steps are a dozen elementwise ops per variable, each a pass over
memory with its own temporary; for a model whose parameters are mostly embeddings and
a 30,000-word output layer that made the update about a fifth of a training step on a
CPU. TensorFlow's ``ResourceApplyAdam`` / ``ResourceApplyAdadelta`` kernels do the same
arithmetic in one multi-threaded pass. The formulas are Keras's (the same as
TensorFlow's kernels) on the dense gradient, and the slot variables are Keras's, so
checkpoints are interchangeable with Keras's classes. One difference: see ``_dense``.
"""

from __future__ import annotations

import keras
import tensorflow as tf


def _handle(variable):
    """The resource handle of a Keras or tf variable (on a distributed variable in an
    update context: its component on the device being updated)."""
    if isinstance(variable, keras.Variable):
        variable = variable.value
    return variable.handle


def _dense(gradient, dtype):
    # Embedding gradients arrive as IndexedSlices, a row once per occurrence of its word.
    # Keras's sparse path squares each occurrence apart (g1^2 + g2^2 in the second
    # moment); summing them first gives the squared gradient (g1 + g2)^2 that Adam and
    # Adadelta are defined with. The slots decay on every row either way.
    if isinstance(gradient, tf.IndexedSlices):
        gradient = tf.convert_to_tensor(gradient)
    return tf.cast(gradient, dtype)


@keras.saving.register_keras_serializable(package="keras_nmt")
class FusedAdam(keras.optimizers.Adam):
    """keras.optimizers.Adam (amsgrad off) updated by ``ResourceApplyAdam``."""

    def update_step(self, gradient, variable, learning_rate):
        if self.amsgrad:
            return super().update_step(gradient, variable, learning_rate)
        dtype = variable.dtype
        index = self._get_variable_index(variable)
        step = tf.cast(self.iterations + 1, dtype)
        tf.raw_ops.ResourceApplyAdam(
            var=_handle(variable),
            m=_handle(self._momentums[index]),
            v=_handle(self._velocities[index]),
            beta1_power=tf.pow(tf.cast(self.beta_1, dtype), step),
            beta2_power=tf.pow(tf.cast(self.beta_2, dtype), step),
            lr=tf.cast(learning_rate, dtype),
            beta1=tf.cast(self.beta_1, dtype),
            beta2=tf.cast(self.beta_2, dtype),
            epsilon=tf.cast(self.epsilon, dtype),
            grad=_dense(gradient, dtype),
        )


@keras.saving.register_keras_serializable(package="keras_nmt")
class FusedAdadelta(keras.optimizers.Adadelta):
    """keras.optimizers.Adadelta (the paper's) updated by ``ResourceApplyAdadelta``."""

    def update_step(self, grad, variable, learning_rate):
        dtype = variable.dtype
        index = self._get_variable_index(variable)
        tf.raw_ops.ResourceApplyAdadelta(
            var=_handle(variable),
            accum=_handle(self._accumulated_grads[index]),
            accum_update=_handle(self._accumulated_delta_vars[index]),
            lr=tf.cast(learning_rate, dtype),
            rho=tf.cast(self.rho, dtype),
            epsilon=tf.cast(self.epsilon, dtype),
            grad=_dense(grad, dtype),
        )
