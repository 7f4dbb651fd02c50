"""A run's budget: at most so many updates or minutes, and the share of it spent."""

from __future__ import annotations

import dataclasses

from keras_nmt.core.config import Config
from keras_nmt.core.errors import ConfigError


@dataclasses.dataclass
class TrainingBudget:
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


def check_budget(config: Config, limits: TrainingBudget) -> None:
    """Raise :class:`ConfigError` when ``config``'s learning-rate schedule needs a budget
    to decay over and ``limits`` set none. :func:`keras_nmt.runner.experiment.train` checks
    before it writes anything; :meth:`~keras_nmt.training.Trainer.fit` again for
    callers that build a Trainer themselves."""
    if config.lr_schedule != "constant" and limits.max_steps is None and limits.max_minutes is None:
        raise ConfigError(
            f"lr_schedule={config.lr_schedule!r} (as --recipe budget sets it) decays to the "
            "end of the training budget: give --max-minutes or --max-steps"
        )
