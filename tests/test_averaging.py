"""Checkpoint averaging: the mean of the last or best N checkpoints, as a command and at
the end of training, and the averaged weights on every path (translate, evaluate, export)."""

import io
import json
import shutil

import numpy as np
import pytest
import tensorflow as tf

from support import TINY_SETTINGS
from keras_nmt.cli import average as average_cli
from keras_nmt.rundir.run_directory import RunDir


# The module's trained run: the tests that use it are the quick tier's to leave out.
END_TO_END_FIXTURES = ("averaged_run",)


@pytest.fixture(scope="module")
def averaged_run(tiny_corpus, tmp_path_factory):
    """10 updates keeping the model weights of the last 2 checkpoints (steps 5 and 10),
    reported with their average."""
    from keras_nmt.runner import experiment
    from keras_nmt.runner.train_options import TrainOptions

    out = tmp_path_factory.mktemp("avg") / "run"
    experiment.train(TrainOptions(
        variant="search30", data=str(tiny_corpus), out=str(out), max_steps=10, quiet=True,
        lexicon=False, overrides={**TINY_SETTINGS, "checkpoint_every": 5, "average_checkpoints": 2},
    ))
    return out


def _weights(run, prefix):
    model = run.load_model(weights="last")
    tf.train.Checkpoint(model=model).read(prefix).expect_partial()
    return [w.numpy() for w in model.weights]


def test_the_average_is_the_mean_of_every_weight(averaged_run):
    run = RunDir(averaged_run)
    state = tf.train.get_checkpoint_state(str(run.recent))
    assert [p.rsplit("-", 1)[1] for p in state.all_model_checkpoint_paths] == ["5", "10"]
    first, second = (_weights(run, p) for p in state.all_model_checkpoint_paths)
    averaged = [w.numpy() for w in run.load_model(weights="averaged").weights]
    assert any(not np.array_equal(a, b) for a, b in zip(first, second))
    for a, b, mean in zip(first, second, averaged):
        np.testing.assert_allclose(mean, (a + b) / 2, rtol=1e-6, atol=1e-7)
    summary = json.loads(run.summary_path.read_text())
    assert summary["report_weights"] == "averaged"


def test_the_averaged_run_translates_evaluates_and_exports(averaged_run, tiny_corpus, tmp_path):
    from keras_nmt.cli import evaluate, export, translate
    from keras_nmt.export.loaders import SessionModel
    from keras_nmt.decoding.keras_translator import Translator

    lines = ["The queen is strange .", ""]
    expected = [t.text for t in Translator.from_run_dir(averaged_run, weights="averaged")
                .translate(lines, beam_size=2)]
    stdout, stderr = io.StringIO(), io.StringIO()
    assert translate.main([str(averaged_run), "--weights", "averaged", "--beam", "2", "--quiet"],
                          stdin=io.BytesIO("\n".join(lines).encode() + b"\n"),
                          stdout=stdout, stderr=stderr) == 0, stderr.getvalue()
    assert stdout.getvalue().splitlines() == expected
    report = tmp_path / "evaluation"
    stdout, stderr = io.StringIO(), io.StringIO()
    assert evaluate.main([str(averaged_run), "--weights", "averaged", "--src",
                          str(tiny_corpus / "valid.en"), "--ref", str(tiny_corpus / "valid.fr"),
                          "--beam", "1", "--plots", str(report), "--heatmaps", "0", "--json",
                          "--quiet"], stdout=stdout, stderr=stderr) == 0
    assert stderr.getvalue() == ""  # --quiet --json: no progress, no tables
    assert json.loads(stdout.getvalue())["runs"][0]["sentences"] == 30
    assert json.loads((report / "evaluation.json").read_text())["runs"][0]["sentences"] == 30
    stderr = io.StringIO()
    assert export.main([str(averaged_run), "--weights", "averaged", "--out", str(tmp_path / "x"),
                        "--quiet"], stdout=io.StringIO(), stderr=stderr) == 0
    assert stderr.getvalue() == ""
    served = SessionModel(tmp_path / "x" / "nmt" / "1").run("serving_default", sentences=lines)
    assert [t.decode("utf-8") for t in served["translations"]] == [
        t.text for t in Translator.from_run_dir(averaged_run, weights="averaged")
        .translate(lines, beam_size=5)]


def test_the_average_command_and_its_errors(averaged_run, tiny_run, tmp_path):
    run_dir = tmp_path / "copy"
    shutil.copytree(averaged_run, run_dir)
    stderr = io.StringIO()
    assert average_cli.main([str(run_dir)], stdout=io.StringIO(), stderr=stderr) == 0
    assert (run_dir / "averaged" / "checkpoint").is_file()
    assert "average of 2 checkpoint(s)" in stderr.getvalue()
    stderr = io.StringIO()
    assert average_cli.main([str(run_dir), "--quiet"], stdout=io.StringIO(), stderr=stderr) == 0
    assert stderr.getvalue() == ""
    stderr = io.StringIO()
    assert average_cli.main([str(run_dir), "--last", "5"], stdout=io.StringIO(), stderr=stderr) == 2
    [line] = stderr.getvalue().strip().splitlines()
    assert line.startswith("keras-nmt average: error: ") and "fewer than the 5 to average" in line
    stderr = io.StringIO()
    assert average_cli.main([str(tmp_path / "missing")], stdout=io.StringIO(), stderr=stderr) == 2
    assert "run directory not found" in stderr.getvalue()
    with pytest.raises(Exception, match="no averaged weights"):
        RunDir(tiny_run).inspect("averaged")


def test_the_average_command_never_takes_step_0(tiny_run, tmp_path):
    """tiny_run keeps no recent/: its checkpoints/ holds step 0, the random initialisation,
    and step 10. The last 2 would be a half-random model: refused; the last 1 is step 10."""
    run_dir = tmp_path / "copy"
    shutil.copytree(tiny_run, run_dir)
    run = RunDir(run_dir)
    state = tf.train.get_checkpoint_state(str(run.checkpoints))
    assert [p.rsplit("-", 1)[1] for p in state.all_model_checkpoint_paths] == ["0", "10"]
    stderr = io.StringIO()
    assert average_cli.main([str(run_dir)], stdout=io.StringIO(), stderr=stderr) == 2
    assert stderr.getvalue().splitlines() == [
        f"keras-nmt average: error: {run.checkpoints} holds 1 trained checkpoint(s) (step 0, "
        "the untrained weights, is never averaged), fewer than the 2 to average (train with "
        "--set average_checkpoints=2)"]
    stderr = io.StringIO()
    assert average_cli.main([str(run_dir), "--last", "1"], stdout=io.StringIO(), stderr=stderr) == 0
    assert [line for line in stderr.getvalue().splitlines() if line.startswith("reading")] == [
        f"reading {run.checkpoints / 'ckpt-10'}"]
    last = [w.numpy() for w in run.load_model(weights="last").weights]
    for mean, weight in zip(run.load_model(weights="averaged").weights, last):
        np.testing.assert_array_equal(mean.numpy(), weight)


def _train(out, capsys, **options):
    from keras_nmt.runner import experiment
    from keras_nmt.runner.train_options import TrainOptions

    overrides = options.pop("overrides", {})
    summary = experiment.train(TrainOptions(
        variant="search30", out=str(out), lexicon=False,
        overrides={**TINY_SETTINGS, **overrides}, **options))
    return summary, capsys.readouterr().err


@pytest.mark.end_to_end
def test_a_run_shorter_than_its_average_averages_only_trained_checkpoints(tiny_corpus, tmp_path,
                                                                           capsys, monkeypatch):
    """4 updates with a checkpoint every 5 and the average of the last 3: besides step 0,
    which is never averaged, the run wrote step 4 alone. Its report averages that one and
    says so. Then --resume: the earlier report is withdrawn as soon as the run moves on
    (a session stopped before its report leaves --weights reported on the best weights,
    not the stale average), and a session that ends reports anew on the latest training."""
    from keras_nmt.training import Trainer

    out = tmp_path / "run"
    settings = {"checkpoint_every": 5, "eval_every": 2, "average_checkpoints": 3}
    summary, stderr = _train(out, capsys, data=str(tiny_corpus), max_steps=4, overrides=settings)
    run = RunDir(out)
    assert tf.train.get_checkpoint_state(str(run.recent)).all_model_checkpoint_paths == [
        str(run.recent / "ckpt-4")]
    assert summary["averaging"] == {"asked": 3, "from": "last", "steps": [4]}
    assert summary["report_weights"] == "averaged" and run.reported_weights() == "averaged"
    assert ("averaging 1 trained checkpoint(s), fewer than the 3 of average_checkpoints: "
            "the run wrote no more\n") in stderr
    assert f"reading {run.recent / 'ckpt-4'}" in stderr and "ckpt-0" not in stderr
    averaged = [w.numpy() for w in run.load_model().weights]
    for mean, trained in zip(averaged, _weights(run, str(run.recent / "ckpt-4"))):
        np.testing.assert_array_equal(mean, trained)
    untrained = _weights(run, str(run.checkpoints / "ckpt-0"))
    assert any(not np.allclose(mean, initial) for mean, initial in zip(averaged, untrained))

    real_fit = Trainer.fit

    def fit_then_die(self, limits):
        real_fit(self, limits)
        raise RuntimeError("killed before the report")

    monkeypatch.setattr(Trainer, "fit", fit_then_die)
    with pytest.raises(RuntimeError, match="killed before the report"):
        _train(out, capsys, resume=True, max_steps=8)
    assert run.load_summary() is None
    assert run.reported_weights() == "best" and run.inspect().checkpoint_dirs[0] == run.best
    monkeypatch.undo()
    summary, stderr = _train(out, capsys, resume=True, max_steps=8)
    assert summary["updates"] == 8 and run.load_summary()["updates"] == 8
    assert summary["averaging"] == {"asked": 3, "from": "last", "steps": [4, 5, 8]}
    assert run.reported_weights() == "averaged"
    recent = [_weights(run, str(run.recent / f"ckpt-{step}")) for step in (4, 5, 8)]
    for mean, *values in zip(run.load_model().weights, *recent):
        np.testing.assert_allclose(mean.numpy(), sum(values) / 3, rtol=1e-6, atol=1e-7)


@pytest.mark.end_to_end
def test_with_no_trained_checkpoint_to_average_the_report_says_so(tiny_corpus, tmp_path, capsys):
    """The 2 best of a run that never evaluated: there are none; it reports with the last
    weights, and summary.json records that nothing was averaged."""
    out = tmp_path / "run"
    summary, stderr = _train(out, capsys, data=str(tiny_corpus), max_steps=2, overrides={
        "eval_every": 100, "average_checkpoints": 2, "average_from": "best"})
    assert summary["averaging"] == {"asked": 2, "from": "best", "steps": []}
    assert summary["report_weights"] == "last"
    assert ("averaging 0 trained checkpoint(s), fewer than the 2 of average_checkpoints: the "
            "run wrote no more; reporting with the last weights") in stderr
    assert not RunDir(out).averaged.exists()


def test_by_default_every_command_uses_the_weights_the_run_reported_with(averaged_run, tmp_path):
    """A run that averages reported with its averaged weights: translate, evaluate, score
    and export load those unless --weights says otherwise; a run without them (averaged/
    removed, or no summary yet) falls back to the best."""
    from keras_nmt.cli import translate

    run = RunDir(averaged_run)
    assert run.reported_weights() == "averaged"
    assert run.inspect().checkpoint_dirs == (run.averaged,)
    assert run.inspect("best").checkpoint_dirs[0] == run.best
    lines = ["The queen is strange .", "the king"]

    def translated(*args):
        stdout = io.StringIO()
        assert translate.main([str(averaged_run), "--beam", "2", "--quiet", *args],
                              stdin=io.BytesIO("\n".join(lines).encode() + b"\n"),
                              stdout=stdout, stderr=io.StringIO()) == 0
        return stdout.getvalue()

    assert translated() == translated("--weights", "averaged")
    averaged = [w.numpy() for w in run.load_model().weights]
    best = [w.numpy() for w in run.load_model(weights="best").weights]
    assert any(not np.array_equal(a, b) for a, b in zip(averaged, best))
    copy = RunDir(shutil.copytree(averaged_run, tmp_path / "copy"))
    shutil.rmtree(copy.averaged)
    assert copy.reported_weights() == "best"
    copy.summary_path.write_text("{", encoding="utf-8")
    from keras_nmt.core.errors import RunDirError

    with pytest.raises(RunDirError, match="cannot read .*summary.json"):
        copy.load_summary()
    assert copy.reported_weights() == "best"
    copy.summary_path.unlink()
    assert copy.load_summary() is None
    assert copy.reported_weights() == "best" and copy.inspect().checkpoint_dirs[0] == copy.best


def test_an_average_is_numbered_by_its_newest_step_and_replaces_the_old_one_whole(
        averaged_run, tmp_path, monkeypatch):
    """averaged/ is never written over in place: a write that fails half-way leaves the
    earlier average whole and loadable, and the checkpoint's number is the newest step it
    averages (10), not a count of saves."""
    from keras_nmt.rundir import averaging

    run_dir = tmp_path / "run"
    shutil.copytree(averaged_run, run_dir)
    run = RunDir(run_dir)
    assert tf.train.latest_checkpoint(str(run.averaged)).endswith("ckpt-10")
    before = [w.numpy() for w in run.load_model(weights="averaged").weights]
    written = averaging.write_average(run, averaging.checkpoints_to_average(run, "last", 1))
    assert written == str(run.averaged / "ckpt-10")
    assert sorted(p.name for p in run_dir.iterdir() if "averaged" in p.name) == ["averaged"]
    newest = [w.numpy() for w in run.load_model(weights="averaged").weights]
    assert not all(np.array_equal(a, b) for a, b in zip(before, newest))

    save = tf.train.CheckpointManager.save

    def save_then_fail(self, *args, **kwargs):
        save(self, *args, **kwargs)
        raise OSError("disk gone")

    monkeypatch.setattr(tf.train.CheckpointManager, "save", save_then_fail)
    with pytest.raises(OSError, match="disk gone"):
        averaging.write_average(run, averaging.checkpoints_to_average(run, "last", 2))
    kept = [w.numpy() for w in run.load_model(weights="averaged").weights]
    assert all(np.array_equal(a, b) for a, b in zip(newest, kept))
    assert sorted(p.name for p in run_dir.iterdir() if "averaged" in p.name) == ["averaged"]
