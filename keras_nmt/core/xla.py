"""When a run's training step and beam search are compiled with XLA (``--jit``), and the
batch shapes that compilation needs."""

from __future__ import annotations

from keras_nmt.core.config import JIT_LENGTH_MULTIPLE, Config


def use_jit(jit: bool | None, strategy: str, batch_tokens: int = 0) -> bool:
    """``--jit``'s default: on with a GPU, the default strategy and a fixed batch size (a
    token budget would give XLA a new shape almost every step), off otherwise. On an H100
    XLA gave 4.6x the target tokens/s of the same batches without it; on a 2-core CPU,
    0.78-0.80x (docs/benchmarks.md, docs/training.md)."""
    if jit is not None:
        return jit
    import tensorflow as tf

    return (strategy == "default" and not batch_tokens
            and bool(tf.config.list_physical_devices("GPU")))


def bounded_shapes(config: Config) -> Config:
    """``config`` for a compiled run: XLA compiles once per batch shape, so sentence
    batches are padded to a multiple of JIT_LENGTH_MULTIPLE unless the config already
    bounds them. Not stored in config.json, so the same run resumes with or without
    --jit."""
    if config.length_multiple or config.batch_tokens:
        return config
    return config.replace(length_multiple=JIT_LENGTH_MULTIPLE)
