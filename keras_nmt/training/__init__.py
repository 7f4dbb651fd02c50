"""Training (paper, Appendix B): compiled steps, checkpoints, resume, early stopping.

``trainer`` runs the loop and composes the rest: ``steps`` (the update and evaluation
steps, loss scaling, the data-parallel update), ``optimizers`` (the configured optimizer
and how an update is applied), ``schedules`` (the learning rate of each update),
``limits`` (the budget), ``stopping`` (early stopping), ``checkpoints`` (what a run
writes while training, and its restore), ``status`` and ``summaries`` (what the run
reports: its status lines and TensorBoard scalars), ``pull`` (the pull toward a parent's
weights of a run adapted from another, ``Config.parent_pull``).
"""

from keras_nmt.training.budget import TrainingBudget, check_budget
from keras_nmt.training.optimizers import make_optimizer
from keras_nmt.training.schedules import scheduled_learning_rate
from keras_nmt.training.status import EpochEstimate
from keras_nmt.training.trainer import Outcome, Trainer

__all__ = [
    "EpochEstimate",
    "TrainingBudget",
    "Outcome",
    "Trainer",
    "check_budget",
    "make_optimizer",
    "scheduled_learning_rate",
]
