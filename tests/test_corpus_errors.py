"""Corpus failure modes not covered by test_readers.py / test_cli_train.py: errors in the
validation split, a training split with nothing usable, a run directory that existed
before, CRLF files. Each error is one line and leaves the run directory as it was."""

from pathlib import Path

import pytest

from keras_nmt.runner import run_data
from keras_nmt.rundir.run_directory import RunDir
from keras_nmt.runner.train_options import TrainOptions, new_run_config

from support import tiny_args


def corpus(directory: Path, train_en: bytes, train_fr: bytes, valid_en=b"a\n", valid_fr=b"A\n"):
    directory.mkdir()
    for name, content in [("train.en", train_en), ("train.fr", train_fr),
                          ("valid.en", valid_en), ("valid.fr", valid_fr)]:
        (directory / name).write_bytes(content)
    return directory


@pytest.mark.parametrize("files, out_exists, expected", [
    ({"valid_fr": b"A\nB\n"}, False, "valid.en has 1 lines"),
    ({"valid_en": b"\xff\n"}, True, "valid.en: line 1 is not UTF-8 text"),
    ({"train_en": b"\n  \n\t\n", "train_fr": b"A\n\nC\n"}, False, "no usable training pair"),
])
def test_corpus_error_is_one_line_and_leaves_the_run_directory_as_it_was(
    cli_runner, tmp_path, files, out_exists, expected
):
    data = corpus(tmp_path / "data", **{"train_en": b"a\nb\n", "train_fr": b"A\nB\n", **files})
    out = tmp_path / "run"
    if out_exists:
        out.mkdir()
        (out / "notes.txt").write_text("mine")
    result = cli_runner("train", "--data", data, "--out", out, *tiny_args(), prog="train.py")
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("train.py")]
    assert len(errors) == 1 and expected in errors[0], result.stderr
    assert "Traceback" not in result.stderr
    if out_exists:
        assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    else:
        assert not out.exists()


def test_crlf_corpus_gives_the_lf_vocabularies(tmp_path):
    lines_en, lines_fr = ["the man .", "a dog", "the dog ."], ["l' homme .", "un chien", "le chien ."]
    vocabularies = []
    for newline in ("\n", "\r\n"):
        name = "crlf" if newline == "\r\n" else "lf"
        data = corpus(
            tmp_path / name,
            newline.join(lines_en).encode() + newline.encode(),
            newline.join(lines_fr).encode() + newline.encode(),
            valid_en=f"a{newline}".encode(), valid_fr=f"A{newline}".encode(),
        )
        run = RunDir(tmp_path / f"run-{name}")
        options = TrainOptions(variant="search30", data=str(data),
                               out=str(run.path)).for_new_run()
        run_data.prepare(options, new_run_config(options), run, log=lambda text: None)
        vocabularies.append([v.tokens for v in run.load_vocabularies()])
    assert vocabularies[0] == vocabularies[1]
    assert not any("\r" in token for vocab in vocabularies[1] for token in vocab)
