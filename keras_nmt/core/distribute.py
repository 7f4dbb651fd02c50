"""Data-parallel training: which tf.distribute strategy, who is the chief, which rows
of a global batch each replica trains on.

``train.py --strategy``:

- ``default``: no strategy at all, the plain single-device path (no scope, no
  cross-replica machinery, so it is exactly as fast as before);
- ``mirrored``: tf.distribute.MirroredStrategy over this machine's GPUs, or, without
  GPUs, over its logical CPU devices;
- ``multiworker``: tf.distribute.MultiWorkerMirroredStrategy over the machines that
  the TF_CONFIG environment variable lists (every machine runs the same command).

The input pipeline is not a tf.distribute distributed dataset: distributed iterators
cannot be checkpointed in TF 2.21 (``DistributedIterator`` is not trackable), and the
checkpoint must hold the data position so that ``--resume`` continues with the next
batch. Every worker runs the same, seeded pipeline of *global* batches
(``config.batch_size`` sentences) with a plain, checkpointable iterator, and each
replica takes its own contiguous rows of each global batch (:func:`replica_rows`).
"""

from __future__ import annotations

import contextlib
import json
import os

from keras_nmt.core.errors import StrategyError

STRATEGIES = ("default", "mirrored", "multiworker")


def check(name: str) -> None:
    """Fail early, before TensorFlow loads, on a strategy that cannot be set up."""
    if name not in STRATEGIES:
        raise StrategyError(f"unknown strategy {name!r}; choose one of: {', '.join(STRATEGIES)}")
    if name == "multiworker":
        try:
            cluster = json.loads(os.environ.get("TF_CONFIG", "")).get("cluster", {})
        except (json.JSONDecodeError, AttributeError):
            cluster = {}
        if not cluster:
            raise StrategyError(
                "--strategy multiworker needs TF_CONFIG, e.g. "
                '{"cluster": {"worker": ["host1:12345", "host2:12345"]}, '
                '"task": {"type": "worker", "index": 0}}'
            )


def make_strategy(name: str):
    """The tf.distribute.Strategy for ``--strategy NAME`` (None for ``default``). Must
    run before TensorFlow has executed anything: multi-worker collectives are set up
    at start."""
    import tensorflow as tf

    check(name)
    if name == "default":
        return None
    if name == "mirrored":
        devices = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
        return tf.distribute.MirroredStrategy([device.name for device in devices])
    return tf.distribute.MultiWorkerMirroredStrategy()


def scope(strategy):
    """``strategy.scope()``, or nothing at all for the default path."""
    return strategy.scope() if strategy is not None else contextlib.nullcontext()


def is_chief(strategy) -> bool:
    """Whether this process writes checkpoints, summaries and the report: the only
    process, the "chief" task, or worker 0 of a cluster without a chief."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    if resolver.task_type == "chief":
        return True
    jobs = resolver.cluster_spec().as_dict()
    return resolver.task_type == "worker" and resolver.task_id == 0 and "chief" not in jobs


def is_multiworker(strategy) -> bool:
    import tensorflow as tf

    return isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)


def replica_rows(batch, replica_id, replicas):
    """Replica ``replica_id``'s contiguous rows of every tensor in ``batch``: sizes
    differ by at most one row when the batch does not divide evenly."""
    import tensorflow as tf

    rows = tf.shape(tf.nest.flatten(batch)[0])[0]
    start = rows * replica_id // replicas
    end = rows * (replica_id + 1) // replicas
    return tf.nest.map_structure(lambda tensor: tensor[start:end], batch)


def barrier(strategy) -> None:
    """Wait until every worker gets here (multi-worker only): workers that finished
    training wait for the chief's report, so that none exits while the others still
    use the cluster."""
    if not is_multiworker(strategy):
        return
    import tensorflow as tf

    ones = strategy.experimental_distribute_values_from_function(lambda _: tf.constant(1))
    strategy.reduce(tf.distribute.ReduceOp.SUM, ones, axis=None)
