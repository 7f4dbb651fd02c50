"""The optimizers of training: the configured one (:func:`make_optimizer`), Adam and
Adadelta with TensorFlow's fused update kernels, and how an update is applied.

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

from keras_nmt.core.config import Config


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


def make_optimizer(config: Config) -> keras.optimizers.Optimizer:
    """The configured optimizer. Gradient clipping is done by the training step (global
    norm, as the paper does), not by the optimizer."""
    if config.optimizer == "adadelta":
        return FusedAdadelta(
            learning_rate=config.learning_rate, rho=config.rho, epsilon=config.epsilon
        )
    if config.optimizer == "adam":
        return FusedAdam(learning_rate=config.learning_rate)
    return keras.optimizers.SGD(learning_rate=config.learning_rate)


# The state each optimizer keeps per trained variable: Keras's attribute names, lists in
# the order of the variables the optimizer was built with (SGD keeps none without momentum).
SLOTS = {"adadelta": ("_accumulated_grads", "_accumulated_delta_vars"),
         "adam": ("_momentums", "_velocities"), "sgd": ("momentums",)}


def slot_variables(optimizer: keras.optimizers.Optimizer, kind: str, variable) -> list:
    """The state ``optimizer`` (of ``kind``, a name of config.OPTIMIZERS) keeps for
    ``variable``, one of those it was built with: what a run that keeps its parent's
    optimizer (``train --init-from --keep-optimizer``) copies."""
    index = optimizer._get_variable_index(variable)
    return [getattr(optimizer, name)[index] for name in SLOTS[kind]
            if getattr(optimizer, name, None)]


def _values(gradient):
    return gradient.values if isinstance(gradient, tf.IndexedSlices) else gradient


def _scaled(gradient, factor):
    if isinstance(gradient, tf.IndexedSlices):
        return tf.IndexedSlices(gradient.values * tf.cast(factor, gradient.values.dtype),
                                gradient.indices, gradient.dense_shape)
    return gradient * tf.cast(factor, gradient.dtype)


def combine_rows(gradients):
    """Each IndexedSlices gradient with one row per index: an embedding's gradient holds
    a row per occurrence of a word, and an all-reduced one a row per replica. The
    global norm that the clipping needs is the norm of the summed rows; the norm of
    the parts differs (|a + b|^2 is not |a|^2 + |b|^2). Dense gradients pass through."""
    combined = []
    for gradient in gradients:
        if isinstance(gradient, tf.IndexedSlices):
            indices, positions = tf.unique(gradient.indices)
            values = tf.math.unsorted_segment_sum(gradient.values, positions, tf.size(indices))
            gradient = tf.IndexedSlices(values, indices, gradient.dense_shape)
        combined.append(gradient)
    return combined


def all_finite(gradients) -> tf.Tensor:
    """Whether every gradient value is finite (a scalar bool)."""
    return tf.reduce_all([tf.reduce_all(tf.math.is_finite(_values(g))) for g in gradients])


class DynamicLossScale(tf.Module):
    """Dynamic loss scaling for float16 training: the loss is multiplied by ``scale``
    so that small gradients do not underflow in float16, and the gradients divided by
    it again. An update whose gradients overflowed is skipped and the scale halved;
    after ``growth_steps`` finite updates in a row it doubles. The numbers are Keras's
    LossScaleOptimizer's; the scaling is not a wrapper around the optimizer, so that
    the update step (:func:`apply_update`) is one and the same with every precision
    and strategy. The scale is a power of two: scaling and unscaling are exact."""

    def __init__(self, initial_scale: float = 2.0**15, growth_steps: int = 2000):
        super().__init__(name="loss_scale")
        self.growth_steps = growth_steps
        # Every replica reads the same value; only the cross-replica update writes it.
        self.scale = tf.Variable(initial_scale, dtype=tf.float32, trainable=False, name="scale",
                                 aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        self.finite_steps = tf.Variable(0, dtype=tf.int64, trainable=False, name="finite_steps",
                                        aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)

    def scale_loss(self, loss):
        return loss * tf.cast(self.scale, loss.dtype)

    def unscale(self, gradients):
        return [_scaled(g, 1.0 / self.scale) for g in gradients]

    def adjust(self, finite):
        """After an update with ``finite`` gradients (or a skipped one without)."""
        steps = tf.where(finite, self.finite_steps + 1, tf.constant(0, tf.int64))
        grow = steps >= self.growth_steps
        self.scale.assign(tf.where(finite, tf.where(grow, self.scale * 2.0, self.scale),
                                   self.scale * 0.5))
        self.finite_steps.assign(tf.where(grow, tf.constant(0, tf.int64), steps))


def apply_update(optimizer: keras.optimizers.Optimizer, gradients, variables,
                 strategy: tf.distribute.Strategy | None = None) -> None:
    """One update of ``variables`` by ``optimizer`` with the given, final gradients.

    Keras's ``Optimizer.apply`` sums the gradients over the replicas itself when it
    runs in a replica context: gradients that the training step has already
    all-reduced (to clip them by the global batch's norm) would be counted once per
    replica. Here the optimizer's own ``update_step`` is applied to each variable
    through the strategy's cross-replica ``update``, which reduces nothing: with a
    strategy, call this in the cross-replica context, with the per-replica values
    ``strategy.run`` returned (identical on every replica). Without one, the default
    strategy does the same on the one device."""
    strategy = strategy or tf.distribute.get_strategy()
    learning_rate = optimizer.learning_rate

    def update(variable, gradient, learning_rate):
        return optimizer.update_step(gradient, variable, learning_rate)

    for gradient, variable in zip(gradients, variables):
        variable = variable.value if isinstance(variable, keras.Variable) else variable
        strategy.extended.update(variable, update, args=(gradient, learning_rate), group=False)
    optimizer.iterations.assign_add(1)
