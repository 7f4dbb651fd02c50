"""Data-parallel training gives the single-device update: MirroredStrategy over two
logical CPU devices, and MultiWorkerMirroredStrategy with two worker processes on
127.0.0.1, against the default path on the same global batches (tests/distributed_run.py).

Tolerance: absolute 1e-5 on parameters of magnitude ~1 after 3 SGD steps. The updates
are the same sums in float32, only in another order (each replica sums its rows, then
the all-reduce adds the replicas), so parameters differ by a few float32 rounding errors
(~1e-7 relative per step); counting the same gradient twice, or clipping per replica
instead of after the all-reduce, moves them by ~1e-1.
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

ROOT = Path(__file__).resolve().parents[1]
HELPER = Path(__file__).with_name("distributed_run.py")
TOLERANCE = 1e-5
TIMEOUT = 240


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(strategy, out, run_dir, logical_cpus=1, tf_config=None):
    env = child_env()
    if tf_config:
        env["TF_CONFIG"] = json.dumps(tf_config)
    return subprocess.Popen(
        [sys.executable, str(HELPER), strategy, str(out), str(run_dir), str(logical_cpus)],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


def finish(process):
    try:
        output, _ = process.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGKILL)
        output, _ = process.communicate()
        pytest.fail(f"timed out:\n{output[-3000:]}")
    assert process.returncode == 0, output[-3000:]


def parameters(path):
    with np.load(path) as saved:
        weights = [saved[k] for k in saved.files if k not in ("replicas", "moved")]
        return int(saved["replicas"]), float(saved["moved"]), weights


def test_mirrored_and_multiworker_match_the_single_device_run(tmp_path):
    ports = [free_port(), free_port()]
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    # All four processes at once: the two workers wait for each other anyway.
    processes = [
        start("default", tmp_path / "default.npz", tmp_path / "run-default"),
        start("mirrored", tmp_path / "mirrored.npz", tmp_path / "run-mirrored", logical_cpus=2),
    ] + [
        start("multiworker", tmp_path / f"multiworker-{index}.npz", tmp_path / "run-multiworker",
              tf_config={"cluster": cluster, "task": {"type": "worker", "index": index}})
        for index in range(2)
    ]
    for process in processes:
        finish(process)

    replicas, moved, single = parameters(tmp_path / "default.npz")
    assert replicas == 1
    assert moved > 1000 * TOLERANCE  # training moved the parameters well beyond it
    for name in ("mirrored", "multiworker-0"):
        replicas, _, distributed = parameters(tmp_path / f"{name}.npz")
        assert replicas == 2, name
        assert len(distributed) == len(single)
        difference = max(float(np.abs(a - b).max()) for a, b in zip(single, distributed))
        assert difference < TOLERANCE, (name, difference)
    # Only the chief wrote: worker 1 saved nothing of its own, the run holds one
    # checkpoint directory, and worker 1's throw-away directory is gone.
    assert not (tmp_path / "multiworker-1.npz").exists()
    checkpoints = tmp_path / "run-multiworker" / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir() if p.name.startswith("ckpt-3"))
    assert sorted(p.name for p in (tmp_path / "run-multiworker").iterdir()) == ["checkpoints", "tensorboard"]


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
