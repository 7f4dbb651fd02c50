"""Crash safety: SIGKILL at named points (the KERAS_NMT_TEST_HOOK test hook, see
keras_nmt/faults.py), a torn checkpoint, a full disk, a diverging loss. Every time,
``--resume`` must find a complete checkpoint and the run must finish."""

import json
import math
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import tensorflow as tf

from keras_nmt.faults import HOOK_ENV
from keras_nmt.checkpoints import checkpoint_problem

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--set", "embedding=8", "--set", "hidden=8", "--set", "attention=8", "--set", "maxout=4",
        "--set", "batch_size=16", "--set", "beam_size=2", "--set", "shuffle_buffer=100",
        "--set", "checkpoint_every=2", "--set", "eval_every=3", "--quiet"]
STEPS = 12


def train(out, *extra, hook=None, resume=False, corpus=None):
    env = {key: value for key, value in os.environ.items() if key != HOOK_ENV}
    if hook:
        env[HOOK_ENV] = hook
    args = ["--variant", "search30", "--out", str(out), "--max-steps", str(STEPS), *TINY, *extra]
    args += ["--resume"] if resume else ["--data", str(corpus)]
    # Not --quiet about where it resumed: the test reads it from the log (stderr).
    args.remove("--quiet")
    return subprocess.run([sys.executable, str(ROOT / "train.py"), *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def named_checkpoints(out: Path) -> list[str]:
    state = tf.train.get_checkpoint_state(str(out / "checkpoints"))
    return list(state.all_model_checkpoint_paths) if state else []


def resumed_step(result) -> int:
    return int(re.search(r"resumed at step (\d+)", result.stderr).group(1))


def assert_checkpoints_complete(out: Path) -> None:
    """Every checkpoint the state file names reads back intact; nothing else is there
    but the state file (a left-over from a killed save is removed on resume)."""
    for path in named_checkpoints(out):
        assert checkpoint_problem(path) is None, path


# (hook, how the process ends, the step the next --resume must start from). The run
# checkpoints every 2 steps and evaluates every 3; a step is a count of updates done.
KILLED = -signal.SIGKILL
ALL_FAILURES = [
    ("step@3", KILLED, 2),                      # between checkpoints
    ("checkpoint-start@4", KILLED, 2),          # before the checkpoint is written
    ("checkpoint-writing@4", KILLED, 2),        # while its shards are written (or just after)
    ("checkpoint-data-written@4", KILLED, 2),   # data complete, state file not yet updated
    ("checkpoint-state-written@4", KILLED, 4),  # state file names step 4
    ("evaluation@6", KILLED, 4),                # during the development evaluation
    ("best-data-written@6", KILLED, 4),         # best weights written, their state not
    ("checkpoint-state-written@8", KILLED, 6),  # then the test tears ckpt-8: back to 6
    ("checkpoint-start@10:nospace", 2, 8),      # the disk is full from step 10 on
    ("write:summary.json", KILLED, STEPS),      # training done, report being written
]
# Each point costs a process start (~10 s): the default run tries six of them (a kill
# between checkpoints, a kill mid-write, a kill between the data and the state file, a
# torn checkpoint, a full disk, a kill in the report's write), `-m slow` all ten.
QUICK = {"step@3", "checkpoint-writing@4", "checkpoint-data-written@4",
         "checkpoint-state-written@8", "checkpoint-start@10:nospace", "write:summary.json"}


@pytest.mark.parametrize("points", [
    "quick", pytest.param("all", marks=pytest.mark.slow)])
def test_failure_at_every_point_then_resume_finishes(points, tmp_path, tiny_corpus):
    failures = [f for f in ALL_FAILURES if points == "all" or f[0] in QUICK]
    out = tmp_path / "run"
    result = train(out, hook=failures[0][0], corpus=tiny_corpus)
    for number, (hook, exit_status, resume_step) in enumerate(failures):
        assert result.returncode == exit_status, (hook, result.stderr[-3000:])
        assert "Traceback" not in result.stderr, (hook, result.stderr[-3000:])
        assert_checkpoints_complete(out)
        if hook.endswith(":nospace"):
            errors = [line for line in result.stderr.splitlines() if line.startswith("train.py")]
            assert errors == [
                f"train.py: error: cannot write the checkpoint of step 10 in {out}: File too large; "
                "the last complete checkpoint is step 8; free space (or fix the permissions) and "
                "continue with --resume"
            ], result.stderr[-3000:]
        if hook == "checkpoint-writing@4":
            # Killed with the shards half-written (the usual case) or, if the write
            # outran the watcher, with ckpt-4 complete but not yet in the state file.
            mid_write = (out / "checkpoints" / "ckpt-4_temp").exists()
            print(f"checkpoint-writing@4: killed {'mid-write' if mid_write else 'after the write'}")
            assert mid_write or "ckpt-4" not in str(named_checkpoints(out))
        if hook == "checkpoint-state-written@8":
            data = next((out / "checkpoints").glob("ckpt-8.data-*"))
            data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])  # a torn write
        next_hook = failures[number + 1][0] if number + 1 < len(failures) else None
        result = train(out, hook=next_hook, resume=True)
        assert resumed_step(result) == resume_step, (hook, result.stdout)
        if hook == "checkpoint-state-written@8":
            assert "ckpt-8 is incomplete or unreadable" in result.stderr
            assert "using the one before it" in result.stderr
        if hook.startswith("checkpoint-writing"):
            # Whichever way the kill fell, no temporary shard directory survives a resume.
            assert not list((out / "checkpoints").glob("*_temp"))
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["updates"] == STEPS
    assert_checkpoints_complete(out)
    assert not [p.name for p in out.rglob("*.tmp*")]


def test_huge_learning_rate_diverges_and_names_the_checkpoint(tmp_path):
    from test_training import _trainer  # the tiny in-process trainer

    from keras_nmt.training import Limits, TrainingDiverged

    trainer = _trainer(tmp_path, optimizer="sgd", learning_rate=1e30, checkpoint_every=1)
    trainer.save()
    with pytest.raises(TrainingDiverged) as caught:
        trainer.fit(Limits(max_steps=20))
    message = str(caught.value)
    last_good = int(re.search(r"the last good checkpoint is step (\d+)", message).group(1))
    assert re.search(rf"became (nan|inf|-inf) at step {last_good + 1};", message), message
    assert "--resume" in message and "learning_rate" in message
    assert trainer.manager.latest_checkpoint.endswith(f"ckpt-{last_good}")
    assert checkpoint_problem(trainer.manager.latest_checkpoint) is None
    # The kept checkpoint holds finite weights: it is the one to resume from.
    reader = tf.train.load_checkpoint(trainer.manager.latest_checkpoint)
    for name in reader.get_variable_to_shape_map():
        if "model" in name and "OPTIMIZER_SLOT" not in name and name.endswith("VARIABLE_VALUE"):
            assert all(math.isfinite(v) for v in reader.get_tensor(name).ravel()), name


def test_no_complete_checkpoint_is_a_clear_error(tmp_path):
    from test_training import _trainer

    from keras_nmt.rundir import RunDirError
    from keras_nmt.training import Limits

    trainer = _trainer(tmp_path, checkpoint_every=2)
    trainer.save()
    trainer.fit(Limits(max_steps=2))
    for data in (tmp_path / "checkpoints").glob("ckpt-*.data-*"):
        data.write_bytes(b"garbage")
    again = _trainer(tmp_path, checkpoint_every=2)
    with pytest.raises(RunDirError, match="no complete checkpoint in .*checkpoints"):
        again.restore(log=lambda text: None)
    assert int(again.step.numpy()) == 0  # nothing was restored from garbage
