"""train.py end to end on a tiny generated corpus: errors, training, kill and resume.

The command runs in this process (the ``cli_runner`` fixture) except where the test
needs a process of its own: one killed with SIGKILL (a background job that starts with
the session, see conftest.py)."""

import json
import re
import signal
import sys
from pathlib import Path

import pytest

from keras_nmt.core.faults import HOOK_ENV
from support import ROOT, edit_json, run_logged, tiny_args

# The tiny model; no development evaluation unless a test asks for one.
TINY_ARGS = tiny_args(shuffle_buffer=200, eval_every=None)


@pytest.fixture
def run_train(cli_runner):
    """``python train.py ARGS``, run in this process: (exit status, stdout, stderr)."""
    return lambda *args: cli_runner("train", *args, prog="train.py")


@pytest.fixture
def corpus(tiny_corpus):
    return tiny_corpus


def first_lines(stderr):
    """The lines of a command's stderr before it reads the corpus."""
    lines = stderr.splitlines()
    return lines[:next(i for i, line in enumerate(lines) if line.startswith("reading "))]


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
    (["--joint-vocabulary"], "--joint-vocabulary needs --tokenizer sentencepiece"),
    (["--subword-samples", "2"], "--subword-samples needs --tokenizer sentencepiece"),
    (["--subword-samples", "0"], "expected a positive integer, got '0'"),
    (["--tokenizer", "sentencepiece", "--subword-alpha", "0.2"],
     "--subword-alpha needs --subword-samples"),
    (["--sentencepiece-type", "bpe"], "--sentencepiece-type needs --tokenizer sentencepiece"),
    (["--tokenizer", "sentencepiece", "--sentencepiece-type", "bpe", "--subword-samples", "2"],
     "--subword-samples draws among a unigram model's segmentations: not with --sentencepiece-type bpe"),
    (["--set", "tie_embeddings=true"], "tie_embeddings needs --joint-vocabulary"),
    (["--tokenizer", "sentencepiece", "--set", "tie_embeddings=1", "--set", "src_vocab_size=100",
      "--set", "tgt_vocab_size=120"], "tie_embeddings needs one vocabulary for both sides"),
])
def test_bad_arguments_fail_in_one_line(run_train, args, expected):
    assert_one_line_error(run_train(*args), expected)


def test_unwritable_out_and_resume_without_checkpoint(run_train, tmp_path, corpus):
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = run_train("--data", str(corpus), "--out", str(blocker / "run"), "--max-steps", "1", *TINY_ARGS)
    assert_one_line_error(result, "cannot write to run directory")
    result = run_train("--out", str(tmp_path / "empty"), "--resume")
    assert_one_line_error(result, "no checkpoint to resume from")
    result = run_train("--data", str(tmp_path / "nowhere"), "--out", str(tmp_path / "r"), *TINY_ARGS)
    assert_one_line_error(result, "corpus directory not found")


def test_jit_is_the_default_where_a_gpu_is(monkeypatch):
    import tensorflow as tf

    from keras_nmt.cli.train import build_parser
    from keras_nmt.core.xla import use_jit

    parser = build_parser("train.py")
    assert [parser.parse_args(args).jit for args in ([], ["--jit"], ["--no-jit"])] == [None, True, False]
    assert use_jit(None, "default") is bool(tf.config.list_physical_devices("GPU"))
    monkeypatch.setattr(tf.config, "list_physical_devices",
                        lambda kind=None: ["/physical_device:GPU:0"] if kind == "GPU" else [])
    assert use_jit(None, "default") is True
    assert use_jit(None, "mirrored") is False  # XLA works with the default strategy only
    assert use_jit(None, "default", batch_tokens=2000) is False  # a new shape every step
    assert use_jit(False, "default") is False and use_jit(True, "mirrored") is True


def test_precision_auto_reaches_the_run_s_config(run_train, tmp_path, monkeypatch):
    """--precision auto, on a CPU whose flags say AVX512_BF16 (mocked): the config the run
    is set up with computes in mixed_bfloat16, and the log says why."""
    import tensorflow as tf

    from keras_nmt.core import cpu
    from keras_nmt.core.errors import RunDirError
    from keras_nmt.runner import run_data

    monkeypatch.setattr(cpu, "cpu_flags", lambda: frozenset({"avx2", "avx512_bf16"}))
    monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind=None: [])
    prepared = []

    def prepare(options, config, *args, **kwargs):  # stops the run before any work
        prepared.append(config)
        raise RunDirError("stopped before the corpus")

    monkeypatch.setattr(run_data, "prepare", prepare)
    result = run_train("--out", tmp_path / "run", "--precision", "auto", "--max-steps", "1")
    assert result.returncode == 2 and "stopped before the corpus" in result.stderr
    assert [config.precision for config in prepared] == ["mixed_bfloat16"]
    assert "precision: mixed_bfloat16 (auto: avx512_bf16 found)" in result.stderr


@pytest.mark.end_to_end
def test_train_report_and_run_directory(run_train, tmp_path, corpus, monkeypatch):
    from keras_nmt.data import pipelines as data

    out = tmp_path / "run"
    # The development batches are made once, then scored at every evaluation.
    made = []
    monkeypatch.setattr(data, "evaluation_batches",
                        lambda *args, _make=data.evaluation_batches, **kwargs:
                        made.append(1) or _make(*args, **kwargs))
    result = run_train("--variant", "encdec30", "--data", str(corpus), "--out", str(out),
                       "--max-steps", "6", "--set", "eval_every=3", *TINY_ARGS)
    assert result.returncode == 0, result.stderr[-3000:]
    # The size first (the paper's, the default here, changed by --set).
    assert first_lines(result.stderr)[0] == (
        "model: encdec30 (encdec), size paper changed by --set: embedding 16, hidden 16, attention 16, "
        "maxout 8; adadelta 1, batch 16")
    # stdout: the final report alone; the log and the progress: stderr.
    report = result.stdout.splitlines()
    assert report[0].startswith("done: 6 updates") and len(report) == 4, report
    assert "held-out BLEU (test, 40 sentences, beam 2)" in report[1]
    assert report[3].startswith(f"run directory: {out}")
    for line in ("training encdec30", "tokenizing the training split (vocabularies, lengths, ids): 400 pairs in",
                 "translating test.en: 40 sentences in", "lexicon: EM round 5/5"):
        assert line in result.stderr, line
    summary = json.loads((out / "summary.json").read_text())
    assert summary["updates"] == 6 and summary["architecture"] == "encdec"
    assert summary["jit"] is False  # no GPU here: XLA stays off unless asked for
    assert summary["data"]["train"]["pairs"] == 400
    assert summary["data"]["train"]["kept"] + summary["data"]["train"]["dropped_too_long"] == 400
    assert 0 < summary["train_nll"] < 1000 and 0 < summary["dev_nll"] < 1000
    assert result.stderr.count("  dev NLL ") == 2 and len(made) == 1, made
    assert summary["held_out"]["sentences"] == 40
    assert summary["held_out"]["bleu_signature"].startswith("nrefs:1|case:mixed")
    for name in ("config.json", "data.json", "vocab.en.txt", "vocab.fr.txt", "best", "tensorboard"):
        assert (out / name).exists(), name
    # A second start on the same directory must not overwrite it.
    again = run_train("--variant", "encdec30", "--data", str(corpus), "--out", str(out), *TINY_ARGS)
    assert_one_line_error(again, "already holds a run")


def _checkpoint_steps(out: Path) -> list[int]:
    state = out / "checkpoints" / "checkpoint"
    if not state.exists():
        return []
    return [int(line.rsplit("-", 1)[1].rstrip('"')) for line in state.read_text().splitlines()
            if line.startswith("all_model_checkpoint_paths")]


def _killed_args(corpus, out):
    return ["--variant", "search30", "--data", corpus, "--out", out, "--max-steps", 16,
            "--set", "checkpoint_every=4", "--set", "eval_every=10", *TINY_ARGS]


def _killed_at_step_10(context):
    """The background job of ``killed_run`` (conftest.BackgroundContext)."""
    out = context.tmp_path_factory.mktemp("killed") / "run"

    def work(launch):
        command = [sys.executable, ROOT / "train.py", *_killed_args(context.corpus, out)]
        return out, run_logged(command, out.with_suffix(".log"),
                               {**context.env, HOOK_ENV: "step@10"}, launch, timeout=300)

    return work


BACKGROUND_JOBS = {"killed_run": _killed_at_step_10}


@pytest.fixture(scope="session")
def killed_run(_background):
    """(run directory, (exit status, output)) of train.py killed by the fault hook right
    after update 10; the process starts with the session (a background job)."""
    return _background.result("killed_run")


def test_sigkill_then_resume_finishes(run_train, killed_run, corpus):
    """train.py killed with SIGKILL mid-run (in a process of its own), then --resume. The
    kill comes from the fault hook (keras_nmt/core/faults.py) right after update 10, before
    anything is written for it, so the run is killed at a known step whatever the
    machine's speed: checkpoints 4 and 8 are on disk, and the resume starts from 8."""
    out, (status, output) = killed_run
    assert status == -signal.SIGKILL, output[-3000:]
    assert _checkpoint_steps(out) == [4, 8]
    assert not (out / "summary.json").exists()
    result = run_train("--resume", *_killed_args(corpus, out), "--no-lexicon")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "resumed at step 8" in result.stderr
    assert json.loads((out / "summary.json").read_text())["updates"] == 16


@pytest.mark.parametrize("train_fr, expected", [
    (b"A\nB\n", "line counts differ"),
    (b"A\nB \xc3\x28\nC\n", "line 2 is not UTF-8 text"),
])
def test_bad_corpus_fails_cleanly_and_leaves_nothing(run_train, tmp_path, train_fr, expected):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.en").write_bytes(b"a\nb\nc\n")
    (data / "train.fr").write_bytes(train_fr)
    (data / "valid.en").write_bytes(b"a\n")
    (data / "valid.fr").write_bytes(b"A\n")
    out = tmp_path / "run"
    assert_one_line_error(run_train("--data", str(data), "--out", str(out), *TINY_ARGS), expected)
    assert not out.exists()


def assert_refused(result, *expected):
    """Refused with one error line, the last on stderr (after the log's, if any)."""
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert [line for line in lines if line.startswith("train.py")] == lines[-1:], lines
    assert lines[-1].startswith("train.py: error: "), lines
    assert all(text in lines[-1] for text in expected), lines


@pytest.mark.parametrize("args, expected", [
    (["--cache-dir", "cache"], "--cache-dir: for --data wmt14-en-fr only, not --data "),
    (["--mirror", "http://mirror.example"], "--mirror: for --data wmt14-en-fr only"),
    (["--max-train-pairs", "5", "--mirror", "http://m"], "--max-train-pairs, --mirror: for --data wmt14-en-fr only"),
    (["--paper-size"], "--paper-size: for --data builtin only"),
    (["--recipe", "budget"], "lr_schedule='budget' (as --recipe budget sets it) decays to the end "
                             "of the training budget: give --max-minutes or --max-steps"),
    (["--set", "lr_schedule=budget"], "give --max-minutes or --max-steps"),
    (["--set", "rho=0.9", "--set", "optimizer=adam"],
     "--set rho: only the adadelta optimizer reads it, and this run uses adam"),
    (["--set", "epsilon=1e-8", "--set", "rho=0.9", "--set", "optimizer=sgd"],
     "--set epsilon, rho: only the adadelta optimizer reads them, and this run uses sgd"),
    (["--data", "wmt14-en-fr", "--src-lang", "de"], "--data wmt14-en-fr needs --src-lang/--tgt-lang en and fr, got de/fr"),
])
def test_options_a_new_run_would_ignore_are_refused_before_any_work(run_train, tmp_path, corpus,
                                                                    args, expected):
    out = tmp_path / "run"
    data = [] if "--data" in args else ["--data", corpus]
    assert_refused(run_train(*data, "--out", out, *args), expected)
    assert not out.exists() and not (tmp_path / "cache").exists()


def test_the_old_language_spellings_work_after_a_notice(run_train, tmp_path, corpus):
    new = run_train("--data", "wmt14-en-fr", "--out", tmp_path / "run", "--src-lang", "de")
    old = run_train("--data", "wmt14-en-fr", "--out", tmp_path / "run", "--src", "de")
    assert old.returncode == new.returncode == 2
    assert "needs --src-lang/--tgt-lang en and fr" in new.stderr and new.stdout == old.stdout
    assert old.stderr == ("train.py: warning: --src is deprecated, use --src-lang (the old "
                          "spelling goes in the next release)\n") + new.stderr
    assert not (tmp_path / "run").exists()


def test_set_rho_with_the_compact_adam_and_budget_defaults(run_train, tmp_path):
    out = tmp_path / "run"
    # The built-in corpus's compact settings choose Adam: Adadelta's rho would do nothing.
    assert_refused(run_train("--out", out, "--set", "rho=0.9"), "this run uses adam")
    # ... and give a budget of minutes, so the budget recipe is accepted there.
    from keras_nmt.runner.train_options import TrainOptions, new_run_config

    options = TrainOptions(recipe="budget").for_new_run()
    assert new_run_config(options).lr_schedule == "budget"
    assert not out.exists()


def _resume_args(run_dir, *args):
    return ["--resume", "--out", run_dir, "--max-steps", "11", "--no-lexicon", *args]


@pytest.mark.parametrize("args, expected", [
    (["--data", "builtin"], ["--data builtin does not match the run in ", "started with --data /"]),
    (["--src-lang", "de", "--tgt-lang", "fr"], ["--src-lang de does not match", "started with --src-lang en ("]),
    (["--seed", "7"], ["--seed 7 does not match", "started with --seed 1234"]),
    (["--recipe", "budget"], ["--recipe budget does not match", "started with no --recipe"]),
    (["--paper-size"], ["--paper-size does not match", "started with no --paper-size"]),
    (["--size", "medium"], ["--size medium does not match", "started with --size paper ("]),
    (["--preset", "budget"], ["--size medium, --recipe budget do not match",
                              "started with --size paper, no --recipe"]),
    (["--max-train-pairs", "5"], ["--max-train-pairs 5 does not match", "no --max-train-pairs"]),
    (["--cache-dir", "c", "--mirror", "http://m/"],
     ["--cache-dir /", ", --mirror http://m do not match", "started with no --cache-dir, no --mirror"]),
    (["--variant", "encdec30"], ["--variant encdec30 does not match", "--variant search30"]),
    (["--set", "hidden=32", "--seed", "7"],
     ["--seed 7, --set hidden=32 do not match", "started with --seed 1234, hidden=16"]),
    (["--tokenizer", "sentencepiece"], ["started with --tokenizer word"]),
    (["--joint-vocabulary"], ["--joint-vocabulary does not match", "started with no --joint-vocabulary"]),
    (["--subword-samples", "4", "--subword-alpha", "0.2"],
     ["--subword-samples 4, --subword-alpha 0.2 do not match",
      "started with no --subword-samples, no --subword-alpha"]),
    (["--sentencepiece-type", "bpe"], ["--sentencepiece-type bpe does not match",
                                       "started with no --sentencepiece-type"]),
])
def test_resume_options_must_match_the_run(run_train, run_copy, args, expected):
    before = sorted(path.name for path in run_copy.rglob("*"))
    assert_refused(run_train(*_resume_args(run_copy, *args)), *expected)
    assert sorted(path.name for path in run_copy.rglob("*")) == before


def test_resume_takes_the_run_s_values_and_accepts_the_same_ones(run_copy, tiny_corpus, tmp_path):
    from keras_nmt.runner.resume import resume_config
    from keras_nmt.rundir.run_directory import RunDir
    from keras_nmt.runner.train_options import TrainOptions

    run = RunDir(run_copy)
    stored = run.load_config()
    # Nothing given: the run's own (a search30 run, not the default search50).
    config, info = resume_config(TrainOptions(resume=True), run)
    assert config == stored and info["src"] == "en"
    # The run's command again, the corpus named by another path to it.
    alias = tmp_path / "alias"
    alias.symlink_to(tiny_corpus)
    same = TrainOptions(
        resume=True, variant="search30", data=str(alias) + "/", src="en", tgt="fr", seed=1234,
        tokenizer="word", overrides={"hidden": 16, "learning_rate": 0.5},
    )
    config, _ = resume_config(same, run)
    assert config == stored.replace(learning_rate=0.5)


def test_resume_refuses_what_the_run_cannot_use(run_train, run_copy):
    # Adam (here by hand: --set optimizer cannot change on resume) reads no rho.
    edit_json(run_copy / "config.json", optimizer="adam")
    assert_refused(run_train(*_resume_args(run_copy, "--set", "rho=0.5")),
                   "--set rho: only the adadelta")
    # A budget schedule needs a budget, in every session.
    edit_json(run_copy / "config.json", optimizer="adadelta", lr_schedule="budget")
    assert_refused(run_train("--resume", "--out", run_copy, "--no-lexicon"),
                   "give --max-minutes or --max-steps")
    # A run made before data.json recorded the options: what it cannot check is refused.
    edit_json(run_copy / "config.json", lr_schedule="constant")
    edit_json(run_copy / "data.json", options=None)
    assert_refused(run_train(*_resume_args(run_copy, "--recipe", "budget", "--paper-size")),
                   "did not record its --paper-size, --recipe: leave them out")
    assert_refused(run_train(*_resume_args(run_copy, "--data", "builtin")), "started with --data /")


def test_resume_checks_the_recorded_wmt14_options(run_copy, tmp_path, monkeypatch):
    from keras_nmt.core.errors import ConfigError
    from keras_nmt.corpus import wmt14
    from keras_nmt.runner.resume import options_record, resume_config
    from keras_nmt.rundir.run_directory import RunDir
    from keras_nmt.runner.train_options import TrainOptions

    # What a run started with --data wmt14-en-fr --max-train-pairs 20 --cache-dir CACHE
    # and $KERAS_NMT_WMT14_MIRROR set records.
    monkeypatch.setenv(wmt14.MIRROR_ENV, "http://mirror.example/wmt/")
    monkeypatch.chdir(tmp_path)
    started = TrainOptions(data="wmt14-en-fr", max_train_pairs=20, cache_dir="cache")
    record = options_record(started.for_new_run())
    assert record == {"data": "wmt14-en-fr", "paper_size": False, "size": "paper", "recipe": None,
                      "max_train_pairs": 20, "cache_dir": str(tmp_path / "cache"),
                      "mirror": "http://mirror.example/wmt", "joint_vocabulary": False,
                      "subword_samples": None, "subword_alpha": None, "sentencepiece_type": None}
    edit_json(run_copy / "data.json", options=record)
    run = RunDir(run_copy)
    same = TrainOptions(resume=True, data="wmt14-en-fr", max_train_pairs=20,
                        cache_dir=str(tmp_path / "cache/"), mirror="http://mirror.example/wmt")
    assert resume_config(same, run)[0] == run.load_config()
    with pytest.raises(ConfigError, match=r"^--resume: --cache-dir \S+/other does not match the "
                                          r"run in \S+, started with --cache-dir \S+/cache \("):
        resume_config(TrainOptions(resume=True, cache_dir="other"), run)


@pytest.mark.end_to_end
def test_a_run_without_a_budget_says_how_long_an_epoch_takes(run_train, tmp_path, corpus,
                                                             monkeypatch):
    # Interrupted (Ctrl-C, as the fault hook's point after update 24 raises it) once the
    # estimate is out: it comes after update 21 (the first, which builds the graph, then
    # 20 timed).
    from keras_nmt.core import faults

    def interrupt(name, step=None):
        if name == "step" and step == 24:
            raise KeyboardInterrupt

    monkeypatch.setattr(faults, "point", interrupt)
    out = tmp_path / "run"
    stopped = run_train("--variant", "search30", "--data", corpus, "--out", out, *TINY_ARGS)
    assert stopped.returncode == 130, stopped.stderr[-3000:]
    lines = stopped.stderr.splitlines()
    assert lines[-1] == "train.py: interrupted; continue with --resume --out RUN_DIR"
    assert first_lines(stopped.stderr)[0].startswith("model: search30 (search), size paper changed")
    said = [line for line in lines if line.startswith("no --max-steps or --max-minutes: an epoch")]
    assert len(said) == 1 and "at the rate of the first 20 updates" in said[0], lines
    assert re.search(r"an epoch \(\d+ pairs\) takes about \d\d:\d\d", said[0])
