"""train.py end to end on a tiny generated corpus: errors, training, kill and resume."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--set", "embedding=16", "--set", "hidden=16", "--set", "attention=16", "--set", "maxout=8",
        "--set", "batch_size=16", "--set", "beam_size=2", "--set", "shuffle_buffer=200"]


def run_train(*args, timeout=300):
    return subprocess.run(
        [sys.executable, str(ROOT / "train.py"), *args],
        capture_output=True, text=True, timeout=timeout, cwd=ROOT,
    )


@pytest.fixture
def corpus(tiny_corpus):
    return tiny_corpus


def assert_one_line_error(result, expected):
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("train.py")]
    assert len(lines) == 1 and expected in lines[0], result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("args, expected", [
    (["--variant", "search70"], "unknown variant 'search70'"),
    (["--set", "hiden=3"], "unknown --set key 'hiden'"),
    (["--set", "hidden=big"], "expected a value of type int"),
    (["--max-steps", "0"], "expected a positive integer"),
    (["--resume"], "--resume needs --out"),
    (["--jit", "--no-jit"], "argument --no-jit: not allowed with argument --jit"),
])
def test_bad_arguments_fail_in_one_line(args, expected):
    assert_one_line_error(run_train(*args, timeout=60), expected)


def test_unwritable_out_and_resume_without_checkpoint(tmp_path, corpus):
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = run_train("--data", str(corpus), "--out", str(blocker / "run"), "--max-steps", "1", *TINY)
    assert_one_line_error(result, "cannot write to run directory")
    result = run_train("--out", str(tmp_path / "empty"), "--resume")
    assert_one_line_error(result, "no checkpoint to resume from")
    result = run_train("--data", str(tmp_path / "nowhere"), "--out", str(tmp_path / "r"), *TINY)
    assert_one_line_error(result, "corpus directory not found")


def test_jit_is_the_default_where_a_gpu_is(monkeypatch):
    import tensorflow as tf

    from keras_nmt.cli.train import build_parser
    from keras_nmt.experiment import use_jit

    parser = build_parser("train.py")
    assert [parser.parse_args(args).jit for args in ([], ["--jit"], ["--no-jit"])] == [None, True, False]
    assert use_jit(None, "default") is bool(tf.config.list_physical_devices("GPU"))
    monkeypatch.setattr(tf.config, "list_physical_devices",
                        lambda kind=None: ["/physical_device:GPU:0"] if kind == "GPU" else [])
    assert use_jit(None, "default") is True
    assert use_jit(None, "mirrored") is False  # XLA works with the default strategy only
    assert use_jit(None, "default", batch_tokens=2000) is False  # a new shape every step
    assert use_jit(False, "default") is False and use_jit(True, "mirrored") is True


def test_train_report_and_run_directory(tmp_path, corpus):
    out = tmp_path / "run"
    result = run_train("--variant", "encdec30", "--data", str(corpus), "--out", str(out),
                       "--max-steps", "6", "--set", "eval_every=3", *TINY)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "held-out BLEU (test, 40 sentences, beam 2)" in result.stdout
    assert f"run directory: {out}" in result.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["updates"] == 6 and summary["architecture"] == "encdec"
    assert summary["jit"] is False  # no GPU here: XLA stays off unless asked for
    assert summary["data"]["train"]["pairs"] == 400
    assert summary["data"]["train"]["kept"] + summary["data"]["train"]["dropped_too_long"] == 400
    assert 0 < summary["train_nll"] < 1000 and 0 < summary["dev_nll"] < 1000
    assert summary["held_out"]["sentences"] == 40
    assert summary["held_out"]["bleu_signature"].startswith("nrefs:1|case:mixed")
    for name in ("config.json", "data.json", "vocab.en.txt", "vocab.fr.txt", "best", "tensorboard"):
        assert (out / name).exists(), name
    # A second start on the same directory must not overwrite it.
    again = run_train("--variant", "encdec30", "--data", str(corpus), "--out", str(out), *TINY)
    assert_one_line_error(again, "already holds a run")


def _checkpoint_steps(out: Path) -> list[int]:
    state = out / "checkpoints" / "checkpoint"
    if not state.exists():
        return []
    return [int(line.rsplit("-", 1)[1].rstrip('"')) for line in state.read_text().splitlines()
            if line.startswith("all_model_checkpoint_paths")]


def test_sigkill_then_resume_finishes(tmp_path, corpus):
    """train.py killed with SIGKILL mid-run, then --resume. The kill comes from the fault
    hook (keras_nmt/faults.py) right after update 10, before anything is written for it,
    so the run is killed at a known step whatever the machine's speed: checkpoints 4 and 8
    are on disk, and the resume starts from 8."""
    out = tmp_path / "run"
    args = ["--variant", "search30", "--data", str(corpus), "--out", str(out), "--max-steps", "40",
            "--set", "checkpoint_every=4", "--set", "eval_every=10", *TINY]
    killed = subprocess.run([sys.executable, str(ROOT / "train.py"), *args], cwd=ROOT,
                            capture_output=True, text=True, timeout=300,
                            env={**os.environ, "KERAS_NMT_TEST_HOOK": "step@10"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert _checkpoint_steps(out) == [4, 8]
    assert not (out / "summary.json").exists()
    result = run_train("--resume", *args)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "resumed at step 8" in result.stdout
    assert json.loads((out / "summary.json").read_text())["updates"] == 40


@pytest.mark.parametrize("train_fr, expected", [
    (b"A\nB\n", "line counts differ"),
    (b"A\nB \xc3\x28\nC\n", "line 2 is not UTF-8 text"),
])
def test_bad_corpus_fails_cleanly_and_leaves_nothing(tmp_path, train_fr, expected):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.en").write_bytes(b"a\nb\nc\n")
    (data / "train.fr").write_bytes(train_fr)
    (data / "valid.en").write_bytes(b"a\n")
    (data / "valid.fr").write_bytes(b"A\n")
    out = tmp_path / "run"
    assert_one_line_error(run_train("--data", str(data), "--out", str(out), *TINY), expected)
    assert not out.exists()
