"""Helper process for tests/test_distributed.py (not a test module): for every cell of
the matrix precision x optimizer x sampled softmax (a third of them with tied
embeddings), trains a tiny model for a few
updates on fixed global batches with one strategy, and saves its parameters before the
first update, after the first and after the last.

    python tests/distributed_run.py STRATEGY OUT_DIR RUN_DIR [LOGICAL_CPUS [CELL,CELL...]]

Logical CPU devices must be configured before TensorFlow initialises its devices,
hence a fresh process; one process runs every cell, so TensorFlow starts once. For
``multiworker``, TF_CONFIG comes from the environment.

:func:`run_matrix` starts the processes of every strategy and waits for them (the test
session starts it in the background as soon as the tests are collected, see
conftest.py). Importing this module loads no TensorFlow.
"""

import itertools
import json
import pathlib
import signal
import socket
import subprocess
import sys

import numpy as np

from support import ROOT, child_env

STEPS = 3
BATCH = 8  # the global batch, split between the replicas
VOCAB = 80
WIDTH = 8  # the longest sentence (7 tokens) and its EOS
WORDS = 40  # the batches use ids 4..39: each replica's rows hold words the other's lack
# Smaller than support.TINY_SETTINGS, with the vocabulary and lengths the fixed batches
# below need, and no evaluation or checkpoint within the few updates.
FIXED_BATCH_SETTINGS = {
    "embedding": 8, "hidden": 8, "attention": 8, "maxout": 4, "src_vocab_size": VOCAB,
    "tgt_vocab_size": VOCAB, "batch_size": BATCH, "max_len": 8, "eval_every": 100,
    "checkpoint_every": 100,
}
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
# Learning rates large enough for a few updates to move every parameter well past the
# tolerances, small enough to stay finite.
OPTIMIZERS = {"sgd": 0.5, "adam": 0.01, "adadelta": 1.0}
SAMPLED = (0, 73)  # the fewest that max_len 8 allows: the batch's words and ~60 drawn ones


# The Adam cells train as the budget recipe does, with a smoothed loss: every precision,
# both softmaxes and both strategies then meet it in the default run.
LABEL_SMOOTHING = {"adam": 0.1}


def _tied(precision: str, optimizer: str) -> bool:
    """Whether the cells of ``precision`` x ``optimizer`` tie the embeddings: a Latin
    square (3 of the 9 pairs) that the pairwise cells meet with and without the sampled
    softmax, and the MultiWorkerMirroredStrategy cells once."""
    return (list(OPTIMIZERS).index(optimizer) - PRECISIONS.index(precision)) % 3 == 1


def cell_name(precision: str, optimizer: str, sampled: bool) -> str:
    return (f"{precision}-{optimizer}-{'sampled' if sampled else 'full'}-"
            f"{'tied' if _tied(precision, optimizer) else 'untied'}")


def cells():
    """(name, settings) of every cell of the matrix."""
    for precision, optimizer, sampled in itertools.product(PRECISIONS, OPTIMIZERS, SAMPLED):
        yield cell_name(precision, optimizer, bool(sampled)), {
            **FIXED_BATCH_SETTINGS, "precision": precision, "optimizer": optimizer,
            "learning_rate": OPTIMIZERS[optimizer], "sampled_softmax": sampled,
            "label_smoothing": LABEL_SMOOTHING.get(optimizer, 0.0),
            "tie_embeddings": _tied(precision, optimizer)}


def pairwise_cells() -> list[str]:
    """9 of the 18 cells that hold every pair of values of two axes: each precision with
    each optimizer, and each of them with and without the sampled softmax (the softmax
    alternates along precision x optimizer like a chequerboard). The tests run these
    under MirroredStrategy by default (3 of them under MultiWorkerMirroredStrategy too,
    :func:`multiworker_cells`), and the other 9 under the marker ``slow``."""
    return [cell_name(precision, optimizer, bool((i + j) % 2))
            for i, precision in enumerate(PRECISIONS) for j, optimizer in enumerate(OPTIMIZERS)]


def multiworker_cells() -> list[str]:
    """3 of the pairwise cells: each precision, each optimizer, with and without the
    sampled softmax (a Latin square of precision x optimizer). Run under
    MultiWorkerMirroredStrategy by default, beside the 9 pairwise cells under
    MirroredStrategy, they make the default run hold every pair of values of any two of
    the four axes strategy, precision, optimizer, sampled softmax; ``slow`` runs the
    other 15 under MultiWorkerMirroredStrategy."""
    pairwise = pairwise_cells()
    return [pairwise[3 * precision + optimizer] for precision, optimizer in ((0, 0), (1, 2), (2, 1))]


def global_batches():
    """Three fixed batches of sentences of different lengths, repeated, padded to one
    width (a tf.data.Dataset): one shape, so the step is traced once per cell."""
    import tensorflow as tf

    rng = np.random.default_rng(0)
    batches = []
    for length in (5, 7, 4):
        lengths = rng.integers(1, length + 1, size=BATCH)
        lengths[0] = length

        def ids(lengths=lengths, length=length):
            values = rng.integers(4, WORDS, size=(BATCH, WIDTH)).astype("int32")
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
    import tensorflow as tf

    if logical_cpus > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * logical_cpus
        )
    # Grappler rewrites each new graph before its first run, about 3 s a cell here; the
    # comparison is between strategies, each process running the same unoptimized ops.
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
    import keras

    from keras_nmt.core import distribute
    from keras_nmt.core.config import variant_config
    from keras_nmt.models.rnnsearch import TranslationModel
    from keras_nmt.rundir.run_directory import RunDir
    from keras_nmt.training import TrainingBudget, Trainer

    strategy = distribute.make_strategy(strategy_name)
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    only = set(sys.argv[5].split(",")) if len(sys.argv) > 5 else None
    for name, settings in cells():
        if only and name not in only:
            continue
        keras.utils.set_random_seed(0)
        config = variant_config("search50", settings)
        with distribute.scope(strategy):
            model = TranslationModel(config)
        trainer = Trainer(config, model, RunDir(pathlib.Path(run_dir, name)), global_batches(),
                          lambda: global_batches().take(1), train_pairs=BATCH, strategy=strategy)
        snapshots = {"initial": [w.numpy() for w in model.trainable_weights]}
        for steps in (1, STEPS):
            trainer.fit(TrainingBudget(max_steps=steps))
            snapshots[f"after{steps}"] = [w.numpy() for w in model.trainable_weights]
        if trainer.is_chief:
            np.savez(out / f"{name}.npz",
                     replicas=strategy.num_replicas_in_sync if strategy else 1,
                     **{f"{key}_{i}": w for key, weights in snapshots.items()
                        for i, w in enumerate(weights)})


# A bound on a hang, not on the work: the matrix starts with the suite at a low priority
# and gets the CPU the test processes leave (little, with one a core; under coverage.py's
# tracing a process took past 10 minutes).
TIMEOUT = 1800
PORT_TAKEN = ("Address already in use", "Could not start gRPC server")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(strategy, out, run_dir, chosen, logical_cpus=1, tf_config=None, env=None,
          launch=subprocess.Popen):
    """The helper process for the ``chosen`` cells, its output going to OUT.log: a pipe
    that nobody reads while the caller waits for another process would fill up and
    block it."""
    env = dict(env or child_env())
    if tf_config:
        env["TF_CONFIG"] = json.dumps(tf_config)
    log = pathlib.Path(f"{out}.log")
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as output:
        process = launch(
            [sys.executable, str(pathlib.Path(__file__)), strategy, str(out), str(run_dir),
             str(logical_cpus), ",".join(chosen)],
            env=env, cwd=ROOT, stdout=output, stderr=subprocess.STDOUT,
        )
    process.log = log
    return process


def finish(process) -> tuple[int, str]:
    try:
        process.wait(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGKILL)
        process.wait()
        raise AssertionError(f"timed out:\n{process.log.read_text()[-3000:]}") from None
    return process.returncode, process.log.read_text()


def start_workers(out, run_dir, chosen, env=None, launch=subprocess.Popen):
    # The ports are free when chosen, but another process may take one before the
    # worker binds it (TF's gRPC server refuses to share a port): such a start is
    # retried with new ports.
    cluster = {"worker": [f"127.0.0.1:{free_port()}" for _ in range(2)]}
    return [start("multiworker", out / f"worker-{index}", run_dir, chosen, env=env, launch=launch,
                  tf_config={"cluster": cluster, "task": {"type": "worker", "index": index}})
            for index in range(2)]


def run_matrix(tmp, mirrored, multiworker, env=None, launch=subprocess.Popen):
    """The ``mirrored`` cells under MirroredStrategy, the ``multiworker`` ones under
    MultiWorkerMirroredStrategy and both under the default strategy: {strategy: out_dir}.
    All four processes run at once: the two workers wait for each other anyway. ``env``:
    the processes' environment (default :func:`support.child_env`); ``launch``: what
    starts them (a background job's, see support.Background)."""
    both = [name for name, _ in cells() if name in {*mirrored, *multiworker}]
    single = start("default", tmp / "default", tmp / "run-default", both, env=env, launch=launch)
    mirrored_process = start("mirrored", tmp / "mirrored", tmp / "run-mirrored", mirrored,
                             logical_cpus=2, env=env, launch=launch)
    for attempt in range(3):
        workers = start_workers(tmp / f"multiworker-{attempt}",
                                tmp / f"run-multiworker-{attempt}", multiworker, env=env,
                                launch=launch)
        results = [finish(worker) for worker in workers]
        if not any(code and any(text in output for text in PORT_TAKEN) for code, output in results):
            break
    for code, output in [finish(single), finish(mirrored_process), *results]:
        assert code == 0, output[-3000:]
    return {"default": tmp / "default", "mirrored": tmp / "mirrored",
            "multiworker": tmp / f"multiworker-{attempt}" / "worker-0",
            "worker-1": tmp / f"multiworker-{attempt}" / "worker-1",
            "run-multiworker": tmp / f"run-multiworker-{attempt}"}


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 1)
