"""Data-parallel training gives the single-device update, in every cell of strategy x
precision x optimizer x sampled softmax (the Adam cells with label smoothing; a third of
the cells with tied embeddings):
MirroredStrategy over two logical CPU devices,
and MultiWorkerMirroredStrategy with two worker processes on 127.0.0.1, against the
default path on the same global batches, after 1 and after 3 updates
(tests/distributed_run.py runs the cells of one strategy in one process; the session
starts those processes in the background with its first test, see conftest.py). The
default run takes 9 of the 18 cells of precision x optimizer x sampled softmax under
MirroredStrategy and 3 of those under MultiWorkerMirroredStrategy, chosen so that every
pair of values of any two of the five axes (strategy and tied embeddings included) is
among them; ``-m slow``
adds the other 24 (cell, strategy) pairs.

The measure is the relative error of the distributed weight change against the single
one, |dW_distributed - dW_single| / |dW_single|. The updates are the same sums in
another order (each replica sums its rows, then the all-reduce adds the replicas), so
they differ by rounding in the compute dtype, carried through the optimizer. Measured
on a 2-core AMD EPYC (largest of the 18 cells, after 1 / 3 updates): float32 1.3e-7,
mixed_float16 1.0e-3, mixed_bfloat16 3.1e-2 (Adam with the sampled softmax: Adam divides
each gradient value by its own size, so bfloat16's rounding of small ones shows). A
doubled update (each replica's copy of
the all-reduced gradient summed again) gives 1.0 with SGD; with Adam and Adadelta, which
are nearly scale-invariant, 0.05-0.1 after 3 updates.
"""

import itertools

import numpy as np
import pytest

from distributed_run import OPTIMIZERS, PRECISIONS, cells, multiworker_cells, pairwise_cells

TOLERANCE = {"float32": 1e-5, "mixed_float16": 5e-3, "mixed_bfloat16": 6e-2}
PAIRWISE = pairwise_cells()
MULTIWORKER = multiworker_cells()
# (cell, strategy) of the default run, and of the slow tests.
DEFAULT_RUN = [(cell, "mirrored") for cell in PAIRWISE] + [(c, "multiworker") for c in MULTIWORKER]
OTHERS = [(cell, strategy) for cell, _ in cells() for strategy in ("mirrored", "multiworker")
          if (cell, strategy) not in DEFAULT_RUN]


def snapshots(path):
    with np.load(path) as saved:
        count = sum(key.startswith("initial_") for key in saved.files)
        weights = {stage: [saved[f"{stage}_{i}"] for i in range(count)]
                   for stage in ("initial", "after1", "after3")}
        return int(saved["replicas"]), weights


def change(weights, stage):
    return np.concatenate([(a - b).ravel() for a, b in zip(weights[stage], weights["initial"])])


def assert_single_device_update(matrix, strategy, cell):
    tolerance = TOLERANCE[cell.split("-")[0]]
    replicas, single = snapshots(matrix["default"] / f"{cell}.npz")
    assert replicas == 1
    replicas, distributed = snapshots(matrix[strategy] / f"{cell}.npz")
    assert replicas == 2
    for a, b in zip(single["initial"], distributed["initial"]):
        np.testing.assert_array_equal(a, b)  # the same initial weights
    for stage in ("after1", "after3"):
        expected, got = change(single, stage), change(distributed, stage)
        assert np.linalg.norm(expected) > 1e-2  # training moved the weights
        error = float(np.linalg.norm(got - expected) / np.linalg.norm(expected))
        assert error < tolerance, (stage, error, float(got @ expected / (expected @ expected)))


@pytest.mark.parametrize("cell, strategy", DEFAULT_RUN)
def test_the_update_is_the_single_device_one(distributed_matrix, strategy, cell):
    assert_single_device_update(distributed_matrix, strategy, cell)


@pytest.mark.slow
@pytest.mark.parametrize("cell, strategy", OTHERS)
def test_the_other_cells_too(distributed_other_cells, strategy, cell):
    assert_single_device_update(distributed_other_cells, strategy, cell)


def test_the_default_run_holds_every_pair_of_values():
    """Of any two of the axes strategy, precision, optimizer, sampled softmax and tied
    embeddings, every pair of values is in the default run; the slow tests run the rest
    of the matrix."""
    assert len(PAIRWISE) == 9 and len(MULTIWORKER) == 3 and set(MULTIWORKER) <= set(PAIRWISE)
    assert len(DEFAULT_RUN) + len(OTHERS) == 2 * 18
    rows = [(strategy, *cell.split("-")) for cell, strategy in DEFAULT_RUN]
    values = [("mirrored", "multiworker"), PRECISIONS, tuple(OPTIMIZERS), ("full", "sampled"),
              ("tied", "untied")]
    for a, b in itertools.combinations(range(5), 2):
        assert {(row[a], row[b]) for row in rows} == set(itertools.product(values[a], values[b]))


def test_only_the_chief_writes(distributed_matrix):
    # Worker 1 saved nothing of its own, the run holds one checkpoint directory, and
    # worker 1's throw-away directory is gone.
    worker_1 = distributed_matrix["worker-1"]
    assert not worker_1.exists() or not any(worker_1.iterdir())
    run = distributed_matrix["run-multiworker"] / MULTIWORKER[0]
    assert sorted(p.name for p in (run / "checkpoints").iterdir() if p.name.startswith("ckpt-3"))
    assert sorted(p.name for p in run.iterdir()) == ["checkpoints", "tensorboard"]


@pytest.mark.parametrize("args, env, expected", [
    (["--strategy", "multiworker"], {"TF_CONFIG": ""}, "--strategy multiworker needs TF_CONFIG"),
    (["--strategy", "mirrored", "--jit"], {}, "--jit works with --strategy default only"),
    (["--strategy", "ring"], {}, "argument --strategy: invalid choice: 'ring'"),
    (["--precision", "float8"], {}, "argument --precision: invalid choice: 'float8'"),
])
def test_bad_strategy_options_fail_in_one_line(cli_runner, tmp_path, args, env, expected):
    result = cli_runner("train", "--out", tmp_path / "run", *args, env=env, prog="train.py")
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("train.py: error: ") and expected in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "run").exists()
