"""Matrix products over the last axis of tensors of any rank."""

from __future__ import annotations

import tensorflow as tf


def apply_kernel(x, kernel):
    """x @ kernel over the last axis: [..., d] x [d, k] -> [..., k].

    Teacher forcing applies the same kernels to [B, T, d] sequences that decoding
    applies to [B, d] steps; rank-2 inputs keep the plain matmul, the fastest path.
    """
    return tf.matmul(x, kernel) if x.shape.rank == 2 else tf.tensordot(x, kernel, axes=1)
