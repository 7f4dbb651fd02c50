"""Training (paper, Appendix B): the Trainer holds a run's training state and runs the
loop of updates, development evaluations and checkpoints."""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Callable

import numpy as np
import tensorflow as tf

from keras_nmt.core import distribute, faults
from keras_nmt.core.config import Config
from keras_nmt.core.errors import TrainingDiverged
from keras_nmt.models.rnnsearch import TranslationModel
from keras_nmt.core.progress import Progress
from keras_nmt.rundir.run_directory import RunDir
from keras_nmt.training.checkpoints import CheckpointStore
from keras_nmt.training.budget import TrainingBudget, check_budget
from keras_nmt.training.optimizers import DynamicLossScale, make_optimizer
from keras_nmt.training.pull import ParentPull
from keras_nmt.training.schedules import scheduled_learning_rate
from keras_nmt.training.status import EpochEstimate, evaluation_line, status_line
from keras_nmt.training.steps import StepFunctions
from keras_nmt.training.stopping import EarlyStopping, chief_decides
from keras_nmt.training.summaries import Scalars


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
        strategy: tf.distribute.Strategy | None = None,
        jit_compile: bool = False,
        variables: list | None = None,
        pull: ParentPull | None = None,
    ):
        """``strategy``: None trains on one device; otherwise ``model`` must have been
        built in ``strategy.scope()``. Only the chief writes into ``run``
        (:class:`~keras_nmt.training.checkpoints.CheckpointStore`). ``variables``: the
        weights training updates (None: all of the model's trainable ones), in the
        model's order; ``pull``: the pull toward a parent's weights, made in the same
        scope, checkpointed with the rest of the state."""
        self.config = config
        self.model = model
        self.run = run
        self.dev_batches = dev_batches
        self.dev_bleu = dev_bleu
        self.train_pairs = max(1, train_pairs)
        self.strategy = strategy
        self.is_chief = distribute.is_chief(strategy)
        self.progress = progress if progress and self.is_chief else Progress(enabled=False)
        with distribute.scope(strategy):
            self.optimizer = make_optimizer(config)
            # Only the trained weights get optimizer state: a frozen one is never updated.
            self.variables = list(model.trainable_variables if variables is None else variables)
            self.optimizer.build(self.variables)
            # float16 gradients underflow: scale the loss up, the gradients down.
            self.loss_scale = (DynamicLossScale()
                               if config.precision == "mixed_float16" else None)
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
        self.sentences = tf.Variable(0, dtype=tf.int64, trainable=False, name="sentences")
        self.target_tokens = tf.Variable(0, dtype=tf.int64, trainable=False, name="target_tokens")
        self.elapsed = tf.Variable(0.0, dtype=tf.float64, trainable=False, name="elapsed")
        self.early_stopping = EarlyStopping(config.patience)
        self.iterator = iter(train_batches)
        state = tf.train.Checkpoint(
            model=model,
            optimizer=self.optimizer,
            **({"loss_scale": self.loss_scale} if self.loss_scale is not None else {}),
            **({"parent_pull": pull} if pull is not None else {}),
            iterator=self.iterator,
            step=self.step,
            sentences=self.sentences,
            target_tokens=self.target_tokens,
            elapsed=self.elapsed,
            **self.early_stopping.checkpointed(),
        )
        self.checkpoints = CheckpointStore(state, model, self.step, run, config, self.is_chief)
        self.step_functions = StepFunctions(config, model, self.optimizer, self.step,
                                            self.loss_scale, strategy, self.variables, pull)
        self.train_step = self.step_functions.compiled_train_step(jit_compile)
        self.eval_step = self.step_functions.compiled_eval_step()
        self.scalars = Scalars(run.tensorboard, enabled=self.is_chief)

    # -- state --------------------------------------------------------------------------
    def restore(self, log: Callable[[str], None] = print) -> bool:
        """Load the newest complete checkpoint
        (:meth:`~keras_nmt.training.checkpoints.CheckpointStore.restore`). Returns whether
        there was one."""
        return self.checkpoints.restore(log)

    def save(self) -> str:
        """Checkpoint the training state; a failed write raises RunWriteError."""
        return self.checkpoints.save()

    def dev_nll(self) -> float:
        """Mean per-sentence NLL on the development set (every pair, none dropped)."""
        total, sentences = 0.0, 0
        for (source_ids, target_in), target_out in self.dev_batches():
            nll, count, _ = self.eval_step(source_ids, target_in, target_out)
            total += float(nll)
            sentences += int(count)
        return total / max(1, sentences)

    def compilations(self) -> int:
        """Training-step graphs traced so far: with ``jit_compile``, one per batch shape,
        each compiled by XLA; without, 1."""
        return int(self.train_step.experimental_get_tracing_count())

    def epochs(self) -> float:
        return int(self.sentences.numpy()) / self.train_pairs

    # -- the loop -----------------------------------------------------------------------
    def fit(self, limits: TrainingBudget) -> Outcome:
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

        check_budget(config, limits)
        scheduled = config.lr_schedule != "constant"
        first_step = int(self.step.numpy())
        estimate = (EpochEstimate(self.train_pairs)
                    if limits.max_steps is None and limits.max_minutes is None else None)
        learning_rate = config.learning_rate

        while True:
            step = int(self.step.numpy())
            if limits.max_steps is not None and step >= limits.max_steps:
                stop_reason = "max_steps"
                break
            out_of_time = limits.max_minutes is not None and elapsed() >= limits.max_minutes * 60
            if limits.max_minutes is not None and chief_decides(
                    self.strategy, self.is_chief, out_of_time):
                stop_reason = "max_minutes"
                break
            (source_ids, target_in), target_out = next(self.iterator)
            if scheduled:
                # The budget share this update ends at (time: now plus this process's mean
                # step), so the last update gets the final rate.
                mean_step = (elapsed() - elapsed_before) / (step - first_step) if step > first_step else 0.0
                learning_rate = scheduled_learning_rate(
                    config, step, limits.progress(step + 1, elapsed() + mean_step))
                self.optimizer.learning_rate.assign(learning_rate)
            loss, tokens, norm = self.train_step(source_ids, target_in, target_out)
            loss = float(loss)
            if not math.isfinite(loss):
                raise TrainingDiverged(
                    f"the training loss became {loss} at step {step + 1}; the last good "
                    f"checkpoint is step {last_saved} in {self.run.checkpoints}. Resume from "
                    f"it with --resume, after lowering the learning rate (--set learning_rate=...)"
                )
            step += 1
            faults.point("step", step)
            self.step.assign(step)
            self.sentences.assign_add(int(tf.shape(source_ids)[0]))
            if estimate and (said := estimate.update(int(self.sentences.numpy()))):
                self.progress.message(said)
            self.target_tokens.assign_add(int(tokens))
            self.elapsed.assign(elapsed())
            recent_nll.append(loss)
            recent_tokens += int(tokens)
            now = time.monotonic()
            if now - window_start >= 2.0:
                tokens_per_second = recent_tokens / (now - window_start)
                recent_tokens, window_start = 0, now
            self.scalars.write(step, {"train/learning_rate": learning_rate, "train/nll": loss,
                                      "train/grad_norm": norm})

            stop = False
            if step % config.eval_every == 0:
                if self.is_chief:
                    stop = self._evaluate(step, float(np.mean(recent_nll[-config.eval_every :])))
                stop = chief_decides(self.strategy, self.is_chief, stop)
            if step % config.checkpoint_every == 0 or stop:
                self.save()
                last_saved = step
            self.progress.update(status_line(step, self.epochs(), loss, tokens_per_second,
                                             limits, elapsed()))
            if stop:
                stop_reason = "early_stopping"
                break

        self.elapsed.assign(elapsed())
        if int(self.step.numpy()) != last_saved:
            self.save()
        self.progress.close()
        self.scalars.flush()
        self.checkpoints.close()
        train_nll = float(np.mean(recent_nll[-config.eval_every :])) if recent_nll else math.nan
        return Outcome(
            stop_reason=stop_reason,
            steps=int(self.step.numpy()),
            epochs=self.epochs(),
            wall_seconds=float(self.elapsed.numpy()),
            train_nll=train_nll,
            best_dev_nll=float(self.early_stopping.best_dev_nll.numpy()),
            best_dev_bleu=(float(self.early_stopping.best_dev_bleu.numpy())
                           if self.dev_bleu else None),
            target_tokens=int(self.target_tokens.numpy()),
        )

    def _evaluate(self, step: int, train_nll: float) -> bool:
        """Development evaluation; keeps the best weights. Returns True to stop early."""
        dev_nll = self.dev_nll()
        faults.point("evaluation", step)
        dev_bleu = self.dev_bleu() if self.dev_bleu and self.config.early_stop_metric == "bleu" else None
        self.scalars.write(step, {"dev/nll": dev_nll,
                                  **({"dev/bleu": dev_bleu} if dev_bleu is not None else {})})
        improved = self.early_stopping.record(dev_nll, dev_bleu)
        if improved:
            self.checkpoints.save_best(step)
        self.progress.message(evaluation_line(step, train_nll, dev_nll, dev_bleu, improved))
        return self.early_stopping.patience_spent()
