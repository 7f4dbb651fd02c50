"""The evaluation: No-UNK subset, evaluate_run's dict, forced attention, and the CLI."""

import csv
import json
import pathlib
import shutil
import subprocess
import sys

import matplotlib.image
import numpy as np
import pytest

from keras_nmt.evaluation import alignment, plots, scoring
from keras_nmt.text.word import WordCodec
from keras_nmt.decoding.translation import Translation
from keras_nmt.core.constants import RESERVED
from keras_nmt.text.vocab import Vocabulary
from keras_nmt.text.word import tokenize
from support import ROOT, child_env

PROG = "keras-nmt evaluate"


def run_cli_process(*args, timeout=240):
    """``keras-nmt evaluate ARGS`` as a user starts it: a fresh interpreter."""
    return subprocess.run(
        [sys.executable, "-m", "keras_nmt.cli", "evaluate", *map(str, args)],
        capture_output=True, text=True, cwd=ROOT, env=child_env(), timeout=timeout,
    )


@pytest.fixture
def run_cli(cli_runner):
    """``keras-nmt evaluate ARGS`` in this process (the end-to-end test starts one)."""
    return lambda *args: cli_runner("evaluate", *args)


def assert_one_line_error(result, *fragments):
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"{PROG}: error: ")
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0]
    assert result.stdout == ""


def first_test_pairs(corpus, data, count, align=True):
    """The first ``count`` test pairs of ``corpus`` (and their gold alignments) in ``data``:
    a few seconds of decoding for the CLI tests."""
    data.mkdir()
    for name in ("test.en", "test.fr", "test.align") if align else ("test.en", "test.fr"):
        lines = (corpus / name).read_text(encoding="utf-8").splitlines(keepends=True)
        (data / name).write_text("".join(lines[:count]), encoding="utf-8")
    return data


# ---------------------------------------------------------------------------- pieces

SOURCE_VOCAB = Vocabulary(list(RESERVED) + ["the", "cat", "sleeps", "."])
TARGET_VOCAB = Vocabulary(list(RESERVED) + ["le", "chat", "dort", "."])


def test_no_unk_subset_on_a_hand_made_vocabulary():
    sources = [
        "The cat sleeps.",  # "The" (capital) is not in the vocabulary
        "the cat sleeps.",  # all known, reference all known -> kept
        "the cat sleeps .",  # all known, but the reference has "chien" -> dropped
        "the dog sleeps.",  # "dog" unknown in the source -> dropped
        "the cat <unk>",  # a literal <unk> counts as unknown
        "",  # empty on both sides: nothing unknown -> kept
    ]
    references = ["le chat dort.", "le chat dort.", "le chien dort.", "le chat dort.", "le chat", ""]
    source, target = WordCodec(SOURCE_VOCAB, "en"), WordCodec(TARGET_VOCAB, "fr")
    assert scoring.no_unk_indices(sources, references, source, target) == [1, 5]


def test_choose_heatmap_sentences():
    lengths = [3, 12, 40, 8, 30, 31, 9, 0]
    assert plots.choose_heatmap_sentences(lengths, 2) == [1, 3]
    assert plots.choose_heatmap_sentences(lengths, 4) == [1, 3, 4, 6]
    # Too few of 8-30 tokens: the shortest others (never empty ones) fill up.
    assert plots.choose_heatmap_sentences(lengths, 6) == [0, 1, 3, 4, 5, 6]
    assert plots.choose_heatmap_sentences(lengths, 0) == []


def test_run_labels_and_alignment_path():
    assert scoring.run_labels(["runs/search30", "runs/x", "runs/search30"], ["search30", "encdec50", "search30"]) == [
        "search30", "encdec50 (x)", "search30 #2",
    ]
    assert alignment.default_alignment_path("data/test.en") == pathlib.Path("data/test.align")
    assert alignment.default_alignment_path("data/test.en.gz") == pathlib.Path("data/test.align")


class FakeTranslator:
    """Translates by table lookup and records how it was called."""

    src_lang, tgt_lang = "en", "fr"
    source_vocab, target_vocab = SOURCE_VOCAB, TARGET_VOCAB
    source_codec, target_codec = WordCodec(SOURCE_VOCAB, "en"), WordCodec(TARGET_VOCAB, "fr")

    def __init__(self, table, unk_replace=False):
        self.table = table
        self.calls = []
        self.unk_replace = unk_replace  # what translate(unk_replace=None) does

    def translate(self, lines, beam_size=5, alpha=1.0, forbid_unk=False, batch_size=32,
                  with_attention=False, progress=None, shortlist=None, split_sentences=True,
                  unk_replace=None, dictionary=None):
        self.calls.append({"lines": list(lines), "forbid_unk": forbid_unk, "beam_size": beam_size,
                           "split_sentences": split_sentences, "unk_replace": unk_replace})
        out = []
        for line in lines:
            text = self.table[(line, forbid_unk)]
            attention = np.full((len(text.split()) + 1, len(line.split()) + 1), 0.5) if with_attention else None
            out.append(Translation(text, tuple(text.split()), -1.0, tuple(line.split()), attention))
        if progress:
            progress(len(lines))
        return out


def test_evaluate_run_scores_all_and_the_no_unk_subset():
    sources = ["the cat sleeps .", "the dog sleeps ."]
    references = ["le chat dort .", "le chien dort ."]
    translator = FakeTranslator({
        ("the cat sleeps .", False): "le <unk> dort .",
        ("the dog sleeps .", False): "le chien dort .",
        ("the cat sleeps .", True): "le chat dort .",  # with UNK banned: the reference
    })
    result = scoring.evaluate_run(translator, sources, references, beam_size=3, alpha=0.5, keep_attention=[1])
    assert [c["forbid_unk"] for c in translator.calls] == [False, True]
    assert translator.calls[1]["lines"] == ["the cat sleeps ."]
    assert translator.calls[0]["beam_size"] == 3
    assert result["sentences"] == 2 and result["beam_size"] == 3 and result["alpha"] == 0.5
    assert 0 < result["bleu"] < 100 and 0 < result["chrf"] < 100
    assert result["no_unk"] == {"sentences": 1, "bleu": pytest.approx(100.0), "chrf": pytest.approx(100.0),
                                "forbid_unk": True}
    assert result["signatures"]["bleu"].startswith("nrefs:1|") and "tok:13a" in result["signatures"]["bleu"]
    assert result["signatures"]["chrf"].startswith("nrefs:1|")
    assert [row["sentences"] for row in result["bleu_by_length"]] == [2]
    assert result["aer"] is None
    assert result["details"]["hypotheses"] == ["le <unk> dort .", "le chien dort ."]
    assert list(result["details"]["translations"]) == [1]
    json.dumps(scoring.public(result))  # everything but details is JSON


def test_evaluate_run_with_an_empty_no_unk_subset():
    translator = FakeTranslator({("the dog sleeps .", False): "le chien dort ."})
    result = scoring.evaluate_run(translator, ["the dog sleeps ."], ["le chien dort ."], beam_size=1)
    assert result["no_unk"]["sentences"] == 0 and result["no_unk"]["bleu"] is None
    assert result["bleu"] == pytest.approx(100.0)
    assert [call["split_sentences"] for call in translator.calls] == [True, True]
    scoring.evaluate_run(translator, ["the dog sleeps ."], ["le chien dort ."], beam_size=1,
                         split_sentences=False)  # keras-nmt evaluate --no-split-sentences
    assert [call["split_sentences"] for call in translator.calls[2:]] == [False, False]
    # Unasked, the translator's own replacement decides, and the result says which it was.
    assert [call["unk_replace"] for call in translator.calls[:3:2]] == [False, False]
    replacing = FakeTranslator({("the dog sleeps .", False): "le chien dort ."}, unk_replace=True)
    assert scoring.evaluate_run(replacing, ["the dog sleeps ."], ["le chien dort ."],
                                beam_size=1)["unk_replace"] is True
    assert replacing.calls[0]["unk_replace"] is True
    assert scoring.evaluate_run(replacing, ["the dog sleeps ."], ["le chien dort ."], beam_size=1,
                                unk_replace=False)["unk_replace"] is False


def _strict_json(text):
    """json.loads that refuses NaN and Infinity, as strict parsers do."""
    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def test_a_summary_without_long_sentences_is_strict_json(tiny_run, tmp_path):
    """Anki-like corpora have no sentence longer than 30 tokens: the summary says null
    (it said NaN, which is not JSON)."""
    import math

    from keras_nmt.core.atomic import write_json_atomic
    from keras_nmt.corpus.readers import ParallelFiles
    from keras_nmt.decoding.keras_translator import Translator

    (tmp_path / "test.en").write_text("the cat .\nthe small dog is here .\n", encoding="utf-8")
    (tmp_path / "test.fr").write_text("le chat .\nle petit chien est ici .\n", encoding="utf-8")
    report = scoring.held_out_report(Translator.from_run_dir(tiny_run),
                                     ParallelFiles(tmp_path / "test.en", tmp_path / "test.fr"),
                                     beam_size=2, alpha=1.0, quiet=True)
    assert (report["sentences_longer_than_30"], report["bleu_longer_than_30"]) == (0, None)
    # A NaN that reaches the writer (a diverged run's train_nll) is null too.
    write_json_atomic(tmp_path / "summary.json", {"held_out": report, "train_nll": math.nan,
                                                  "scores": [math.inf, -math.inf, 1.5]})
    summary = _strict_json((tmp_path / "summary.json").read_text(encoding="utf-8"))
    assert summary["held_out"]["bleu_longer_than_30"] is None and summary["train_nll"] is None
    assert summary["scores"] == [None, None, 1.5]
    assert summary["held_out"]["sentences"] == 2


def test_forced_attention_single_model_and_ensemble(tiny_run, tiny_corpus, tmp_path):
    from keras_nmt.decoding.keras_translator import Translator

    sources = (tiny_corpus / "test.en").read_text(encoding="utf-8").splitlines()[:3] + ["", "a b"]
    references = (tiny_corpus / "test.fr").read_text(encoding="utf-8").splitlines()[:3] + ["x", ""]
    single = Translator.from_run_dir(tiny_run)
    weights = alignment.forced_attention(single, sources, references, batch_size=2)
    for source, reference, w in zip(sources[:3], references[:3], weights):
        assert w.shape == (len(tokenize(reference, "fr")) + 1, len(tokenize(source, "en")) + 1)
        np.testing.assert_allclose(w.sum(axis=1), 1.0, atol=1e-4)  # padding gets no weight
    assert weights[3] is None and weights[4] is None
    # An ensemble of a run with its copy attends exactly as the run does.
    copy = tmp_path / "copy"
    shutil.copytree(tiny_run, copy, ignore=shutil.ignore_patterns("tensorboard", "corpus"))
    ensemble = Translator.from_run_dirs([tiny_run, copy])
    for a, b in zip(weights, alignment.forced_attention(ensemble, sources, references)):
        if a is None:
            assert b is None
        else:
            np.testing.assert_allclose(a, b, atol=1e-5)


# ---------------------------------------------------------------------------- command line

def test_cli_end_to_end_two_runs_plots_and_json(tiny_run, tiny_corpus, tmp_path):
    # The first 12 test pairs (a few seconds of decoding), gold alignments beside them.
    data = first_test_pairs(tiny_corpus, tmp_path / "data", 12)
    plots_dir = tmp_path / "plots"
    result = run_cli_process(
        tiny_run, tiny_run, "--src", data / "test.en", "--ref", data / "test.fr",
        "--plots", plots_dir, "--json", "--heatmaps", "1", "--beam", "2",
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    output = json.loads(result.stdout)
    assert output["align"] == str(data / "test.align")  # found next to --src
    assert output["sentences"] == 12 and len(output["runs"]) == 2
    run = output["runs"][0]
    assert [r["label"] for r in output["runs"]] == ["search30", "search30 #2"]
    assert 0 <= run["bleu"] <= 100 and 0 <= run["chrf"] <= 100
    assert run["signatures"]["bleu"].startswith("nrefs:1|") and run["signatures"]["chrf"].startswith("nrefs:1|")
    assert 0 < run["no_unk"]["sentences"] <= 12 and run["no_unk"]["forbid_unk"] is True
    assert run["beam_size"] == 2
    assert 0 <= run["aer"]["aer"] <= 1 and run["aer"]["sentences"] == 12
    assert run["aer"]["sure_links"] == sum(
        len(line.split()) for line in (data / "test.align").read_text().splitlines()
    )
    assert run["aer"]["predicted_links"] == sum(
        len(tokenize(line, "fr")) for line in (data / "test.fr").read_text(encoding="utf-8").splitlines()
    )  # one link per reference token
    # The same model twice: the same numbers.
    assert output["runs"][1]["bleu"] == run["bleu"] and output["runs"][1]["aer"] == run["aer"]
    assert json.loads((plots_dir / "evaluation.json").read_text(encoding="utf-8")) == output

    # The readable report went to stderr (stdout holds only JSON), with the subset size.
    assert f"No UNK   {run['no_unk']['sentences']:>9}" in result.stderr
    assert f"AER {run['aer']['aer']:.3f}" in result.stderr
    assert "translating" in result.stderr  # progress

    # Fig. 2: one curve per run, the CSV matching the JSON.
    png = plots_dir / "fig2_bleu_by_length.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert matplotlib.image.imread(png).shape[1] >= 400
    with open(plots_dir / "fig2_bleu_by_length.csv", encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    assert sorted({r["model"] for r in rows}) == ["search30", "search30 #2"]
    first = [r for r in rows if r["model"] == "search30"]
    assert [int(r["sentences"]) for r in first] == [b["sentences"] for b in run["bleu_by_length"]]
    assert [float(r["bleu"]) for r in first] == pytest.approx([b["bleu"] for b in run["bleu_by_length"]], abs=1e-4)

    # Fig. 3: one heat map per run, with its numbers.
    fig3 = output["files"]["fig3"]
    assert [(e["run"], e["line"]) for e in fig3] == [("search30", 4), ("search30 #2", 4)]
    for entry in fig3:
        assert pathlib.Path(entry["png"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        data = json.loads(pathlib.Path(entry["data"]).read_text(encoding="utf-8"))
        assert np.asarray(data["attention"]).shape == (len(data["output_tokens"]), len(data["source_tokens"]))
        assert 8 <= len(data["source_tokens"]) - 1 <= 30

    # Table 2: the file is what was printed, with the training columns from summary.json.
    table = (plots_dir / "table2.md").read_text(encoding="utf-8")
    assert table in result.stderr
    summary = json.loads((tiny_run / "summary.json").read_text(encoding="utf-8"))
    assert f"| search30 | {summary['updates']} | {summary['epochs']:.2f} |" in table
    assert f"| {run['bleu']:.2f} | " in table
    assert len(output["table2"]) == 2

    # Predicted alignments and translations, one line per sentence.
    assert len((plots_dir / "alignments_search30.align").read_text().splitlines()) == 12
    assert len((plots_dir / "translations_search30.txt").read_text(encoding="utf-8").splitlines()) == 12


@pytest.fixture()
def files(tmp_path, tiny_corpus):
    src = tmp_path / "test.en"
    ref = tmp_path / "test.fr"
    shutil.copy(tiny_corpus / "test.en", src)
    shutil.copy(tiny_corpus / "test.fr", ref)
    return src, ref


def test_cli_line_count_mismatch_names_both_files(run_cli, tiny_run, files):
    src, ref = files
    ref.write_text("".join(ref.read_text(encoding="utf-8").splitlines(keepends=True)[:-3]), encoding="utf-8")
    result = run_cli(tiny_run, "--src", src, "--ref", ref)
    assert_one_line_error(result, str(src), str(ref), "40", "37")


def test_cli_missing_files_and_bad_run_dirs(run_cli, tiny_run, files, tmp_path):
    src, ref = files
    assert_one_line_error(run_cli(tiny_run, "--src", tmp_path / "nope.en", "--ref", ref), "--src", "nope.en")
    assert_one_line_error(run_cli(tiny_run, "--src", src, "--ref", tmp_path / "nope.fr"), "--ref", "nope.fr")
    assert_one_line_error(run_cli(tmp_path / "no-run", "--src", src, "--ref", ref), "no-run")
    # A directory with a configuration but no weights.
    empty = tmp_path / "untrained"
    empty.mkdir()
    for name in ("config.json", "data.json", "vocab.en.txt", "vocab.fr.txt"):
        shutil.copy(tiny_run / name, empty / name)
    assert_one_line_error(run_cli(empty, "--src", src, "--ref", ref), "untrained", "no trained weights")
    (empty / "config.json").unlink()
    assert_one_line_error(run_cli(empty, "--src", src, "--ref", ref), "config.json")


def test_cli_alignment_and_option_errors(run_cli, tiny_run, files, tmp_path):
    src, ref = files
    assert_one_line_error(
        run_cli(tiny_run, "--src", src, "--ref", ref, "--gold-align", tmp_path / "none.align"), "none.align"
    )
    short = tmp_path / "short.align"
    short.write_text("0-0\n", encoding="utf-8")
    assert_one_line_error(run_cli(tiny_run, "--src", src, "--ref", ref, "--gold-align", short), "short.align", "1", "40")
    far = tmp_path / "far.align"
    far.write_text("0-999\n" * 40, encoding="utf-8")
    assert_one_line_error(run_cli(tiny_run, "--src", src, "--ref", ref, "--gold-align", far), "line 1", "target token 999")
    assert_one_line_error(
        run_cli(tiny_run, "--src", src, "--ref", ref, "--plots", tmp_path / "p", "--sentences", "1,99"), "99"
    )
    assert_one_line_error(run_cli(tiny_run, "--src", src, "--ref", ref, "--ensemble"), "--ensemble")
    assert_one_line_error(run_cli(tiny_run, "--src", src, "--ref", ref, "--beam", "0"), "--beam")


@pytest.mark.end_to_end
def test_cli_encdec_has_no_alignments_or_heat_maps(run_cli, tiny_corpus, tmp_path):
    """RNNencdec has no attention: evaluate scores it but reports no AER (the .align file
    beside --src is skipped) and draws no Fig. 3."""
    from keras_nmt.runner import experiment
    from keras_nmt.runner.train_options import TrainOptions
    from support import TINY_SETTINGS

    run_dir = tmp_path / "encdec30"
    experiment.train(TrainOptions(
        variant="encdec30", data=str(tiny_corpus), out=str(run_dir), max_steps=2,
        overrides=dict(TINY_SETTINGS), quiet=True,
    ))
    data = first_test_pairs(tiny_corpus, tmp_path / "data", 6)
    plots_dir = tmp_path / "plots"
    result = run_cli(run_dir, "--src", data / "test.en", "--ref", data / "test.fr",
                     "--plots", plots_dir, "--json", "--beam", "1")
    assert result.returncode == 0, result.stderr
    run = json.loads(result.stdout)["runs"][0]
    assert run["architecture"] == "encdec"
    assert run["aer"] is None and "AER" not in result.stderr
    assert 0 <= run["bleu"] <= 100
    assert not list(plots_dir.glob("fig3_*"))
    assert (plots_dir / "fig2_bleu_by_length.png").is_file()


def _refused(run_cli, args):
    """(exit status, stderr) of ``keras-nmt evaluate ARGS``, which must write no output."""
    ran = run_cli(*args)
    assert ran.stdout == ""
    return ran.returncode, ran.stderr


@pytest.mark.parametrize("args, expected", [
    (["--heatmaps", "2"], "--heatmaps applies with --plots only"),
    (["--sentences", "1,2"], "--sentences applies with --plots only"),
    (["--tune-beams", "1,2"], "--tune-beams applies with --tune only"),
    (["--tune-alphas", "0.5", "--plots", "p"], "--tune-alphas applies with --tune only"),
    (["--plots", "p", "--heatmaps", "2", "--sentences", "1"],
     "argument --sentences: not allowed with argument --heatmaps"),
])
def test_cli_options_that_would_do_nothing_are_refused(run_cli, tiny_run, files, tmp_path, monkeypatch,
                                                        args, expected):
    monkeypatch.chdir(tmp_path)
    src, ref = files
    status, stderr = _refused(run_cli, [tiny_run, "--src", src, "--ref", ref, *args])
    assert status == 2 and stderr.startswith(f"{PROG}: error: {expected}"), stderr
    assert stderr.count("\n") == 1 and not (tmp_path / "p").exists()


@pytest.mark.parametrize("option", [["--heatmaps", "2"], ["--sentences", "1"], ["--gold-align", "a"]])
def test_cli_attention_options_are_refused_for_rnnencdec(run_cli, encdec_labelled_run, files, tmp_path,
                                                         option):
    src, ref = files
    plots_dir = tmp_path / "plots"
    status, stderr = _refused(run_cli, [encdec_labelled_run, "--src", src, "--ref", ref,
                                        "--plots", plots_dir, *option])
    assert stderr == (f"{PROG}: error: {option[0]} reads the attention weights, and an "
                      "RNNencdec model (encdec30) has none\n")
    assert status == 2 and not plots_dir.exists()


def test_cli_ensemble_of_two_copies_scores_like_one(run_cli, tiny_run, tiny_corpus, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(tiny_run, copy)
    data = first_test_pairs(tiny_corpus, tmp_path / "data", 6, align=False)
    result = run_cli(tiny_run, copy, "--src", data / "test.en", "--ref", data / "test.fr",
                     "--json", "--beam", "2", "--ensemble")
    assert result.returncode == 0, result.stderr
    runs = json.loads(result.stdout)["runs"]
    assert len(runs) == 3 and runs[2]["variant"] == "ensemble"
    assert runs[2]["run_dirs"] == [str(tiny_run), str(copy)]
    # Averaging two identical distributions changes nothing (test_ensemble.py checks the
    # step's probabilities exactly). Up to rounding: the barely trained model repeats "."
    # and hypotheses of different lengths score the same to 1e-6 at alpha 1, so the
    # mixture's rounding may pick another of them for a sentence or two.
    assert runs[0]["bleu"] == pytest.approx(runs[1]["bleu"])
    assert runs[2]["bleu"] == pytest.approx(runs[0]["bleu"], abs=0.01)
    assert runs[2]["chrf"] == pytest.approx(runs[0]["chrf"], abs=0.5)


def test_tune_picks_the_best_pair_stores_it_and_the_commands_use_it(tiny_run, tiny_corpus, tmp_path,
                                                                    capsys):
    import io
    import shutil

    from keras_nmt.cli import evaluate as evaluate_cli
    from keras_nmt.cli import export as export_cli
    from keras_nmt.cli import translate as translate_cli
    from keras_nmt.rundir.run_directory import RunDir
    from keras_nmt.decoding.keras_translator import Translator

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    src, ref = tiny_corpus / "valid.en", tiny_corpus / "valid.fr"
    assert RunDir(run).search_settings()["tuned"] is False
    assert evaluate_cli.main([str(run), "--src", str(src), "--ref", str(ref), "--tune",
                              "--tune-beams", "1,3", "--tune-alphas", "0,1.5", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)["runs"][0]
    tuned = json.loads((run / "search.json").read_text())
    assert len(tuned["grid"]) == 4 and tuned["sentences"] == 30
    best = max(row["bleu"] for row in tuned["grid"])
    assert tuned["bleu"] == best
    assert {(r["beam_size"], r["alpha"]) for r in tuned["grid"]} == {(1, 0.0), (1, 1.5), (3, 0.0), (3, 1.5)}
    # The evaluation after tuning decodes with the tuned pair, and scores what tuning saw.
    assert (result["beam_size"], result["alpha"]) == (tuned["beam_size"], tuned["alpha"])
    assert result["bleu"] == pytest.approx(tuned["bleu"])
    # translate and export default to the tuned pair.
    lines = src.read_text(encoding="utf-8").splitlines()
    assert translate_cli.main([str(run), "--quiet"],
                              stdin=io.BytesIO(("\n".join(lines) + "\n").encode())) == 0
    expected = Translator.from_run_dir(run).translate(lines, beam_size=tuned["beam_size"],
                                                      alpha=tuned["alpha"])
    assert capsys.readouterr().out.splitlines() == [t.text for t in expected]
    assert export_cli.main([str(run), "--out", str(tmp_path / "export")]) == 0
    serving = (tmp_path / "export" / "SERVING.md").read_text(encoding="utf-8")
    assert f"beam {tuned['beam_size']}, alpha {tuned['alpha']:g}" in serving
    # A damaged search.json is a one-line error, not a silent default.
    (run / "search.json").write_text("{")
    assert translate_cli.main([str(run)], stdin=io.BytesIO(b"a\n")) == 2
    assert "search.json" in capsys.readouterr().err
