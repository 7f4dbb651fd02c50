"""Data-parallel training gives the single-device update, in every cell of strategy x
precision x optimizer x sampled softmax: MirroredStrategy over two logical CPU devices,
and MultiWorkerMirroredStrategy with two worker processes on 127.0.0.1, against the
default path on the same global batches, after 1 and after 3 updates
(tests/distributed_run.py runs the cells of one strategy in one process). The default run
takes 9 of the 18 cells of precision x optimizer x sampled softmax, chosen so that every
pair of values of two axes is among them, under both strategies; ``-m slow`` adds the
other 9.

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

import json
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from child_env import child_env

sys.path.insert(0, str(Path(__file__).parent))
from distributed_run import cells, pairwise_cells  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
HELPER = Path(__file__).with_name("distributed_run.py")
TOLERANCE = {"float32": 1e-5, "mixed_float16": 5e-3, "mixed_bfloat16": 6e-2}
TIMEOUT = 600
PAIRWISE = pairwise_cells()
OTHER_CELLS = [name for name, _ in cells() if name not in PAIRWISE]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(strategy, out, run_dir, chosen, logical_cpus=1, tf_config=None):
    """The helper process for the ``chosen`` cells, its output going to OUT.log: a pipe
    that nobody reads while the test waits for another process would fill up and block
    it."""
    env = child_env()
    if tf_config:
        env["TF_CONFIG"] = json.dumps(tf_config)
    log = Path(f"{out}.log")
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as output:
        process = subprocess.Popen(
            [sys.executable, str(HELPER), strategy, str(out), str(run_dir), str(logical_cpus),
             ",".join(chosen)],
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
        pytest.fail(f"timed out:\n{process.log.read_text()[-3000:]}")
    return process.returncode, process.log.read_text()


def start_workers(out, run_dir, chosen):
    # The ports are free when chosen, but another process may take one before the
    # worker binds it (TF's gRPC server refuses to share a port): such a start is
    # retried with new ports.
    cluster = {"worker": [f"127.0.0.1:{free_port()}" for _ in range(2)]}
    return [start("multiworker", out / f"worker-{index}", run_dir, chosen,
                  tf_config={"cluster": cluster, "task": {"type": "worker", "index": index}})
            for index in range(2)]


PORT_TAKEN = ("Address already in use", "Could not start gRPC server")


def run_matrix(tmp, chosen):
    """The ``chosen`` cells under each strategy: {strategy: out_dir}. All four processes
    run at once: the two workers wait for each other anyway."""
    single = start("default", tmp / "default", tmp / "run-default", chosen)
    mirrored = start("mirrored", tmp / "mirrored", tmp / "run-mirrored", chosen, logical_cpus=2)
    for attempt in range(3):
        workers = start_workers(tmp / f"multiworker-{attempt}", tmp / f"run-multiworker-{attempt}",
                                chosen)
        results = [finish(worker) for worker in workers]
        if not any(code and any(text in output for text in PORT_TAKEN) for code, output in results):
            break
    for code, output in [finish(single), finish(mirrored), *results]:
        assert code == 0, output[-3000:]
    return {"default": tmp / "default", "mirrored": tmp / "mirrored",
            "multiworker": tmp / f"multiworker-{attempt}" / "worker-0",
            "worker-1": tmp / f"multiworker-{attempt}" / "worker-1",
            "run-multiworker": tmp / f"run-multiworker-{attempt}"}


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    return run_matrix(tmp_path_factory.mktemp("distributed"), PAIRWISE)


@pytest.fixture(scope="module")
def other_cells(tmp_path_factory):
    return run_matrix(tmp_path_factory.mktemp("distributed-other"), OTHER_CELLS)


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


@pytest.mark.parametrize("strategy", ["mirrored", "multiworker"])
@pytest.mark.parametrize("cell", PAIRWISE)
def test_the_update_is_the_single_device_one(matrix, strategy, cell):
    assert_single_device_update(matrix, strategy, cell)


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["mirrored", "multiworker"])
@pytest.mark.parametrize("cell", OTHER_CELLS)
def test_the_other_cells_too(other_cells, strategy, cell):
    assert_single_device_update(other_cells, strategy, cell)


def test_the_pairwise_cells_hold_every_pair_of_values():
    from distributed_run import OPTIMIZERS, PRECISIONS

    assert len(PAIRWISE) == 9 and len(OTHER_CELLS) == 9
    split = [name.split("-") for name in PAIRWISE]
    for precision in PRECISIONS:
        assert {o for p, o, _ in split if p == precision} == set(OPTIMIZERS)
        assert {s for p, _, s in split if p == precision} == {"full", "sampled"}
    for optimizer in OPTIMIZERS:
        assert {s for _, o, s in split if o == optimizer} == {"full", "sampled"}


def test_only_the_chief_writes(matrix):
    # Worker 1 saved nothing of its own, the run holds one checkpoint directory, and
    # worker 1's throw-away directory is gone.
    assert not matrix["worker-1"].exists() or not any(matrix["worker-1"].iterdir())
    run = matrix["run-multiworker"] / PAIRWISE[0]
    assert sorted(p.name for p in (run / "checkpoints").iterdir() if p.name.startswith("ckpt-3"))
    assert sorted(p.name for p in run.iterdir()) == ["checkpoints", "tensorboard"]


@pytest.mark.parametrize("args, env, expected", [
    (["--strategy", "multiworker"], {"TF_CONFIG": ""}, "--strategy multiworker needs TF_CONFIG"),
    (["--strategy", "mirrored", "--jit"], {}, "--jit works with --strategy default only"),
    (["--strategy", "ring"], {}, "argument --strategy: invalid choice: 'ring'"),
    (["--precision", "float8"], {}, "argument --precision: invalid choice: 'float8'"),
])
def test_bad_strategy_options_fail_in_one_line(tmp_path, args, env, expected):
    result = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), "--out", str(tmp_path / "run"), *args],
        env=child_env(**env), cwd=ROOT,
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("train.py: error: ") and expected in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "run").exists()
