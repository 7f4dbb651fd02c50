"""The paper's initialisation (Appendix B.1) as Keras initializers."""

from __future__ import annotations

import keras
import numpy as np

from keras_nmt.core.config import INITS


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


# The schemes are Config.init's (config.INITS): "paper", Appendix B.1, tuned for
# Adadelta; "uniform", every weight matrix U(-0.1, 0.1), as JoeyNMT's small-corpus
# recipes do with Adam. Biases and v_a stay zero in both.
SCHEMES = INITS
UNIFORM_LIMIT = 0.1


def check_scheme(scheme: str) -> str:
    if scheme not in SCHEMES:
        raise ValueError(f"init must be one of {', '.join(SCHEMES)}, got {scheme!r}")
    return scheme


def _uniform(seed: int | None) -> keras.initializers.Initializer:
    return keras.initializers.RandomUniform(-UNIFORM_LIMIT, UNIFORM_LIMIT, seed=seed)


def weight(scheme: str = "paper", seed: int | None = None) -> keras.initializers.Initializer:
    """Non-recurrent weight matrices: N(0, 0.01^2) in the paper's scheme."""
    if check_scheme(scheme) == "uniform":
        return _uniform(seed)
    return keras.initializers.RandomNormal(stddev=0.01, seed=seed)


def alignment_weight(scheme: str = "paper",
                     seed: int | None = None) -> keras.initializers.Initializer:
    """W_a and U_a of the alignment model: N(0, 0.001^2) in the paper's scheme."""
    if check_scheme(scheme) == "uniform":
        return _uniform(seed)
    return keras.initializers.RandomNormal(stddev=0.001, seed=seed)


def recurrent(scheme: str = "paper", seed: int | None = None) -> keras.initializers.Initializer:
    """Recurrent matrices: each gate's block orthogonal in the paper's scheme."""
    if check_scheme(scheme) == "uniform":
        return _uniform(seed)
    return BlockOrthogonal(seed=seed)
