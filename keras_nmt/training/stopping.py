"""When training stops early: after ``patience`` development evaluations in a row
without a better score, at the same step on every worker."""

from __future__ import annotations

import math

import tensorflow as tf

from keras_nmt.core import distribute


class EarlyStopping:
    """The best development scores so far and the evaluations since the best. They are
    variables in the training checkpoint, so that a resumed run keeps counting."""

    def __init__(self, patience: int):
        self.patience = patience
        self.best_score = tf.Variable(math.inf, dtype=tf.float64, trainable=False, name="best")
        self.best_dev_nll = tf.Variable(math.inf, dtype=tf.float64, trainable=False)
        self.best_dev_bleu = tf.Variable(-1.0, dtype=tf.float64, trainable=False)
        self.bad_evals = tf.Variable(0, dtype=tf.int64, trainable=False, name="bad_evals")

    def checkpointed(self) -> dict[str, tf.Variable]:
        """The variables by their names in the training checkpoint."""
        return {"best_score": self.best_score, "best_dev_nll": self.best_dev_nll,
                "best_dev_bleu": self.best_dev_bleu, "bad_evals": self.bad_evals}

    def record(self, dev_nll: float, dev_bleu: float | None) -> bool:
        """Count an evaluation: its BLEU decides when there is one, else its NLL.
        Returns whether it is the best so far (its weights are then the ones to keep)."""
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
        else:
            self.bad_evals.assign_add(1)
        return improved

    def patience_spent(self) -> bool:
        """Whether the last ``patience`` evaluations in a row brought no improvement."""
        return int(self.bad_evals.numpy()) >= self.patience


def chief_decides(strategy: tf.distribute.Strategy | None, is_chief: bool, flag: bool) -> bool:
    """The chief's ``flag`` on every worker: workers must stop at the same step, or
    the ones left would wait forever in their next all-reduce. Single-process
    training needs no agreement."""
    if not distribute.is_multiworker(strategy):
        return flag
    value = tf.constant(int(flag and is_chief), tf.int32)
    votes = strategy.experimental_distribute_values_from_function(lambda _: value)
    return int(strategy.reduce(tf.distribute.ReduceOp.SUM, votes, axis=None)) > 0
