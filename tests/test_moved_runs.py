"""A run directory can be moved or copied: data.json names the files inside it relative
to it, and a corpus outside it that is gone is a one-line error naming the file."""

import json
import shutil

import pytest

from keras_nmt.runner import experiment
from keras_nmt.corpus import builtin
from keras_nmt.core.errors import RunDirError
from keras_nmt.rundir.run_directory import RunDir
from keras_nmt.runner.train_options import TrainOptions
from support import TINY_SETTINGS

# The built-in corpus made small: its default 30,000 pairs take minutes to train and test on.
TINY_BUILTIN = builtin.BuiltinCorpusSpec(seed=7, train_size=200, valid_size=8, test_size=8,
                                         max_source_tokens=30)


@pytest.mark.end_to_end
def test_a_copied_built_in_run_resumes_builds_its_lexicon_exports_and_translates(
        cli_runner, tmp_path, monkeypatch):
    monkeypatch.setattr(builtin, "BuiltinCorpusSpec", lambda: TINY_BUILTIN)
    made = tmp_path / "gpu-box" / "run"
    experiment.train(TrainOptions(
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

    resumed = cli_runner("train", "--variant", "search30", "--out", moved, "--resume",
                         "--max-steps", 3, "--quiet", "--no-lexicon")
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads((moved / "summary.json").read_text())
    assert summary["updates"] == 3 and summary["held_out"]["sentences"] == 8

    lexicon = cli_runner("lexicon", moved, "--quiet")
    assert lexicon.returncode == 0, lexicon.stderr
    assert json.loads(lexicon.stdout)["pairs"] > 0

    # A SavedModel with vocabulary selection (the lexicon just built). The ONNX and int8
    # files are made of the same model (tiny_selecting_export makes them); what --int8
    # reads of the run is its validation split, found inside the moved run:
    exported = cli_runner("export", moved, "--out", tmp_path / "export", "--beam", 2,
                          "--shortlist", "5,2")
    assert exported.returncode == 0, exported.stderr
    assert (tmp_path / "export" / "nmt" / "1" / "saved_model.pb").is_file()
    files = RunDir(moved).split_files("valid", needed_for="the int8 check of export --int8")
    assert (files.source, files.target) == (moved / "corpus" / "valid.en",
                                            moved / "corpus" / "valid.fr")

    translated = cli_runner("translate", moved, "--quiet", stdin=b"the queen .\n\n")
    assert translated.returncode == 0, translated.stderr
    assert len(translated.stdout.splitlines()) == 2

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


def test_a_corpus_left_behind_is_named_in_one_line(cli_runner, tiny_run, tiny_corpus, tmp_path):
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

    def one_line(*args):
        result = cli_runner(*args)
        assert result.returncode == 2, result.stderr
        [line] = result.stderr.strip().splitlines()
        return line

    data_json = run_dir / "data.json"
    # The lexical table reads the prepared split, not the text: it needs no corpus.
    assert cli_runner("lexicon", run_dir, "--quiet").returncode == 0
    shutil.rmtree(run_dir / "prepared")  # without it, the text is needed
    assert one_line("lexicon", run_dir, "--quiet") == (
        f"keras-nmt lexicon: error: the training corpus {corpus / 'train.fr'} is missing "
        f"(needed for the unknown-word dictionary and lexical table); copy it back, or write "
        f"where it is now into {data_json}"
    )
    assert one_line("train", "--variant", "search30", "--out", run_dir, "--resume",
                    "--max-steps", 12, "--quiet") == (
        f"keras-nmt train: error: the training corpus {corpus / 'train.fr'} is missing "
        f"(needed for --resume); copy it back, or write where it is now into {data_json}"
    )
    assert one_line("export", run_dir, "--out", tmp_path / "x", "--onnx", "--int8").endswith(
        f"error: the validation corpus {corpus / 'valid.en'} is missing (needed for the int8 "
        f"check of export --int8); copy it back, or write where it is now into {data_json}"
    )
    # Translation reads no corpus.
    assert cli_runner("translate", run_dir, "--quiet", stdin=b"the queen .\n").returncode == 0
    (corpus / "test.en").unlink()
    with pytest.raises(RunDirError, match=f"^the test corpus {corpus / 'test.en'} is missing"):
        RunDir(run_dir).split_files("test", needed_for="a test")


def test_paths_inside_the_run_are_stored_relative(tmp_path):
    run = RunDir(tmp_path / "run")
    assert run.stored_path(tmp_path / "run" / "corpus" / "train.en") == "corpus/train.en"
    assert run.stored_path(tmp_path / "elsewhere" / "train.en") == str(
        (tmp_path / "elsewhere" / "train.en").resolve())
