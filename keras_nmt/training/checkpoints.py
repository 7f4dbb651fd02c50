"""The checkpoints a run writes while training: the whole training state in
``checkpoints/`` (for ``--resume``), the best weights in ``best/``, the last weights in
``recent/`` (for averaging); restoring the newest complete one, and clearing what a
save killed half-way left."""

from __future__ import annotations

import pathlib
import re
import shutil
import tempfile
from typing import Callable

import tensorflow as tf

from keras_nmt.core import faults
from keras_nmt.core.config import Config
from keras_nmt.core.errors import RunDirError, RunWriteError
from keras_nmt.rundir.model_weights import check_model, checkpoint_problem, checkpoint_step
from keras_nmt.models.rnnsearch import TranslationModel
from keras_nmt.rundir.run_directory import RunDir


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


class CheckpointStore:
    """The checkpoints of ``state``, the training state of ``model``, numbered by
    ``step``. Only the chief writes into ``run``: the other workers write their
    checkpoints (TF wants every worker to save) into a throw-away directory, removed by
    :meth:`close`."""

    def __init__(self, state: tf.train.Checkpoint, model: TranslationModel, step: tf.Variable,
                 run: RunDir, config: Config, is_chief: bool):
        self.state = state
        self.model = model
        self.step = step
        self.run = run
        self.is_chief = is_chief
        self.scratch = None if is_chief else tempfile.mkdtemp(prefix="keras-nmt-worker-")
        self.directory = run.checkpoints if is_chief else pathlib.Path(self.scratch, "checkpoints")
        self.manager = self._manager()
        averaging = config.average_checkpoints
        self.best_manager = tf.train.CheckpointManager(
            tf.train.Checkpoint(model=model),
            str(run.best if is_chief else pathlib.Path(self.scratch, "best")),
            max_to_keep=averaging if averaging and config.average_from == "best" else 1,
            step_counter=step,
        )
        # The model weights of the last N checkpoints after step 0, for averaging
        # (keras_nmt.rundir.averaging).
        self.recent_manager = tf.train.CheckpointManager(
            tf.train.Checkpoint(model=model),
            str(run.recent if is_chief else pathlib.Path(self.scratch, "recent")),
            max_to_keep=averaging, step_counter=step,
        ) if averaging and config.average_from == "last" else None

    def _manager(self) -> tf.train.CheckpointManager:
        return tf.train.CheckpointManager(
            self.state, str(self.directory), max_to_keep=2, step_counter=self.step
        )

    def restore(self, log: Callable[[str], None] = print) -> bool:
        """Load the newest complete checkpoint. Returns whether there was one.

        The ``checkpoint`` state file is the commit point: files it does not name (a
        save killed before TF updated it) are left-overs and are removed. A named
        checkpoint that does not read back intact is skipped, with a message, for the
        one before it; nothing is restored from it. Raises RunDirError when the state
        file names checkpoints but none is complete, and
        :class:`~keras_nmt.core.errors.CheckpointMismatchError` when one does not fit
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
                check_model(path, self.model)
                try:
                    self.state.read(path).assert_existing_objects_matched()
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
        self.manager = self._manager()

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

    def save(self) -> str:
        """Checkpoint the training state; a failed write raises RunWriteError."""
        step = int(self.step.numpy())
        faults.point("checkpoint-start", step)
        options = tf.train.CheckpointOptions(
            experimental_write_callbacks=[lambda: faults.writing_point(step)]
        )
        try:
            with faults.watch_writing(self.directory, step):
                path = self.manager.save(checkpoint_number=step, options=options)
            # Step 0 is the untrained initialisation: never one of the weights averaged.
            if self.recent_manager is not None and step > 0:
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

    def close(self) -> None:
        if self.scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)
