"""The training update and the evaluation step (paper, Appendix B), on one device or
data-parallel, with loss scaling for float16."""

from __future__ import annotations

import dataclasses

import keras
import tensorflow as tf

from keras_nmt.core import distribute
from keras_nmt.core.config import Config
from keras_nmt.core.constants import PAD_ID
from keras_nmt.models.rnnsearch import TranslationModel, sampled_sentence_nll, sentence_nll
from keras_nmt.training import optimizers
from keras_nmt.training.pull import ParentPull

BATCH_SIGNATURE = (
    tf.TensorSpec([None, None], tf.int32, name="source_ids"),
    tf.TensorSpec([None, None], tf.int32, name="target_in"),
    tf.TensorSpec([None, None], tf.int32, name="target_out"),
)


def _target_tokens(target_out: tf.Tensor) -> tf.Tensor:
    return tf.reduce_sum(tf.cast(tf.not_equal(target_out, PAD_ID), tf.int64))


# Compared by identity: a model and variables have no equality of value.
@dataclasses.dataclass(eq=False)
class StepFunctions:
    """The steps of one model's training, as Python functions for tf.function: an update
    on a batch (``source_ids``, ``target_in``, ``target_out``) returns its mean NLL,
    target tokens and gradient norm; an evaluation its summed NLL, sentences and tokens.

    ``step``: the update counter, which seeds the sampled softmax. ``loss_scale``: a
    :class:`~keras_nmt.training.optimizers.DynamicLossScale`, or None to train unscaled.
    ``strategy``: None for one device; otherwise the model and optimizer must have been
    built in its scope. ``variables``: the weights an update differentiates and changes
    (None: every trainable weight of the model); a frozen weight is left out, so that no
    optimizer state or update ever reaches it. ``pull``: a
    :class:`~keras_nmt.training.pull.ParentPull` whose penalty the update adds to the
    loss it differentiates (the loss it returns stays the NLL)."""

    config: Config
    model: TranslationModel
    optimizer: keras.optimizers.Optimizer
    step: tf.Variable
    loss_scale: optimizers.DynamicLossScale | None = None
    strategy: tf.distribute.Strategy | None = None
    variables: list | None = None
    pull: ParentPull | None = None

    @property
    def trained(self) -> list:
        """The weights an update changes."""
        return self.model.trainable_variables if self.variables is None else self.variables

    def objective(self, loss, share: float = 1.0):
        """What an update differentiates: ``loss`` plus ``share`` of the pull's penalty
        (the whole of it on one device, a replica's part of it otherwise)."""
        if self.pull is None:
            return loss
        return loss + tf.cast(self.pull.penalty() * share, loss.dtype)

    def compiled_train_step(self, jit_compile: bool = False):
        step_fn = self.train_step if self.strategy is None else self.distributed_train_step
        # XLA compiles once per batch shape whatever the signature says; without one,
        # tf.function traces once per shape too, so its tracing count is the number of
        # compilations (bounded by Config.length_multiple).
        # Without autograph, as the search: the steps branch with tf.cond where a tensor
        # decides, so autograph's rewriting only costs tracing time (a tiny run's
        # training, its process whole, 0.92x the CPU time; the same updates).
        return tf.function(
            step_fn, input_signature=None if jit_compile else BATCH_SIGNATURE,
            jit_compile=jit_compile or None, reduce_retracing=False, autograph=False,
        )

    def compiled_eval_step(self):
        return tf.function(self.eval_step, input_signature=BATCH_SIGNATURE, autograph=False)

    def training_nll(self, source_ids, target_in, target_out, batch_targets=None):
        """Per-sentence NLL [B] of the training loss (smoothed with
        ``config.label_smoothing``): the full softmax, or with
        ``config.sampled_softmax`` a softmax over that many words, drawn anew each step
        (seeded by the run's seed and the step, so a resumed run draws the same).
        ``batch_targets``: the whole global batch's targets when these rows are one
        replica's share of it; the candidates are the global batch's words, so that
        every replica scores the same words as one device would."""
        count = min(self.config.sampled_softmax, self.model.config.tgt_vocab_size)
        smoothing = self.config.label_smoothing
        if not count:
            return sentence_nll(self.model((source_ids, target_in), training=True), target_out,
                                smoothing)
        hidden = self.model((source_ids, target_in), training=True, mode="hidden")
        readout = self.model.decoder.readout
        seed = tf.stack([tf.constant(self.config.seed, tf.int64), self.step])
        return sampled_sentence_nll(hidden, target_out, readout.output_kernel,
                                    readout.output_bias, count, seed,
                                    candidates_from=batch_targets, label_smoothing=smoothing)

    def train_step(self, source_ids, target_in, target_out):
        with tf.GradientTape() as tape:
            nll = self.training_nll(source_ids, target_in, target_out)
            loss = tf.reduce_mean(nll)
            scaled = self.scale_loss(self.objective(loss))
        variables = self.trained
        gradients = optimizers.combine_rows(self.unscale(tape.gradient(scaled, variables)))
        clipped, norm = tf.clip_by_global_norm(gradients, self.config.clipnorm)
        self.apply(clipped, variables, self.finite(gradients))
        return loss, _target_tokens(target_out), norm

    # Loss scaling (mixed_float16): the paper's clipping is on the true gradient's
    # norm, so gradients are unscaled before clipping; an update whose gradients
    # overflowed (inf or NaN) is skipped, and the scale lowered.
    def scale_loss(self, loss):
        return self.loss_scale.scale_loss(loss) if self.loss_scale is not None else loss

    def unscale(self, gradients):
        return self.loss_scale.unscale(gradients) if self.loss_scale is not None else gradients

    def finite(self, gradients):
        return optimizers.all_finite(gradients) if self.loss_scale is not None else None

    def apply(self, gradients, variables, finite, strategy=None):
        """The update, in the cross-replica context (or on the one device): every
        strategy and precision goes through :func:`optimizers.apply_update`, which
        reduces nothing, since the gradients arrive already all-reduced."""
        if finite is None:
            optimizers.apply_update(self.optimizer, gradients, variables, strategy)
            return
        if strategy is not None:
            # The same on every replica: their gradients were all-reduced.
            finite = strategy.experimental_local_results(finite)[0]

        def update():
            optimizers.apply_update(self.optimizer, gradients, variables, strategy)
            return tf.constant(True)

        tf.cond(finite, update, lambda: tf.constant(False))
        self.loss_scale.adjust(finite)

    def distributed_train_step(self, source_ids, target_in, target_out):
        """The same update as :meth:`train_step`, data-parallel: each replica takes its
        rows of the global batch; gradients of the summed NLL are all-reduced, divided by
        the global sentence count (= the gradient of the global batch's mean NLL), and
        only then clipped to the global norm, so the update is the single-device one.
        The update itself runs once, in the cross-replica context."""
        strategy = self.strategy
        batch = (source_ids, target_in, target_out)
        sentences = tf.cast(tf.shape(source_ids)[0], tf.float32)
        rows = strategy.experimental_distribute_values_from_function(
            lambda context: distribute.replica_rows(
                batch, context.replica_id_in_sync_group, context.num_replicas_in_sync
            )
        )
        variables = self.trained
        # Every replica adds its share of the penalty: the all-reduced sum is the whole.
        share = 1.0 / strategy.num_replicas_in_sync

        def replica_step(rows):
            source_ids, target_in, target_out = rows
            replica = tf.distribute.get_replica_context()
            with tf.GradientTape() as tape:
                nll_sum = tf.reduce_sum(self.training_nll(
                    source_ids, target_in, target_out, batch_targets=batch[2]))
                loss = nll_sum / sentences
                scaled = self.scale_loss(self.objective(loss, share))
            gradients = optimizers.combine_rows(replica.all_reduce(
                tf.distribute.ReduceOp.SUM, self.unscale(tape.gradient(scaled, variables))
            ))
            clipped, norm = tf.clip_by_global_norm(gradients, self.config.clipnorm)
            tokens = _target_tokens(target_out)
            loss = replica.all_reduce(tf.distribute.ReduceOp.SUM, loss)
            tokens = replica.all_reduce(tf.distribute.ReduceOp.SUM, tokens)
            return loss, tokens, norm, clipped, self.finite(gradients)

        loss, tokens, norm, clipped, finite = strategy.run(replica_step, args=(rows,))
        self.apply(clipped, variables, finite, strategy)
        first = strategy.experimental_local_results
        return first(loss)[0], first(tokens)[0], first(norm)[0]

    def eval_step(self, source_ids, target_in, target_out):
        logits = self.model((source_ids, target_in), training=False)
        nll = sentence_nll(logits, target_out)
        return tf.reduce_sum(nll), tf.cast(tf.shape(nll)[0], tf.int64), _target_tokens(target_out)
