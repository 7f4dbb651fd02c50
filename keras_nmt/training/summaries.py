"""TensorBoard scalars of a training run (``RUN_DIR/tensorboard``)."""

from __future__ import annotations

import pathlib

import tensorflow as tf


class Scalars:
    """Writes named scalars at a step. Only the chief writes into the run directory;
    on the other workers the writer writes nothing."""

    def __init__(self, directory: pathlib.Path, enabled: bool):
        self.writer = (
            tf.summary.create_file_writer(str(directory)) if enabled
            else tf.summary.create_noop_writer()
        )

    def write(self, step: int, values: dict[str, float | tf.Tensor]) -> None:
        with self.writer.as_default(step=step):
            for name, value in values.items():
                tf.summary.scalar(name, value)

    def flush(self) -> None:
        self.writer.flush()
