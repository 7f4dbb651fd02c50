"""Training (paper, Appendix B): compiled steps, checkpoints, resume, early stopping."""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Callable

import keras
import numpy as np
import tensorflow as tf

from keras_nmt.config import Config
from keras_nmt.models import TranslationModel, sentence_nll
from keras_nmt.progress import Progress, format_duration
from keras_nmt.rundir import RunDir

_BATCH_SIGNATURE = (
    tf.TensorSpec([None, None], tf.int32, name="source_ids"),
    tf.TensorSpec([None, None], tf.int32, name="target_in"),
    tf.TensorSpec([None, None], tf.int32, name="target_out"),
)


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite; the message says where to resume from."""


def make_optimizer(config: Config) -> keras.optimizers.Optimizer:
    """The configured optimizer. Gradient clipping is done by the training step (global
    norm, as the paper does), not by the optimizer."""
    if config.optimizer == "adadelta":
        return keras.optimizers.Adadelta(
            learning_rate=config.learning_rate, rho=config.rho, epsilon=config.epsilon
        )
    if config.optimizer == "adam":
        return keras.optimizers.Adam(learning_rate=config.learning_rate)
    return keras.optimizers.SGD(learning_rate=config.learning_rate)


@dataclasses.dataclass
class Limits:
    max_steps: int | None = None
    max_minutes: float | None = None  # total training time, summed over resumed sessions


@dataclasses.dataclass
class Outcome:
    stop_reason: str
    steps: int
    epochs: float
    wall_seconds: float
    train_nll: float  # mean per-sentence NLL over the last evaluation interval
    best_dev_nll: float
    best_dev_bleu: float | None
    target_tokens: int


class Trainer:
    """Owns the model's training state and writes it to ``run.checkpoints``.

    The checkpoint holds the model, the optimizer, the counters and the input
    pipeline's iterator, so ``--resume`` continues with the very next batch.
    """

    def __init__(
        self,
        config: Config,
        model: TranslationModel,
        run: RunDir,
        train_batches: tf.data.Dataset,
        dev_batches: Callable[[], tf.data.Dataset],
        train_pairs: int,
        dev_bleu: Callable[[], float] | None = None,
        progress: Progress | None = None,
    ):
        self.config = config
        self.model = model
        self.run = run
        self.dev_batches = dev_batches
        self.dev_bleu = dev_bleu
        self.train_pairs = max(1, train_pairs)
        self.progress = progress or Progress(enabled=False)
        self.optimizer = make_optimizer(config)
        self.optimizer.build(model.trainable_variables)
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
        self.sentences = tf.Variable(0, dtype=tf.int64, trainable=False, name="sentences")
        self.target_tokens = tf.Variable(0, dtype=tf.int64, trainable=False, name="target_tokens")
        self.elapsed = tf.Variable(0.0, dtype=tf.float64, trainable=False, name="elapsed")
        self.best_score = tf.Variable(math.inf, dtype=tf.float64, trainable=False, name="best")
        self.best_dev_nll = tf.Variable(math.inf, dtype=tf.float64, trainable=False)
        self.best_dev_bleu = tf.Variable(-1.0, dtype=tf.float64, trainable=False)
        self.bad_evals = tf.Variable(0, dtype=tf.int64, trainable=False, name="bad_evals")
        self.iterator = iter(train_batches)
        self.checkpoint = tf.train.Checkpoint(
            model=model,
            optimizer=self.optimizer,
            iterator=self.iterator,
            step=self.step,
            sentences=self.sentences,
            target_tokens=self.target_tokens,
            elapsed=self.elapsed,
            best_score=self.best_score,
            best_dev_nll=self.best_dev_nll,
            best_dev_bleu=self.best_dev_bleu,
            bad_evals=self.bad_evals,
        )
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, str(run.checkpoints), max_to_keep=2, step_counter=self.step
        )
        self.best_manager = tf.train.CheckpointManager(
            tf.train.Checkpoint(model=model), str(run.best), max_to_keep=1, step_counter=self.step
        )
        self.train_step = tf.function(self._train_step, input_signature=_BATCH_SIGNATURE)
        self.eval_step = tf.function(self._eval_step, input_signature=_BATCH_SIGNATURE)
        self.writer = tf.summary.create_file_writer(str(run.tensorboard))

    # -- compiled steps ---------------------------------------------------------------
    def _train_step(self, source_ids, target_in, target_out):
        with tf.GradientTape() as tape:
            logits = self.model((source_ids, target_in), training=True)
            nll = sentence_nll(logits, target_out)
            loss = tf.reduce_mean(nll)
        variables = self.model.trainable_variables
        gradients = tape.gradient(loss, variables)
        clipped, norm = tf.clip_by_global_norm(gradients, self.config.clipnorm)
        self.optimizer.apply_gradients(zip(clipped, variables))
        tokens = tf.reduce_sum(tf.cast(tf.not_equal(target_out, 0), tf.int64))
        return loss, tokens, norm

    def _eval_step(self, source_ids, target_in, target_out):
        logits = self.model((source_ids, target_in), training=False)
        nll = sentence_nll(logits, target_out)
        tokens = tf.reduce_sum(tf.cast(tf.not_equal(target_out, 0), tf.int64))
        return tf.reduce_sum(nll), tf.cast(tf.shape(nll)[0], tf.int64), tokens

    # -- state --------------------------------------------------------------------------
    def restore(self) -> bool:
        """Load the latest checkpoint, if any. Returns whether one was found."""
        latest = self.manager.latest_checkpoint
        if latest is None:
            return False
        self.checkpoint.read(latest).assert_existing_objects_matched()
        return True

    def save(self) -> str:
        return self.manager.save(checkpoint_number=self.step)

    def dev_nll(self) -> float:
        """Mean per-sentence NLL on the development set (every pair, none dropped)."""
        total, sentences = 0.0, 0
        for (source_ids, target_in), target_out in self.dev_batches():
            nll, count, _ = self.eval_step(source_ids, target_in, target_out)
            total += float(nll)
            sentences += int(count)
        return total / max(1, sentences)

    def epochs(self) -> float:
        return int(self.sentences.numpy()) / self.train_pairs

    # -- the loop -----------------------------------------------------------------------
    def fit(self, limits: Limits) -> Outcome:
        config = self.config
        session_start = time.monotonic()
        elapsed_before = float(self.elapsed.numpy())
        recent_nll: list[float] = []
        recent_tokens, window_start = 0, time.monotonic()
        tokens_per_second = 0.0
        stop_reason = "max_steps"
        last_saved = int(self.step.numpy())

        def elapsed() -> float:
            return elapsed_before + time.monotonic() - session_start

        while True:
            step = int(self.step.numpy())
            if limits.max_steps is not None and step >= limits.max_steps:
                stop_reason = "max_steps"
                break
            if limits.max_minutes is not None and elapsed() >= limits.max_minutes * 60:
                stop_reason = "max_minutes"
                break
            (source_ids, target_in), target_out = next(self.iterator)
            loss, tokens, norm = self.train_step(source_ids, target_in, target_out)
            loss = float(loss)
            if not math.isfinite(loss):
                raise TrainingDiverged(
                    f"the training loss became {loss} at step {step + 1}; the last good "
                    f"checkpoint is step {last_saved} in {self.run.checkpoints}. Resume from "
                    f"it with --resume, after lowering the learning rate (--set learning_rate=...)"
                )
            step += 1
            self.step.assign(step)
            self.sentences.assign_add(int(tf.shape(source_ids)[0]))
            self.target_tokens.assign_add(int(tokens))
            self.elapsed.assign(elapsed())
            recent_nll.append(loss)
            recent_tokens += int(tokens)
            now = time.monotonic()
            if now - window_start >= 2.0:
                tokens_per_second = recent_tokens / (now - window_start)
                recent_tokens, window_start = 0, now
            with self.writer.as_default(step=step):
                tf.summary.scalar("train/nll", loss)
                tf.summary.scalar("train/grad_norm", norm)

            stop = False
            if step % config.eval_every == 0:
                stop = self._evaluate(step, float(np.mean(recent_nll[-config.eval_every :])))
            if step % config.checkpoint_every == 0 or stop:
                self.save()
                last_saved = step
            self.progress.update(self._status(step, loss, tokens_per_second, limits, elapsed()))
            if stop:
                stop_reason = "early_stopping"
                break

        self.elapsed.assign(elapsed())
        if int(self.step.numpy()) != last_saved:
            self.save()
        self.progress.close()
        self.writer.flush()
        train_nll = float(np.mean(recent_nll[-config.eval_every :])) if recent_nll else math.nan
        return Outcome(
            stop_reason=stop_reason,
            steps=int(self.step.numpy()),
            epochs=self.epochs(),
            wall_seconds=float(self.elapsed.numpy()),
            train_nll=train_nll,
            best_dev_nll=float(self.best_dev_nll.numpy()),
            best_dev_bleu=float(self.best_dev_bleu.numpy()) if self.dev_bleu else None,
            target_tokens=int(self.target_tokens.numpy()),
        )

    def _evaluate(self, step: int, train_nll: float) -> bool:
        """Development evaluation; keeps the best weights. Returns True to stop early."""
        dev_nll = self.dev_nll()
        dev_bleu = self.dev_bleu() if self.dev_bleu and self.config.early_stop_metric == "bleu" else None
        with self.writer.as_default(step=step):
            tf.summary.scalar("dev/nll", dev_nll)
            if dev_bleu is not None:
                tf.summary.scalar("dev/bleu", dev_bleu)
        # Lower is better for the stored score, so BLEU is negated.
        score = -dev_bleu if dev_bleu is not None else dev_nll
        improved = score < float(self.best_score.numpy())
        if dev_nll < float(self.best_dev_nll.numpy()):
            self.best_dev_nll.assign(dev_nll)
        if dev_bleu is not None and dev_bleu > float(self.best_dev_bleu.numpy()):
            self.best_dev_bleu.assign(dev_bleu)
        if improved:
            self.best_score.assign(score)
            self.bad_evals.assign(0)
            self.best_manager.save(checkpoint_number=step)
        else:
            self.bad_evals.assign_add(1)
        bleu_text = f"  dev BLEU {dev_bleu:.2f}" if dev_bleu is not None else ""
        self.progress.message(
            f"step {step}: train NLL {train_nll:.2f}  dev NLL {dev_nll:.2f}{bleu_text}"
            f"{'  (best, saved)' if improved else ''}"
        )
        return int(self.bad_evals.numpy()) > self.config.patience

    def _status(self, step, loss, tokens_per_second, limits: Limits, elapsed: float) -> str:
        remaining = []
        if limits.max_steps is not None and tokens_per_second > 0:
            rate = step / max(elapsed, 1e-9)
            remaining.append((limits.max_steps - step) / max(rate, 1e-9))
        if limits.max_minutes is not None:
            remaining.append(limits.max_minutes * 60 - elapsed)
        eta = f"  ETA {format_duration(min(remaining))}" if remaining else ""
        total = f"/{limits.max_steps}" if limits.max_steps is not None else ""
        return (
            f"step {step}{total}  epoch {self.epochs():.2f}  loss {loss:.2f}  "
            f"{tokens_per_second:,.0f} tgt tok/s  elapsed {format_duration(elapsed)}{eta}"
        )
