"""Training (paper, Appendix B): compiled steps, checkpoints, resume, early stopping."""

from __future__ import annotations

import dataclasses
import math
import pathlib
import re
import shutil
import tempfile
import time
from typing import Callable

import keras
import numpy as np
import tensorflow as tf

from keras_nmt import checkpoints, distribute, faults, optimizers
from keras_nmt.checkpoints import checkpoint_problem, checkpoint_step
from keras_nmt.config import Config, ConfigError
from keras_nmt.models import TranslationModel, sampled_sentence_nll, sentence_nll
from keras_nmt.progress import Progress, format_duration
from keras_nmt.rundir import RunDir, RunDirError
from keras_nmt.constants import PAD_ID

_BATCH_SIGNATURE = (
    tf.TensorSpec([None, None], tf.int32, name="source_ids"),
    tf.TensorSpec([None, None], tf.int32, name="target_in"),
    tf.TensorSpec([None, None], tf.int32, name="target_out"),
)


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite; the message says where to resume from."""


class RunWriteError(RunDirError):
    """The run directory could not be written (disk full, permissions); the message
    names the last complete checkpoint to resume from."""


# What a failed write raises: Python's own file I/O, or TensorFlow's file layer.
WRITE_ERRORS = (OSError, tf.errors.OpError)


def _os_reason(error: Exception) -> str:
    """The operating system's words for a failed write: "No space left on device"
    from an OSError, or from the end of a TF file error ("{{function_node ...}}
    PATH; File too large [Op:SaveV2]")."""
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    text = getattr(error, "message", None) or str(error)
    text = re.sub(r"\s*\[Op:\w+\].*$", "", text.splitlines()[0] if text else "")
    return text.rsplit("; ", 1)[-1].strip() or type(error).__name__


def make_optimizer(config: Config) -> keras.optimizers.Optimizer:
    """The configured optimizer. Gradient clipping is done by the training step (global
    norm, as the paper does), not by the optimizer."""
    if config.optimizer == "adadelta":
        return optimizers.FusedAdadelta(
            learning_rate=config.learning_rate, rho=config.rho, epsilon=config.epsilon
        )
    if config.optimizer == "adam":
        return optimizers.FusedAdam(learning_rate=config.learning_rate)
    return keras.optimizers.SGD(learning_rate=config.learning_rate)


def scheduled_learning_rate(config: Config, step: int, progress: float) -> float:
    """The learning rate of update ``step`` (0-based) once ``progress`` (0 to 1) of the
    budget will be spent: ``config.learning_rate``, or with ``lr_schedule="budget"`` a
    linear warm-up over ``warmup_steps``, then a cosine decay from the full rate at
    progress 0 to ``final_lr_fraction`` of it at progress 1."""
    if config.lr_schedule == "constant":
        return config.learning_rate
    warm = min(1.0, (step + 1) / config.warmup_steps) if config.warmup_steps else 1.0
    final = config.final_lr_fraction
    decay = final + (1.0 - final) * 0.5 * (1.0 + math.cos(math.pi * min(1.0, max(0.0, progress))))
    return config.learning_rate * warm * decay


@dataclasses.dataclass
class Limits:
    max_steps: int | None = None
    max_minutes: float | None = None  # total training time, summed over resumed sessions

    def progress(self, steps: int, seconds: float) -> float:
        """The share of the budget spent after ``steps`` updates and ``seconds`` of
        training: the larger of the two limits' shares (0 with no limit)."""
        shares = [0.0]
        if self.max_steps:
            shares.append(steps / self.max_steps)
        if self.max_minutes:
            shares.append(seconds / (60.0 * self.max_minutes))
        return min(1.0, max(shares))


def check_limits(config: Config, limits: Limits) -> None:
    """Raise :class:`ConfigError` when ``config``'s learning-rate schedule needs a budget
    to decay over and ``limits`` set none. :func:`keras_nmt.experiment.train` checks
    before it writes anything; :meth:`Trainer.fit` again for callers that build a
    Trainer themselves."""
    if config.lr_schedule != "constant" and limits.max_steps is None and limits.max_minutes is None:
        raise ConfigError(
            f"lr_schedule={config.lr_schedule!r} (as --recipe budget sets it) decays to the "
            "end of the training budget: give --max-minutes or --max-steps"
        )


class EpochEstimate:
    """For a run with no budget: the expected time of an epoch, from the rate of the
    session's first updates. The first update (which builds the graph) is not timed;
    then ``steps`` updates, or at least 2 taking ``seconds`` (a slow model on a CPU)."""

    def __init__(self, train_pairs: int, steps: int = 20, seconds: float = 60.0, clock=time.monotonic):
        self.train_pairs, self.steps, self.seconds, self.clock = train_pairs, steps, seconds, clock
        self.start: tuple[float, int] | None = None  # (time, sentences) after the first update
        self.timed = 0
        self.said = False

    def update(self, sentences: int) -> str | None:
        """After an update, with the sentences trained on so far: the estimate, once."""
        if self.said:
            return None
        if self.start is None:
            self.start = (self.clock(), sentences)
            return None
        self.timed += 1
        seconds = self.clock() - self.start[0]
        if self.timed < self.steps and (self.timed < 2 or seconds < self.seconds):
            return None
        self.said = True
        epoch = seconds / max(sentences - self.start[1], 1) * self.train_pairs
        return (f"no --max-steps or --max-minutes: an epoch ({self.train_pairs:,} pairs) takes "
                f"about {format_duration(epoch)} at the rate of the first {self.timed} updates; "
                "training goes on until early stopping (Ctrl-C stops it, --resume continues)")


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
    ):
        """``strategy``: None trains on one device; otherwise ``model`` must have been
        built in ``strategy.scope()``. Only the chief writes into ``run``: the other
        workers write their checkpoints (TF wants every worker to save) into a
        throw-away directory, removed by :meth:`close`."""
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
            self.optimizer.build(model.trainable_variables)
            # float16 gradients underflow: scale the loss up, the gradients down.
            self.loss_scale = (optimizers.DynamicLossScale()
                               if config.precision == "mixed_float16" else None)
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
            **({"loss_scale": self.loss_scale} if self.loss_scale is not None else {}),
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
        self.scratch = None if self.is_chief else tempfile.mkdtemp(prefix="keras-nmt-worker-")
        self.checkpoint_dir = run.checkpoints if self.is_chief else pathlib.Path(self.scratch, "checkpoints")
        self.manager = self._checkpoint_manager()
        averaging = config.average_checkpoints
        self.best_manager = tf.train.CheckpointManager(
            tf.train.Checkpoint(model=model),
            str(run.best if self.is_chief else pathlib.Path(self.scratch, "best")),
            max_to_keep=averaging if averaging and config.average_from == "best" else 1,
            step_counter=self.step,
        )
        # The model weights of the last N checkpoints, for averaging (keras_nmt.averaging).
        self.recent_manager = tf.train.CheckpointManager(
            tf.train.Checkpoint(model=model),
            str(run.recent if self.is_chief else pathlib.Path(self.scratch, "recent")),
            max_to_keep=averaging, step_counter=self.step,
        ) if averaging and config.average_from == "last" else None
        step_fn = self._train_step if strategy is None else self._distributed_train_step
        # XLA compiles once per batch shape whatever the signature says; without one,
        # tf.function traces once per shape too, so its tracing count is the number of
        # compilations (bounded by Config.length_multiple).
        self.train_step = tf.function(
            step_fn, input_signature=None if jit_compile else _BATCH_SIGNATURE,
            jit_compile=jit_compile or None, reduce_retracing=False,
        )
        self.eval_step = tf.function(self._eval_step, input_signature=_BATCH_SIGNATURE)
        self.writer = (
            tf.summary.create_file_writer(str(run.tensorboard)) if self.is_chief
            else tf.summary.create_noop_writer()
        )

    # -- compiled steps ---------------------------------------------------------------
    def _training_nll(self, source_ids, target_in, target_out, batch_targets=None):
        """Per-sentence NLL [B] of the training loss: the full softmax, or with
        ``config.sampled_softmax`` a softmax over that many words, drawn anew each step
        (seeded by the run's seed and the step, so a resumed run draws the same).
        ``batch_targets``: the whole global batch's targets when these rows are one
        replica's share of it; the candidates are the global batch's words, so that
        every replica scores the same words as one device would."""
        count = min(self.config.sampled_softmax, self.model.config.tgt_vocab_size)
        if not count:
            return sentence_nll(self.model((source_ids, target_in), training=True), target_out)
        hidden = self.model((source_ids, target_in), training=True, mode="hidden")
        readout = self.model.decoder.readout
        seed = tf.stack([tf.constant(self.config.seed, tf.int64), self.step])
        return sampled_sentence_nll(hidden, target_out, readout.output_kernel,
                                    readout.output_bias, count, seed,
                                    candidates_from=batch_targets)

    def _train_step(self, source_ids, target_in, target_out):
        with tf.GradientTape() as tape:
            nll = self._training_nll(source_ids, target_in, target_out)
            loss = tf.reduce_mean(nll)
            scaled = self._scale_loss(loss)
        variables = self.model.trainable_variables
        gradients = optimizers.combine_rows(self._unscale(tape.gradient(scaled, variables)))
        clipped, norm = tf.clip_by_global_norm(gradients, self.config.clipnorm)
        self._apply(clipped, variables, self._finite(gradients))
        tokens = tf.reduce_sum(tf.cast(tf.not_equal(target_out, PAD_ID), tf.int64))
        return loss, tokens, norm

    # Loss scaling (mixed_float16): the paper's clipping is on the true gradient's
    # norm, so gradients are unscaled before clipping; an update whose gradients
    # overflowed (inf or NaN) is skipped, and the scale lowered.
    def _scale_loss(self, loss):
        return self.loss_scale.scale_loss(loss) if self.loss_scale is not None else loss

    def _unscale(self, gradients):
        return self.loss_scale.unscale(gradients) if self.loss_scale is not None else gradients

    def _finite(self, gradients):
        return optimizers.all_finite(gradients) if self.loss_scale is not None else None

    def _apply(self, gradients, variables, finite, strategy=None):
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

    def _distributed_train_step(self, source_ids, target_in, target_out):
        """The same update as :meth:`_train_step`, data-parallel: each replica takes its
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
        variables = self.model.trainable_variables

        def replica_step(rows):
            source_ids, target_in, target_out = rows
            replica = tf.distribute.get_replica_context()
            with tf.GradientTape() as tape:
                nll_sum = tf.reduce_sum(self._training_nll(
                    source_ids, target_in, target_out, batch_targets=batch[2]))
                loss = nll_sum / sentences
                scaled = self._scale_loss(loss)
            gradients = optimizers.combine_rows(replica.all_reduce(
                tf.distribute.ReduceOp.SUM, self._unscale(tape.gradient(scaled, variables))
            ))
            clipped, norm = tf.clip_by_global_norm(gradients, self.config.clipnorm)
            tokens = tf.reduce_sum(tf.cast(tf.not_equal(target_out, PAD_ID), tf.int64))
            loss = replica.all_reduce(tf.distribute.ReduceOp.SUM, loss)
            tokens = replica.all_reduce(tf.distribute.ReduceOp.SUM, tokens)
            return loss, tokens, norm, clipped, self._finite(gradients)

        loss, tokens, norm, clipped, finite = strategy.run(replica_step, args=(rows,))
        self._apply(clipped, variables, finite, strategy)
        first = strategy.experimental_local_results
        return first(loss)[0], first(tokens)[0], first(norm)[0]

    def _eval_step(self, source_ids, target_in, target_out):
        logits = self.model((source_ids, target_in), training=False)
        nll = sentence_nll(logits, target_out)
        tokens = tf.reduce_sum(tf.cast(tf.not_equal(target_out, PAD_ID), tf.int64))
        return tf.reduce_sum(nll), tf.cast(tf.shape(nll)[0], tf.int64), tokens

    # -- state --------------------------------------------------------------------------
    def restore(self, log: Callable[[str], None] = print) -> bool:
        """Load the newest complete checkpoint. Returns whether there was one.

        The ``checkpoint`` state file is the commit point: files it does not name (a
        save killed before TF updated it) are left-overs and are removed. A named
        checkpoint that does not read back intact is skipped, with a message, for the
        one before it; nothing is restored from it. Raises RunDirError when the state
        file names checkpoints but none is complete, and
        :class:`~keras_nmt.checkpoints.CheckpointMismatchError` when one does not fit
        the model.
        """
        # Every worker restores from the chief's checkpoints (a shared run directory).
        state = tf.train.get_checkpoint_state(str(self.run.checkpoints))
        candidates = list(reversed(state.all_model_checkpoint_paths)) if state else []  # newest first
        if not candidates:
            return False
        for path in candidates:
            problem = checkpoint_problem(path)
            if problem is None:
                # A checkpoint that does not fit the model is no broken save: every
                # older one is of the same run, so the error stops the restore.
                checkpoints.check_model(path, self.model)
                try:
                    self.checkpoint.read(path).assert_existing_objects_matched()
                except (tf.errors.OpError, AssertionError, ValueError) as error:
                    problem = str(error).splitlines()[0]
            if problem is None:
                break
            log(f"checkpoint {path} is incomplete or unreadable ({problem}); using the one before it")
        else:
            raise RunDirError(
                f"no complete checkpoint in {self.run.checkpoints}: every checkpoint the "
                f"'checkpoint' file names is unreadable"
            )
        if self.is_chief:
            if path != candidates[0]:
                self._forget_checkpoints_after(path)
            self._remove_leftovers()
        return True

    def _forget_checkpoints_after(self, path: str) -> None:
        """Make ``path`` the latest checkpoint again: the state file is rewritten
        (atomically, by TF) without the later, broken ones, whose files then count as
        left-overs."""
        state = tf.train.get_checkpoint_state(str(self.run.checkpoints))
        keep = list(state.all_model_checkpoint_paths).index(path) + 1
        tf.compat.v1.train.update_checkpoint_state(
            str(self.run.checkpoints), path,
            all_model_checkpoint_paths=state.all_model_checkpoint_paths[:keep],
            all_model_checkpoint_timestamps=state.all_model_checkpoint_timestamps[:keep],
            last_preserved_timestamp=state.last_preserved_timestamp,
        )
        self.manager = self._checkpoint_manager()

    def _remove_leftovers(self) -> None:
        """Delete what a killed save leaves: TF's ``*_temp`` shard directories, its
        state file's temporary copies and checkpoint files the state file does not name."""
        named = {pathlib.Path(p).name for p in self.manager.checkpoints}
        for entry in self.run.checkpoints.iterdir():
            prefix = entry.name.split(".", 1)[0]
            if entry.name.endswith("_temp") and entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            elif entry.name.startswith("checkpoint.tmp") or (
                prefix.startswith("ckpt-") and prefix not in named
            ):
                entry.unlink(missing_ok=True)

    def _checkpoint_manager(self) -> tf.train.CheckpointManager:
        return tf.train.CheckpointManager(
            self.checkpoint, str(self.checkpoint_dir), max_to_keep=2, step_counter=self.step
        )

    def save(self) -> str:
        """Checkpoint the training state; a failed write raises RunWriteError."""
        step = int(self.step.numpy())
        faults.point("checkpoint-start", step)
        options = tf.train.CheckpointOptions(
            experimental_write_callbacks=[lambda: faults.writing_point(step)]
        )
        try:
            with faults.watch_writing(self.checkpoint_dir, step):
                path = self.manager.save(checkpoint_number=step, options=options)
            if self.recent_manager is not None:
                self.recent_manager.save(checkpoint_number=step)
        except WRITE_ERRORS as error:
            raise self._write_error(f"checkpoint of step {step}", error) from None
        faults.point("checkpoint-state-written", step)
        return path

    def save_best(self, step: int) -> None:
        options = tf.train.CheckpointOptions(
            experimental_write_callbacks=[lambda: faults.point("best-data-written", step)]
        )
        try:
            self.best_manager.save(checkpoint_number=step, options=options)
        except WRITE_ERRORS as error:
            raise self._write_error(f"best weights of step {step}", error) from None

    def _write_error(self, what: str, error: Exception) -> RunWriteError:
        reason = _os_reason(error)
        last = checkpoint_step(self.manager.latest_checkpoint)
        where = (
            f"the last complete checkpoint is step {last}; free space (or fix the permissions) "
            f"and continue with --resume" if last is not None else "no checkpoint was written"
        )
        return RunWriteError(
            f"cannot write the {what} in {self.run.path}: {reason.splitlines()[0]}; {where}"
        )

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

        check_limits(config, limits)
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
            if limits.max_minutes is not None and self._chief_decides(out_of_time):
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
            with self.writer.as_default(step=step):
                tf.summary.scalar("train/learning_rate", learning_rate)
                tf.summary.scalar("train/nll", loss)
                tf.summary.scalar("train/grad_norm", norm)

            stop = False
            if step % config.eval_every == 0:
                if self.is_chief:
                    stop = self._evaluate(step, float(np.mean(recent_nll[-config.eval_every :])))
                stop = self._chief_decides(stop)
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
        if self.scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)
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

    def _chief_decides(self, flag: bool) -> bool:
        """The chief's ``flag`` on every worker: workers must stop at the same step, or
        the ones left would wait forever in their next all-reduce. Single-process
        training needs no agreement."""
        if not distribute.is_multiworker(self.strategy):
            return flag
        value = tf.constant(int(flag and self.is_chief), tf.int32)
        votes = self.strategy.experimental_distribute_values_from_function(lambda _: value)
        return int(self.strategy.reduce(tf.distribute.ReduceOp.SUM, votes, axis=None)) > 0

    def _evaluate(self, step: int, train_nll: float) -> bool:
        """Development evaluation; keeps the best weights. Returns True to stop early."""
        dev_nll = self.dev_nll()
        faults.point("evaluation", step)
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
            self.save_best(step)
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
