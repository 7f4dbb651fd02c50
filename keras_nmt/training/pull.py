"""The pull toward a parent's weights (``Config.parent_pull``): an L2 penalty that bounds
how far a run adapted from another one (``train --init-from``) moves from the weights it
started from, and so how much of the parent's domain it forgets.

The loss gains s/2 x sum((w - w_parent)^2) over every trained weight the run shares with
its parent, whose gradient s x (w - w_parent) draws each weight back toward the parent's
value in proportion to how far it has gone (L2-SP, Li et al., 2018). The rows of words
the parent did not have start from no learned value, so nothing pulls them.
"""

from __future__ import annotations

from typing import Sequence

import tensorflow as tf


class ParentPull(tf.Module):
    """The penalty over ``variables`` (the weights training updates), toward their values
    when the pull is made: the parent's, copied in before. The anchors are checkpointed
    with the training state, so a resumed run pulls toward the same values without
    reading its parent again.

    ``shared_rows``: for each of ``variables``, None when the whole weight is the
    parent's, or ``(axis, rows)`` when only its first ``rows`` along ``axis`` are (a
    weight indexed by word, whose later rows are the run's new words)."""

    def __init__(self, strength: float, variables: Sequence, shared_rows: Sequence):
        super().__init__(name="parent_pull")
        if len(variables) != len(shared_rows):
            raise ValueError("one entry of shared_rows per variable")
        self.strength = float(strength)
        self.variables_pulled = list(variables)
        self.shared_rows = list(shared_rows)
        self.anchors = [tf.Variable(tf.convert_to_tensor(variable), trainable=False,
                                    name=f"anchor_{index}")
                        for index, variable in enumerate(self.variables_pulled)]

    def penalty(self) -> tf.Tensor:
        """s/2 x the squared distance to the anchors, over the shared weights (float32)."""
        total = tf.constant(0.0, tf.float32)
        for variable, anchor, rows in zip(self.variables_pulled, self.anchors, self.shared_rows):
            difference = tf.cast(tf.convert_to_tensor(variable) - anchor, tf.float32)
            if rows is not None:
                axis, count = rows
                difference = difference[(slice(None),) * axis + (slice(0, count),)]
            total += tf.reduce_sum(tf.square(difference))
        return 0.5 * self.strength * total
