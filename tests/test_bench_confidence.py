"""bench.confidence_quality: its statistics against values worked by hand, the fit of a
combination, and one run on the tiny trained run in the harness's schema."""

import json
import math

import numpy as np
import pytest

from support import edit_json
from bench import confidence_quality as bench
from keras_nmt.decoding.confidence import Confidence
from keras_nmt.decoding.translation import Translation

# The benchmarks' own tests: left out of the product's run, run with -m bench (CI does).
pytestmark = pytest.mark.bench


def test_ranks_give_ties_their_mean_rank_and_spearman_is_the_ranks_pearson():
    np.testing.assert_array_equal(bench.ranks([3.0, 1.0, 3.0, 2.0]), [3.5, 1.0, 3.5, 2.0])
    assert bench.spearman([1, 2, 3, 4], [10, 20, 30, 1000]) == pytest.approx(1.0)
    assert bench.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # d = (0, 0, 1, -1): 1 - 6 * 2 / (4 * 15)
    assert bench.spearman([1, 2, 3, 4], [1, 2, 4, 3]) == pytest.approx(0.8)
    assert bench.pearson([1, 2, 3], [2, 4, 7]) == pytest.approx(0.9933, abs=1e-4)


def test_auroc_counts_the_pairs_a_score_orders_and_ties_as_half():
    assert bench.auroc([0.9, 0.8, 0.1, 0.2], [True, True, False, False]) == 1.0
    # Of the 4 (positive, negative) pairs only (0.8, 0.2) is in order.
    assert bench.auroc([0.1, 0.8, 0.9, 0.2], [True, True, False, False]) == 0.25
    assert bench.auroc([0.5, 0.5], [True, False]) == 0.5
    assert math.isnan(bench.auroc([0.5], [True]))


def test_flagging_is_the_worst_deciles_share_among_the_least_confident():
    quality = np.arange(20.0)  # the worst decile: sentences 0 and 1
    confidence = np.arange(20.0)
    confidence[0] = 100.0  # the worst sentence looks sure: 1 and 2 are flagged
    found = bench.flagging(confidence, quality)
    assert found == {"flagged": 2, "worst": 2, "caught": 1, "recall": 0.5}


def test_reliability_bins_hold_their_sentences_means():
    rows = bench.reliability([0.05, 0.15, 0.12, 1.0], [10.0, 30.0, 50.0, 90.0])
    assert [(r["low"], r["sentences"]) for r in rows] == [(0.0, 1), (0.1, 2), (0.9, 1)]
    assert rows[1]["confidence"] == pytest.approx(0.135) and rows[1]["chrf"] == 40.0


def test_words_are_compared_case_folded_without_their_punctuation():
    assert bench.reference_words("L’homme est là. Oui !") == {"l'homme", "est", "là", "oui", "!"}
    t = Translation("l'Homme est ici.", ("l'", "Homme", "est", "ici", "."), confidence=Confidence(
        -0.5, 6, ("l'Homme", "est", "ici."), (0.9, 0.8, 0.2)))
    scores, missing = bench.word_rows([t, Translation("")], ["L’homme est là."])
    assert scores == pytest.approx([0.1, 0.2, 0.8]) and missing == [False, False, True]


def test_nbest_agreement_is_the_others_mean_token_f1_with_the_best():
    best = Translation("a b", ("a", "b"))
    other = Translation("a c", ("a", "c"))
    same = Translation("b a", ("b", "a"))
    joined = Translation("a b", ("a", "b"), alternatives=(best, other, same))
    assert bench.nbest_agreement(joined) == pytest.approx((0.5 + 1.0) / 2)
    assert bench.nbest_agreement(best) == 1.0


def test_a_fitted_combination_recovers_its_weights_and_keeps_them_nonnegative():
    rng = np.random.default_rng(0)
    table = rng.standard_normal((4000, 3))
    target = 1 / (1 + np.exp(-(1.5 * table[:, 0] + 0.5 * table[:, 1] - 0.3)))
    fitted = bench.fit_combination(table, target, ["good", "also good", "noise"])
    np.testing.assert_allclose(fitted.weights[:2], [1.5 * table[:, 0].std(),
                                                    0.5 * table[:, 1].std()], rtol=0.05)
    assert fitted.weights[2] < 0.05
    # A signal that falls as the target rises gets no weight, never a negative one.
    flipped = table * [1, -1, 1]
    assert bench.fit_combination(flipped, target, ["good", "misleading", "noise"]).weights[1] == 0
    again = bench.Combination.from_json(json.loads(json.dumps(fitted.to_json())))
    np.testing.assert_allclose(again.apply(table[:5]), fitted.apply(table[:5]))
    assert np.all(np.diff(fitted.apply(np.outer(np.linspace(-2, 2, 9), [1, 0, 0]))) > 0)


def test_the_benchmark_on_the_tiny_run(tiny_run, tiny_corpus, tmp_path, capsys):
    fitted, out, figure = tmp_path / "fit.json", tmp_path / "report.json", tmp_path / "r.png"
    common = [str(tiny_run), "--src", str(tiny_corpus / "valid.en"), "--ref",
              str(tiny_corpus / "valid.fr"), "--beam", "2", "--matmul-rounds", "1"]
    assert bench.main([*common, "--fit", "--json", str(fitted)]) == 0
    assert bench.main([*common, "--combination", str(fitted), "--figure", str(figure),
                       "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["benchmark"] == "confidence_quality" and report["matmul_gflops"] > 0
    results = report["results"]
    assert results["sentences"] == results["scored"] == 30
    # The API's confidence is the plain formula: exp(mean token log-probability).
    assert results["confidence"]["spearman"] == pytest.approx(results["baseline"]["spearman"])
    assert results["signals"]["mean_logprob"]["spearman"] == pytest.approx(
        results["confidence"]["spearman"])
    assert set(results["signals"]) == {"mean_logprob", "min_logprob", "neg_mean_entropy",
                                       "neg_coverage_gap", "nbest_agreement"}
    assert results["confidence"]["flagging"]["flagged"] == 3
    assert sum(row["sentences"] for row in results["reliability"]) == 30
    words = results["words"]
    assert words["words"] >= 30  # every sentence decoded to at least a word
    if 0 < words["not_in_reference"] < words["words"]:
        assert 0 <= words["auroc"] <= 1
    else:  # the barely trained model's words all miss (or all hit): no AUROC, null not NaN
        assert words["auroc"] is None
    given = json.loads(fitted.read_text())["results"]["fit"]
    assert -1 <= given["cross_validated_spearman"] <= 1
    assert results["combination"]["from"] == str(fitted)
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "worst-decile recall" in capsys.readouterr().out


def test_the_benchmark_on_the_tiny_export(tiny_run, tiny_export, tiny_corpus, tmp_path):
    """--export: the confidence the ONNX search gives (a server's), alone."""
    out = tmp_path / "report.json"
    common = [str(tiny_run), "--src", str(tiny_corpus / "valid.en"), "--ref",
              str(tiny_corpus / "valid.fr"), "--beam", "2", "--matmul-rounds", "1"]
    assert bench.main([*common, "--export", str(tiny_export), "--json", str(out)]) == 0
    results = json.loads(out.read_text())["results"]
    assert results["sentences"] == results["scored"] == 30 and results["signals"] == {}
    assert results["confidence"]["spearman"] == pytest.approx(results["baseline"]["spearman"])
    assert sum(row["sentences"] for row in results["reliability"]) == 30
    with pytest.raises(SystemExit):
        bench.main([*common, "--export", str(tiny_export), "--fit"])
    with pytest.raises(SystemExit):
        bench.main([*common, "--int8"])
    with pytest.raises(SystemExit):
        bench.main([*common, "--export", str(tiny_export), "--dropout-samples", "2"])


def test_the_benchmark_with_dropout_samples(run_copy, tiny_corpus, tmp_path):
    """--dropout-samples: the API's figures from the passes with dropout on, beside the
    signals of the plain pass (its mean log-probability now another figure)."""
    edit_json(run_copy / "config.json", dropout=0.5)
    out = tmp_path / "report.json"
    assert bench.main([str(run_copy), "--src", str(tiny_corpus / "valid.en"), "--ref",
                       str(tiny_corpus / "valid.fr"), "--beam", "2", "--matmul-rounds", "1",
                       "--dropout-samples", "3", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["settings"]["dropout_samples"] == 3
    results = report["results"]
    assert results["scored"] == 30
    assert results["confidence"]["pearson"] != pytest.approx(
        results["signals"]["mean_logprob"]["pearson"], abs=1e-6)
