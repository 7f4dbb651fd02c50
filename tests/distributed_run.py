"""Helper process for tests/test_distributed.py (not a test module): trains a tiny model
for a few steps on fixed global batches with a strategy and saves its parameters.

    python tests/distributed_run.py STRATEGY OUT.npz RUN_DIR [LOGICAL_CPUS]

Logical CPU devices must be configured before TensorFlow initialises its devices,
hence a fresh process. For ``multiworker``, TF_CONFIG comes from the environment.
"""

import sys

import numpy as np
import tensorflow as tf

STEPS = 3
BATCH = 8  # the global batch, split between the replicas
TINY = {"embedding": 8, "hidden": 8, "attention": 8, "maxout": 4, "src_vocab_size": 12,
        "tgt_vocab_size": 12, "batch_size": BATCH, "eval_every": 100, "checkpoint_every": 100,
        "optimizer": "sgd", "learning_rate": 0.5}


def global_batches() -> tf.data.Dataset:
    """Three fixed padded batches of different shapes, repeated."""
    rng = np.random.default_rng(0)
    batches = []
    for length in (5, 7, 4):
        lengths = rng.integers(1, length + 1, size=BATCH)
        lengths[0] = length

        def ids(lengths=lengths, length=length):
            values = rng.integers(4, 12, size=(BATCH, length + 1)).astype("int32")
            for row, n in enumerate(lengths):
                values[row, n] = 3  # EOS
                values[row, n + 1:] = 0
            return values

        source, target = ids(), ids()
        target_in = np.concatenate([np.full((BATCH, 1), 2, "int32"), target[:, :-1]], axis=1)
        target_in[target_in == 3] = 0  # EOS is not a decoder input; padding after it
        batches.append(((source, target_in), target))
    dataset = tf.data.Dataset.from_tensors(batches[0])
    for batch in batches[1:]:
        dataset = dataset.concatenate(tf.data.Dataset.from_tensors(batch))
    return dataset.repeat()


def main(strategy_name: str, out: str, run_dir: str, logical_cpus: int = 1) -> None:
    if logical_cpus > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * logical_cpus
        )
    import keras

    from keras_nmt import distribute
    from keras_nmt.config import variant_config
    from keras_nmt.models import TranslationModel
    from keras_nmt.rundir import RunDir
    from keras_nmt.training import Limits, Trainer

    strategy = distribute.make_strategy(strategy_name)
    keras.utils.set_random_seed(0)
    config = variant_config("search50", TINY)
    with distribute.scope(strategy):
        model = TranslationModel(config)
    trainer = Trainer(config, model, RunDir(run_dir), global_batches(),
                      lambda: global_batches().take(1), train_pairs=BATCH, strategy=strategy)
    initial = [w.numpy() for w in model.trainable_weights]
    trainer.fit(Limits(max_steps=STEPS))
    if trainer.is_chief:
        final = [w.numpy() for w in model.trainable_weights]
        moved = max(float(np.abs(a - b).max()) for a, b in zip(initial, final))
        np.savez(out, *final, replicas=strategy.num_replicas_in_sync if strategy else 1,
                 moved=moved)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 1)
