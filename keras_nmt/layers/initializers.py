"""The paper's initialisation (Appendix B.1) as Keras initializers."""

from __future__ import annotations

import keras
import numpy as np


@keras.saving.register_keras_serializable(package="keras_nmt")
class BlockOrthogonal(keras.initializers.Initializer):
    """Square random orthogonal blocks side by side: shape (n, k * n).

    Recurrent matrices of the three GRU gates are fused into one (n, 3n) kernel for
    speed; the paper initialises each gate's n x n matrix orthogonally, which a plain
    orthogonal initializer on the fused shape would not do.
    """

    def __init__(self, seed: int | None = None):
        self.seed = seed

    def __call__(self, shape, dtype=None):
        rows, cols = shape
        if cols % rows:
            raise ValueError(f"BlockOrthogonal needs a (n, k*n) shape, got {shape}")
        # Draw through Keras so keras.utils.set_random_seed makes runs reproducible.
        gaussians = keras.ops.convert_to_numpy(
            keras.random.normal((cols // rows, rows, rows), seed=self.seed)
        ).astype(np.float64)
        blocks = []
        for gaussian in gaussians:
            q, r = np.linalg.qr(gaussian)
            blocks.append(q * np.sign(np.diag(r)))  # sign fix: uniform over O(n)
        return keras.ops.convert_to_tensor(np.concatenate(blocks, axis=1), dtype=dtype or "float32")

    def get_config(self):
        return {"seed": self.seed}


def weight(seed: int | None = None) -> keras.initializers.Initializer:
    """Non-recurrent weight matrices: N(0, 0.01^2)."""
    return keras.initializers.RandomNormal(stddev=0.01, seed=seed)


def alignment_weight(seed: int | None = None) -> keras.initializers.Initializer:
    """W_a and U_a of the alignment model: N(0, 0.001^2)."""
    return keras.initializers.RandomNormal(stddev=0.001, seed=seed)


def recurrent(seed: int | None = None) -> keras.initializers.Initializer:
    return BlockOrthogonal(seed=seed)
