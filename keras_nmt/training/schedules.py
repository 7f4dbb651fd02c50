"""The learning rate of each update: constant, or warm-up then cosine decay over the
training budget."""

from __future__ import annotations

import math

from keras_nmt.core.config import Config


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
