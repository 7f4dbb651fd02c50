"""Checkpoint averaging: the element-wise mean of a run's last or best N model weights.

Averaging the parameters of the last checkpoints of a run (or of its best ones) smooths
the noise of the final updates, a common recipe beyond the paper. The sources are
``recent/`` (the model weights of the last ``average_checkpoints`` checkpoints, kept when
that is set; else ``checkpoints/``, which keeps two) or ``best/``, and only trained
weights count: step 0, the random initialisation, is never averaged. The mean is written to
``averaged/`` as a model checkpoint, which every command loads with ``--weights averaged``.

The checkpoint is numbered by the newest step it averages (``averaged/ckpt-STEP``), and it
is written in a folder of its own that then replaces ``averaged/`` whole: a crash leaves
the old average or the new one, never a torn one. Cost: one pass over the N checkpoints'
float weights (float64 sums, the model's size twice in memory) and one write.
"""

from __future__ import annotations

import pathlib
import shutil
from typing import Callable, Sequence

from keras_nmt.core.atomic import replace_folder
from keras_nmt.core.errors import RunDirError
from keras_nmt.rundir.run_directory import RunDir

SOURCES = ("last", "best")


def checkpoints_to_average(run: RunDir, source: str, count: int, strict: bool = True) -> list[str]:
    """The checkpoint prefixes to average, oldest first: the ``count`` newest trained ones
    (never step 0, the untrained initialisation) of ``best/`` (source "best") or of
    ``recent/``, else ``checkpoints/`` (source "last"). Fewer than ``count`` is a
    RunDirError, unless ``strict`` is False: then those there are, maybe none (a run
    that ended before it wrote that many averages what it has)."""
    import tensorflow as tf

    from keras_nmt.rundir.model_weights import checkpoint_step

    if source not in SOURCES:
        raise ValueError(f"source must be one of {', '.join(SOURCES)}, got {source!r}")
    directories = [run.best] if source == "best" else [run.recent, run.checkpoints]
    for directory in directories:
        state = tf.train.get_checkpoint_state(str(directory))
        trained = [path for path in (state.all_model_checkpoint_paths if state else [])
                   if checkpoint_step(path) != 0]
        if not trained:
            continue
        paths = trained[-count:]
        if len(paths) < count and strict:
            raise RunDirError(
                f"{directory} holds {len(paths)} trained checkpoint(s) (step 0, the "
                f"untrained weights, is never averaged), fewer than the {count} to average "
                f"(train with --set average_checkpoints={count}"
                + (" --set average_from=best" if source == "best" else "") + ")"
            )
        return paths
    if not strict:
        return []
    raise RunDirError(f"{run.path} holds no trained checkpoints to average in "
                      + " or ".join(d.name + "/" for d in directories))


def average(run: RunDir, source: str = "last", count: int = 2, model=None,
            log: Callable[[str], None] = lambda text: None) -> str:
    """Write the mean of the ``count`` checkpoints :func:`checkpoints_to_average` chooses
    (strictly: fewer is an error) to ``averaged/``; returns the checkpoint written.
    ``model``: see :func:`write_average`."""
    return write_average(run, checkpoints_to_average(run, source, count), model, log)


def write_average(run: RunDir, paths: Sequence[str], model=None,
                  log: Callable[[str], None] = lambda text: None) -> str:
    """Write the mean of the model weights of the checkpoints ``paths`` (at least one) to
    ``averaged/``; returns the checkpoint written. ``model`` (the run's, built) is reused
    when given; its weights are left holding the average."""
    import numpy as np
    import tensorflow as tf

    from keras_nmt.rundir import model_weights

    if not paths:
        raise ValueError("no checkpoint to average")
    if model is None:  # its weights come from the checkpoints read below
        from keras_nmt.models.rnnsearch import TranslationModel

        model = TranslationModel(run.load_config())
    # Float weights are averaged; any other state keeps the newest checkpoint's value,
    # the last one read.
    weights = [w for w in model.weights if np.issubdtype(np.dtype(w.dtype), np.floating)]
    total = None
    for path in paths:
        log(f"reading {path}")
        model_weights.read_model(path, model)
        values = [w.numpy().astype(np.float64) for w in weights]
        total = values if total is None else [t + v for t, v in zip(total, values)]
    for weight, summed in zip(weights, total):
        weight.assign((summed / len(paths)).astype(weight.dtype))
    step = max(model_weights.checkpoint_step(path) for path in paths)
    written = _write_whole(run, tf.train.Checkpoint(model=model), step)
    log(f"wrote the average of {len(paths)} checkpoint(s) to {written}")
    return written


def _write_whole(run: RunDir, checkpoint, step: int) -> str:
    """``checkpoint`` saved as ``averaged/ckpt-STEP``: written in ``averaged.tmp/``, which
    then replaces ``averaged/`` (the old folder set aside, then removed). A half-done
    replacement of an earlier crash is finished first."""
    import tensorflow as tf

    work, aside = run.path / "averaged.tmp", run.path / "averaged.old.tmp"
    if aside.is_dir() and not run.averaged.exists():
        aside.rename(run.averaged)  # a crash between the two renames: the old one is back
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(aside, ignore_errors=True)
    try:
        manager = tf.train.CheckpointManager(checkpoint, str(work), max_to_keep=1)
        name = pathlib.Path(manager.save(checkpoint_number=step)).name
        replace_folder(work, run.averaged, aside)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(aside, ignore_errors=True)
    return str(run.averaged / name)
