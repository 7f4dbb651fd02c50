"""A run directory can be moved or copied: data.json names the files inside it relative
to it, and a corpus outside it that is gone is a one-line error naming the file."""

import io
import json
import shutil

import pytest

from conftest import TINY_SETTINGS, onnx_files
from keras_nmt import experiment
from keras_nmt.cli import export as export_cli
from keras_nmt.cli import lexicon as lexicon_cli
from keras_nmt.cli import train as train_cli
from keras_nmt.cli import translate as translate_cli
from keras_nmt.corpus import builtin
from keras_nmt.rundir import RunDir, RunDirError

# The built-in corpus made small: its default 30,000 pairs take minutes to train and test on.
TINY_BUILTIN = builtin.BuiltinCorpusSpec(seed=7, train_size=200, valid_size=8, test_size=8,
                                         max_source_tokens=30)


def test_a_copied_built_in_run_resumes_builds_its_lexicon_exports_and_translates(
        tmp_path, monkeypatch):
    monkeypatch.setattr(builtin, "BuiltinCorpusSpec", lambda: TINY_BUILTIN)
    made = tmp_path / "gpu-box" / "run"
    experiment.train(experiment.TrainOptions(
        variant="search30", out=str(made), max_steps=2, quiet=True, lexicon=False,
        overrides=dict(TINY_SETTINGS),
    ))
    info = json.loads((made / "data.json").read_text())
    assert info["corpus"] == "corpus"
    assert info["splits"]["train"] == {"source": "corpus/train.en", "target": "corpus/train.fr"}
    assert info["splits"]["test"] == {"source": "corpus/test.en", "target": "corpus/test.fr"}

    moved = tmp_path / "laptop" / "run"
    shutil.copytree(made, moved)
    shutil.rmtree(made)

    out = io.StringIO()
    assert train_cli.main(["--variant", "search30", "--out", str(moved), "--resume",
                           "--max-steps", "3", "--quiet", "--no-lexicon"],
                          stdout=out, stderr=out) == 0, out.getvalue()
    summary = json.loads((moved / "summary.json").read_text())
    assert summary["updates"] == 3 and summary["held_out"]["sentences"] == 8

    out = io.StringIO()
    assert lexicon_cli.main([str(moved), "--quiet"], stdout=out, stderr=out) == 0, out.getvalue()
    assert json.loads(out.getvalue())["pairs"] > 0

    out = io.StringIO()
    assert export_cli.main([str(moved), "--out", str(tmp_path / "export"), "--beam", "2",
                            "--onnx", "--shortlist", "5,2", "--int8", "--int8-max-drop", "100"],
                           stdout=out, stderr=out) == 0, out.getvalue()
    assert (onnx_files(tmp_path / "export") / "nmt.int8.onnx").is_file()

    out, err = io.StringIO(), io.StringIO()
    assert translate_cli.main([str(moved), "--quiet"], stdin=io.BytesIO(b"the queen .\n\n"),
                              stdout=out, stderr=err) == 0, err.getvalue()
    assert len(out.getvalue().splitlines()) == 2

    # data.json of runs made before paths were stored relative: absolute paths into the
    # built-in corpus where the run was made still find it where the run is now.
    old = json.loads((moved / "data.json").read_text())
    old["corpus"] = str(made / "corpus")
    for split in old["splits"].values():
        for side in ("source", "target"):
            split[side] = str(made / split[side])
    (moved / "data.json").write_text(json.dumps(old))
    files = RunDir(moved).split_files("train", needed_for="a test")
    assert files.source == moved / "corpus" / "train.en"
    assert files.target == moved / "corpus" / "train.fr"


def test_a_corpus_left_behind_is_named_in_one_line(tiny_run, tiny_corpus, tmp_path):
    corpus = tmp_path / "corpus"
    shutil.copytree(tiny_corpus, corpus)
    run_dir = tmp_path / "run"
    shutil.copytree(tiny_run, run_dir)
    info = json.loads((run_dir / "data.json").read_text())
    # tiny_run's corpus is outside the run: data.json names it by its absolute path.
    assert info["splits"]["train"]["source"] == str(tiny_corpus.resolve() / "train.en")
    for split in info["splits"].values():
        for side in ("source", "target"):
            split[side] = str(corpus / split[side].rsplit("/", 1)[1])
    (run_dir / "data.json").write_text(json.dumps(info))
    (corpus / "train.fr").unlink()
    (corpus / "valid.en").unlink()

    def one_line(main, argv):
        err = io.StringIO()
        assert main(argv, stdout=io.StringIO(), stderr=err) == 2
        [line] = err.getvalue().strip().splitlines()
        return line

    data_json = run_dir / "data.json"
    assert one_line(lexicon_cli.main, [str(run_dir), "--quiet"]) == (
        f"keras-nmt lexicon: error: the training corpus {corpus / 'train.fr'} is missing "
        f"(needed for the lexical table); copy it back, or write where it is now into {data_json}"
    )
    assert one_line(train_cli.main, ["--variant", "search30", "--out", str(run_dir), "--resume",
                                     "--max-steps", "12", "--quiet"]) == (
        f"keras-nmt train: error: the training corpus {corpus / 'train.fr'} is missing "
        f"(needed for --resume); copy it back, or write where it is now into {data_json}"
    )
    assert one_line(export_cli.main, [str(run_dir), "--out", str(tmp_path / "x"), "--onnx",
                                      "--int8"]).endswith(
        f"error: the validation corpus {corpus / 'valid.en'} is missing (needed for the int8 "
        f"check of export --int8); copy it back, or write where it is now into {data_json}"
    )
    # Translation reads no corpus.
    assert translate_cli.main([str(run_dir), "--quiet"], stdin=io.BytesIO(b"the queen .\n"),
                              stdout=io.StringIO(), stderr=io.StringIO()) == 0
    (corpus / "test.en").unlink()
    with pytest.raises(RunDirError, match=f"^the test corpus {corpus / 'test.en'} is missing"):
        RunDir(run_dir).split_files("test", needed_for="a test")


def test_paths_inside_the_run_are_stored_relative(tmp_path):
    run = RunDir(tmp_path / "run")
    assert run.stored_path(tmp_path / "run" / "corpus" / "train.en") == "corpus/train.en"
    assert run.stored_path(tmp_path / "elsewhere" / "train.en") == str(
        (tmp_path / "elsewhere" / "train.en").resolve())
