"""The development split cut once into a half that selects and a half that is reported."""

import json
import shutil

import pytest

from keras_nmt.corpus import heldout
from keras_nmt.corpus.readers import ParallelFiles


@pytest.mark.parametrize("line, half", [
    ("The man is here.", heldout.REPORT),  # crc32 2399608739, odd
    ("I am cold.", heldout.REPORT),  # 3540333929
    ("Go.", heldout.SELECT),  # 3022469360, even
    ("  Go.  ", heldout.SELECT),  # the same line once stripped
    ("Ça va ?", heldout.SELECT),  # 4201705458: UTF-8 bytes
])
def test_half_of_known_lines(line, half):
    assert heldout.half_of(line) == half


def _write(directory, sources, targets):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "valid.en").write_text("".join(s + "\n" for s in sources), encoding="utf-8")
    (directory / "valid.fr").write_text("".join(t + "\n" for t in targets), encoding="utf-8")
    return ParallelFiles(directory / "valid.en", directory / "valid.fr")


def test_halves_partition_the_pairs_in_order_and_keep_duplicates_together(tmp_path):
    sources = [f"Sentence number {i}." for i in range(200)] + ["The man is here."] * 3
    targets = [f"Phrase numéro {i}." for i in range(200)] + ["L'homme est ici.", "Il est là.",
                                                             "L'homme est là."]
    halves = heldout.write_halves(_write(tmp_path, sources, targets), tmp_path / "h", "en", "fr")
    assert halves is not None
    pairs = {half: list(files.pairs()) for half, files in halves.items()}
    assert sorted(pairs[heldout.SELECT] + pairs[heldout.REPORT]) == sorted(zip(sources, targets))
    for half, got in pairs.items():
        assert got == [p for p in zip(sources, targets) if heldout.half_of(p[0]) == half]
    # The three identical sources are all reported (the line's CRC-32 is odd).
    assert [t for s, t in pairs[heldout.REPORT] if s == "The man is here."] == targets[200:]
    # About half each way.
    assert 80 <= len(pairs[heldout.REPORT]) <= 123
    assert sorted(p.name for p in (tmp_path / "h").iterdir()) == [
        "report.en", "report.fr", "select.en", "select.fr"]


def test_a_split_too_small_for_two_halves_writes_nothing(tmp_path):
    files = _write(tmp_path, ["Go.", "Go."], ["Va.", "Allez."])
    assert heldout.write_halves(files, tmp_path / "h", "en", "fr") is None
    assert not (tmp_path / "h").exists()


@pytest.mark.end_to_end
def test_training_without_a_test_split_selects_on_one_half_and_reports_the_other(
        tiny_corpus, tiny_settings, tmp_path, capsys, cli_runner):
    from keras_nmt.runner import experiment
    from keras_nmt.runner.train_options import TrainOptions

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name in ("train.en", "train.fr", "valid.en", "valid.fr"):
        shutil.copy(tiny_corpus / name, corpus / name)
    out = tmp_path / "run"
    summary = experiment.train(TrainOptions(
        variant="search30", data=str(corpus), out=str(out), max_steps=1, lexicon=False,
        overrides=tiny_settings,
    ))
    assert "keras-nmt evaluate --half select|report scores a run on either" in capsys.readouterr().err
    info = json.loads((out / "data.json").read_text())
    assert info["splits"]["valid"] == {"source": "heldout/select.en", "target": "heldout/select.fr"}
    assert info["splits"]["test"] == {"source": "heldout/report.en", "target": "heldout/report.fr"}
    assert info["development"]["halves"] == heldout.RULE
    sources = (corpus / "valid.en").read_text(encoding="utf-8").splitlines()
    reported = [s for s in sources if heldout.half_of(s) == heldout.REPORT]
    assert (out / "heldout" / "report.en").read_text(encoding="utf-8").splitlines() == reported
    assert summary["held_out"]["split"] == "report" and summary["warnings"] == []
    assert summary["held_out"]["sentences"] == len(reported) < len(sources)

    # keras-nmt evaluate --half reads the run's own halves; the reported one chooses nothing.
    def run_evaluate(*args):
        return cli_runner("evaluate", *args, "--beam", "1", "--json", "--quiet")

    ran = run_evaluate(out, "--half", "select")
    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout)
    assert result["src"] == str(out / "heldout" / "select.en")
    assert result["runs"][0]["sentences"] == len(sources) - len(reported)
    for args, message in (
            (["--half", "report", "--tune"], "--tune chooses, and the reported half must choose nothing"),
            (["--half", "select", "--src", "x.en"], "--half reads the run's own held-out half"),
            (["--src", "x.en"], "give --src and --ref, or --half select|report")):
        ran = run_evaluate(out, *args)
        assert ran.returncode == 2 and len(ran.stderr.splitlines()) == 1 and message in ran.stderr, ran.stderr
    other = tmp_path / "other"
    shutil.copytree(out, other)
    (other / "heldout" / "select.en").write_text("Another sentence .\n", encoding="utf-8")
    ran = run_evaluate(out, other, "--half", "select")
    assert ran.returncode != 0 and f"{other} holds another half than {out}" in ran.stderr, ran.stderr
    shutil.rmtree(other / "heldout")
    ran = run_evaluate(other, "--half", "report")
    assert ran.returncode != 0 and f"{other} has no held-out halves" in ran.stderr, ran.stderr


@pytest.mark.end_to_end
def test_a_development_split_too_small_to_cut_is_used_whole_with_a_warning(
        tiny_corpus, tiny_settings, tmp_path, capsys):
    """No test split and a valid split of two lines in one half: it both selects and is
    reported. Training says so in one line (even with --quiet) and summary.json records it."""
    from keras_nmt.runner import experiment
    from keras_nmt.runner.train_options import TrainOptions

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name in ("train.en", "train.fr"):
        shutil.copy(tiny_corpus / name, corpus / name)
    (corpus / "valid.en").write_text("Go.\nGo.\n", encoding="utf-8")
    (corpus / "valid.fr").write_text("Va.\nAllez.\n", encoding="utf-8")
    out = tmp_path / "run"
    summary = experiment.train(TrainOptions(
        variant="search30", data=str(corpus), out=str(out), max_steps=1, lexicon=False,
        quiet=True, overrides=tiny_settings,
    ))
    warning = (f"no test split, and the development split {corpus / 'valid.en'} was too small "
               "to cut in two: it both selects the checkpoints and is reported, so the "
               "held-out scores are optimistic")
    assert capsys.readouterr().err.splitlines() == [f"warning: {warning}"]
    assert summary["warnings"] == [warning]
    assert json.loads((out / "summary.json").read_text())["warnings"] == [warning]
    assert summary["held_out"]["split"] == "valid" and summary["held_out"]["sentences"] == 2
    assert not (out / "heldout").exists()
