"""Smoke tests of the benchmarks of bench/ and the experiments of experiments/: each runs
once on the tiny fixtures with the smallest sizes, and its JSON report must hold sane
figures in the harness's one schema."""

import importlib
import json
import math
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from support import ROOT, TINY_SETTINGS
from keras_nmt.decoding.onnx_translator import OnnxTranslator

# The benchmarks' own tests: left out of the product's run, run with -m bench (CI does).
pytestmark = pytest.mark.bench

# Trains in fresh interpreters, or trains and scores two models (~15-30 s each).
SLOW = pytest.mark.slow


REPORT_KEYS = ["benchmark", "command", "started", "seconds", "machine", "matmul_gflops", "note",
               "settings", "results"]


def load(name: str):
    """The benchmark ``name``, or the experiment ``experiments.NAME``."""
    from bench._common import module

    return importlib.import_module(module(name))


def report_of(path: pathlib.Path, name: str) -> dict:
    """The report at ``path``, checked against the harness's schema."""
    report = json.loads(path.read_text())
    assert list(report) == REPORT_KEYS
    from bench._common import module

    assert report["benchmark"] == name
    assert report["command"].startswith(f"python -m {module(name)}")
    assert report["matmul_gflops"] > 0 and report["seconds"] >= 0
    assert report["machine"]["cores"] >= 1 and report["machine"]["python"]
    assert {"cpu", "memory_gib", "avx512", "vnni", "tensorflow", "onnxruntime"} <= set(report["machine"])
    return report


def test_every_benchmark_is_a_module_of_the_harness():
    """Run as python -m bench.NAME or experiments.NAME: none puts itself on sys.path, none
    writes a goal."""
    for path in sorted([*(ROOT / "bench").glob("*.py"), *(ROOT / "experiments").glob("*.py")]):
        text = path.read_text(encoding="utf-8")
        assert "sys.path" not in text and "PYTHONPATH=." not in text, path.name
        assert "PASS" not in text and "pass/fail" not in text, path.name


def test_report_schema_and_command(tmp_path, capsys):
    import argparse

    from bench import _common

    args = argparse.Namespace(json=str(tmp_path / "r.json"), note="quiet", matmul_rounds=1)
    bench = _common.Bench("example", args, ["--json", str(tmp_path / "r.json"), "--x", "a b"])
    returned = bench.write([{"figure": 1}], {"setting": 2})
    report = report_of(tmp_path / "r.json", "example")
    assert report == json.loads(json.dumps(returned))
    assert report["command"].endswith("--x 'a b'") and report["note"] == "quiet"
    assert report["results"] == [{"figure": 1}] and report["settings"] == {"setting": 2}
    assert "tensorflow" not in sys.modules or report["machine"]["tensorflow"]


def test_old_spellings_work_with_a_notice(capsys):
    selection = load("selection_bleu")
    args = selection.build_parser().parse_args(
        ["run", "--src", "a", "--ref", "b", "--batch", "8", "--matmul-repeats", "2"])
    assert args.batch_size == 8 and args.matmul_rounds == 2
    err = capsys.readouterr().err
    assert "--batch is deprecated, use --batch-size" in err
    assert "--matmul-repeats is deprecated, use --matmul-rounds" in err
    # No abbreviations: an option is spelled in full.
    with pytest.raises(SystemExit):
        selection.build_parser().parse_args(["run", "--src", "a", "--ref", "b", "--batch-s", "8"])


def test_model_sizes_are_keras_nmt_trains():
    from bench import _common
    from keras_nmt.core.config import MEDIUM

    assert {k: _common.model_size("medium")[k] for k in MEDIUM} == MEDIUM
    assert _common.model_size("paper")["hidden"] == 1000
    assert _common.model_size("8/8/8/4@2") == {"embedding": 8, "hidden": 8, "attention": 8,
                                               "maxout": 4, "batch_size": 2,
                                               "optimizer": "adam", "learning_rate": 2e-3}
    with pytest.raises(ValueError, match="E/H/N/L@B"):
        _common.model_size("256x256")


def test_flop_count_matches_the_formula_by_hand():
    from keras_nmt.core.config import variant_config

    train = load("train_throughput")
    cfg = variant_config("search50", {"embedding": 2, "hidden": 3, "attention": 4, "maxout": 5,
                                      "tgt_vocab_size": 10})
    # m=2, n=3, n'=4, l=5, V=10, C=6, Tx=7, Ty=1
    encoder = 7 * (2 * 2 * 9 * 5 + 2 * 6 * 4)
    once = 2 * 9
    step = (2 * 9 * 5 + 2 * 6 * 9 + 2 * 3 * 4 + 7 * (12 + 12 + 5)
            + 2 * 10 * (3 + 2 + 6) + 5 + 2 * 5 * 10 + 30)
    assert train.forward_flops(cfg, 7, 1) == encoder + once + step
    encdec = variant_config("encdec50", {"embedding": 2, "hidden": 3, "attention": 4, "maxout": 5,
                                         "tgt_vocab_size": 10})
    assert train.forward_flops(encdec, 7, 1) == (
        7 * 2 * 9 * 5 + 2 * 9 + 2 * 3 * 9 + 2 * 9 * 5 + 2 * 10 * (3 + 2 + 3) + 5 + 100 + 30)
    assert train.training_flops(cfg, 7, 2) == 3 * train.forward_flops(cfg, 7, 2)


def test_train_throughput_reports_rates_and_flop_fraction(tiny_corpus, tmp_path):
    train = load("train_throughput")
    out = tmp_path / "train.json"
    size = "{embedding}/{hidden}/{attention}/{maxout}@{batch_size}".format(**TINY_SETTINGS)
    assert train.main(["--data", str(tiny_corpus), "--sizes", size, "--warmup", "1", "--steps", "2",
                       "--matmul-rounds", "1", "--in-process", "--json", str(out)]) == 0
    report = report_of(out, "train_throughput")
    assert report["machine"]["tensorflow"]
    assert [r["model"] for r in report["results"]] == ["search", "encdec"]
    for result in report["results"]:
        assert result["timed_steps"] == 2 and result["config"]["batch_size"] == 16
        for key in ("target_tokens_per_second", "sentences_per_second", "ms_per_step",
                    "peak_rss_mib", "flops_per_target_token", "mean_source_tokens"):
            assert result[key] > 0, key
        assert 0 < result["fraction_of_matmul"] <= 1
        assert result["padded_flops_per_second"] >= result["flops_per_second"]
        # tokens/s and sentences/s describe the same steps
        ratio = result["target_tokens_per_second"] / result["sentences_per_second"]
        assert math.isclose(ratio, result["mean_target_tokens"], rel_tol=1e-9)
    search, encdec = report["results"]
    assert search["flops_per_target_token"] > encdec["flops_per_target_token"]


@SLOW
def test_train_throughput_in_a_child_process(tiny_corpus, tmp_path):
    """The default: each measurement in a fresh interpreter (its own peak RSS)."""
    train = load("train_throughput")
    out = tmp_path / "train.json"
    assert train.main(["--data", str(tiny_corpus), "--models", "encdec", "--sizes", "8/8/8/4@8",
                       "--warmup", "1", "--steps", "1", "--matmul-rounds", "1",
                       "--json", str(out)]) == 0
    [result] = json.loads(out.read_text())["results"]
    assert result["model"] == "encdec" and result["config"]["hidden"] == 8
    assert result["peak_rss_mib"] > 0 and 0 < result["fraction_of_matmul"] <= 1


def test_train_throughput_rejects_a_bad_size(tiny_corpus, capsys):
    train = load("train_throughput")
    with pytest.raises(SystemExit) as stop:
        train.main(["--data", str(tiny_corpus), "--sizes", "256x256"])
    assert stop.value.code == 2
    assert "bench.train_throughput: error: argument --sizes" in capsys.readouterr().err


def test_linear_fit_recovers_a_line():
    decode = load("decode_throughput")
    fit = decode.linear_fit([1, 2, 3, 8], [0.003, 0.005, 0.007, 0.017])
    assert fit["slope_ms_per_token"] == pytest.approx(2.0)
    assert fit["intercept_ms"] == pytest.approx(1.0)
    assert fit["r2"] == pytest.approx(1.0)
    assert [(b["min_len"], b["sentences"]) for b in fit["buckets"]] == [(1, 3), (6, 1)]


def test_sentences_are_spread_through_the_file():
    from bench import _common

    lines = [str(i) for i in range(10)]
    assert _common.spread(lines, 3) == ["0", "3", "6"]
    assert _common.spread(lines, 10) == lines and _common.spread(lines[:2], 5) == ["0", "1"]
    assert _common.spread_sentences("0\n\n1\n \n2\n", 5) == ["0", "1", "2"]


def test_decode_throughput_keras_columns_flops_and_headline_figures(tiny_run, tmp_path, capsys):
    decode = load("decode_throughput")
    out = tmp_path / "decode.json"
    assert decode.main([str(tiny_run), "--paths", "keras", "--count", "6", "--beams", "1,5",
                        "--batch-sizes", "64", "--shortlist", "5,2", "--json", str(out),
                        "--plot", str(tmp_path / "length.png"), "--rounds", "3",
                        "--matmul-rounds", "1"]) == 0
    report = report_of(out, "decode_throughput")
    cells = {(c["selection"], c["beam"]): c for c in report["results"]["cells"]}
    assert set(cells) == {("off", 1), ("off", 5), ("on", 1), ("on", 5)}
    # Three rounds of every cell; each cell's figure is the median round.
    assert report["settings"]["rounds"] == 3 and report["results"]["matmul_gflops_after"] > 0
    for cell in cells.values():
        assert len(cell["seconds_each_round"]) == 3
        assert cell["seconds"] == sorted(cell["seconds_each_round"])[1]
        assert cell["sentences_per_second"] == pytest.approx(6 / cell["seconds"])
    vocab = json.loads((tiny_run / "config.json").read_text())["tgt_vocab_size"]
    assert cells[("off", 5)]["mean_columns"] == vocab > cells[("on", 5)]["mean_columns"] >= 4 + 5
    for cell in cells.values():
        assert cell["gflop_per_second"] > 0 and cell["of_matmul_rate"] > 0
    # Without the SavedModel no ratio can be taken; with one path, the fastest is Keras.
    figures = {row["figure"].split(":")[0].split(" (")[0]: row["value"]
               for row in report["results"]["headline"]}
    assert figures["keras selection off / exact SavedModel"] is None
    assert figures["keras selection on / exact SavedModel"] is None
    assert figures["fastest greedy"] == max(
        cells[("off", 1)]["sentences_per_second"], cells[("on", 1)]["sentences_per_second"])
    assert figures["fastest"] == max(
        cells[("off", 5)]["sentences_per_second"], cells[("on", 5)]["sentences_per_second"])
    assert "PASS" not in capsys.readouterr().out


def test_batch_columns_give_a_rare_sentences_batch_every_word():
    decode = load("decode_throughput")
    # Source words 4 and 5 translate to 4 and 6; word 6 is marked rare (every word).
    table = np.array([[0, 0]] * 4 + [[4, 5], [6, 0], [-1, -1]], np.int32)
    # The two others share a batch: reserved 0-3, the most frequent word 4, and 6.
    assert decode.batch_columns([[4, 3], [6, 4, 3], [5, 3]], 64, 20, table, (1, 1)) == [6, 20, 6]
    assert decode.batch_columns([[4, 3], [6, 4, 3]], 64, 20) == [20, 20]


def test_useful_flops_by_hand():
    decode = load("decode_throughput")
    from keras_nmt.core.config import variant_config

    config = variant_config("search50", {"embedding": 2, "hidden": 3, "attention": 4, "maxout": 5})
    # GRU: 2*2*9 + 2*3*9 = 90; deep output 2*(3+2)*10 = 100, output 2*5*C; attention
    # 2*3*4 + 3*Tx*4 and the weighted context projections 2*Tx*(9+10): 24 + 50 Tx.
    assert decode.step_flops(config, 2, 7) == 90 + 100 + 70 + 24 + 100
    # Encoder per token: 2 directions * (2*2*9 + 2*3*9) = 180, then U_a h, C h and C_o h
    # of the 6-wide annotation: 2*6*(4+9+10) = 276.
    assert decode.encoder_flops(config, 2) == 2 * (180 + 276)
    # A 1-token source (2 with EOS), 2 output tokens (3 steps with EOS), beam 2.
    assert decode.useful_flops(config, [1], [2], 2, [7]) == 2 * 456 + 2 * 3 * 384


@SLOW
def test_decode_throughput_on_every_path(tiny_run, tmp_path, capsys):
    decode = load("decode_throughput")
    out, plot = tmp_path / "decode.json", tmp_path / "length.png"
    assert decode.main([str(tiny_run), "--export-dir", str(tmp_path / "exports"), "--count", "6",
                        "--beams", "5", "--batch-sizes", "1,64", "--shortlist", "5,2",
                        "--json", str(out), "--plot", str(plot)]) == 0
    report = report_of(out, "decode_throughput")
    cells = {(c["path"], c["selection"], c["beam"], c["batch"]): c
             for c in report["results"]["cells"]}
    assert len(cells) == 4 * 2 * 2
    vocab = json.loads((tiny_run / "config.json").read_text())["tgt_vocab_size"]
    for (path, selection, beam, batch), cell in cells.items():
        assert cell["sentences"] == 6
        assert cell["sentences_per_second"] > 0 and cell["output_tokens_per_second"] > 0
        assert 0 < cell["gflop_per_second"] and 0 < cell["of_matmul_rate"]
        # Without selection every word is scored; with it, fewer.
        assert (cell["mean_columns"] == vocab) == (selection == "off"), (path, selection)
    # The exact search gives the same outputs whatever the batch (a selecting one need not:
    # a batch's candidate words are those of all its sentences); the ONNX paths are within
    # a token or two of Keras (the barely trained model has equally scored hypotheses of
    # different lengths, which onnxruntime's rounding may order differently).
    assert (cells[("keras", "off", 5, 1)]["output_tokens"]
            == cells[("keras", "off", 5, 64)]["output_tokens"])
    for selection in ("off", "on"):
        keras = cells[("keras", selection, 5, 64)]["output_tokens"]
        assert abs(cells[("onnx", selection, 5, 64)]["output_tokens"] - keras) <= 2
    fits = report["results"]["time_against_length"]["fits"]
    assert set(fits) == {f"{p} selection {s}" for p in decode.PATHS for s in ("off", "on")}
    for fit in fits.values():
        assert fit["sentences"] == 6 and fit["buckets"]
        assert math.isfinite(fit["slope_ms_per_token"]) and math.isfinite(fit["intercept_ms"])
        assert fit["r2"] is None or fit["r2"] <= 1
    assert plot.stat().st_size > 0 and plot.read_bytes()[:4] == b"\x89PNG"
    # Greedy is not in this grid: its figure is None; every beam-5 ratio is measured.
    figures = {row["figure"]: row["value"] for row in report["results"]["headline"]}
    exact = cells[("savedmodel", "off", 5, 64)]["sentences_per_second"]
    selecting = cells[("savedmodel", "on", 5, 64)]["sentences_per_second"]
    assert figures["savedmodel selection on / exact SavedModel (beam 5, batch 64)"] == (
        pytest.approx(selecting / exact))
    assert len(figures) == 7 + 2 and list(figures.values())[-1] is None
    assert all(value is not None for value in list(figures.values())[:-1])
    printed = capsys.readouterr().out
    assert "sent/s" in printed and "PASS" not in printed


@SLOW
def test_quality_trains_scores_and_resumes(tiny_corpus, tmp_path, capsys):
    quality = load("quality")
    argv = ["--data", str(tiny_corpus), "--minutes", "0.02", "--count", "8", "--out", str(tmp_path),
            "--matmul-rounds", "1", "--size", "compact", "--set", "embedding=16",
            "--set", "hidden=16", "--set", "attention=16", "--set", "maxout=8",
            "--set", "batch_size=16"]
    assert quality.main(argv) == 0
    report = report_of(tmp_path / "quality.json", "quality")
    assert report["settings"]["training"]["size"] == "compact"
    assert report["settings"]["training"]["overrides"]["batch_size"] == 16
    models = report["results"]["models"]
    assert [m["model"] for m in models] == ["RNNsearch-50", "RNNencdec-50"]
    for model, evaluation in zip(models, report["results"]["evaluations"]):
        assert model["updates"] >= 1
        assert 0 <= evaluation["bleu"] <= 100 and 0 <= evaluation["chrf"] <= 100
        assert evaluation["sentences"] == 8 and evaluation["beam_size"] == 5
        # The split the run reports on, never the one that selected its checkpoints.
        assert evaluation["split"] == "test"
        assert evaluation["split_source"] == str(tiny_corpus / "test.en")
        assert evaluation["signatures"]["bleu"].startswith("nrefs:1")
        assert 0 <= evaluation["no_unk"]["sentences"] <= 8
    table = (tmp_path / "quality.md").read_text()
    assert "| RNNsearch-50 |" in table and "| RNNencdec-50 |" in table and "chrF No-UNK" in table
    assert (tmp_path / "fig2_bleu_by_length.png").stat().st_size > 0
    first = models
    capsys.readouterr()
    # Run again: nothing is trained or decoded again, the figures are the same.
    assert quality.main(argv) == 0
    err = capsys.readouterr().err
    assert err.count("already trained") == 2 and err.count("evaluation reused") == 2
    again = report_of(tmp_path / "quality.json", "quality")
    assert again["results"]["models"] == first


def test_quality_takes_keras_nmt_trains_options(capsys):
    quality = load("quality")
    parser = quality.build_parser()
    options, sets = quality.training_options(parser, ["--recipe", "budget", "--set", "dropout=0",
                                                      "--seed", "3"])
    assert options == {"size": "medium", "preset": None, "recipe": "budget", "seed": 3,
                       "overrides": {"dropout": 0.0}}
    assert sets == ["dropout=0"]  # as keras-nmt train is given them
    assert quality.training_options(parser, ["--preset", "budget"])[0]["size"] is None
    for wrong in (["--dims", "16/16/16/8"], ["--out", "x"], ["--size", "huge"]):
        with pytest.raises(SystemExit):
            quality.training_options(parser, wrong)


def test_quality_trains_through_keras_nmt_train_and_stops_on_its_error(tmp_path, capsys):
    quality = load("quality")
    status = quality.main(["--data", str(tmp_path / "no-corpus"), "--minutes", "1",
                           "--out", str(tmp_path / "out"), "--matmul-rounds", "1"])
    err = capsys.readouterr().err
    assert status == 2 and "quality (search50): error: " in err, err
    assert not (tmp_path / "out" / "quality.json").exists()


def test_profile_op_types():
    profile = load("experiments.profile_ops")
    assert profile.op_type("decoder/MatMul:_MklMatMul") == "_MklMatMul"
    assert profile.op_type("while/body/Tanh:Tanh") == "Tanh"
    assert profile.op_type("KernelAndDeviceFunc::Run") is None
    assert profile.op_type("ThreadpoolListener::Record") is None
    assert profile.op_type("EagerExecute") is None


def test_profile_decode_and_onnx(tiny_run, tiny_export, tmp_path, capsys):
    profile = load("experiments.profile_ops")
    sentences = tmp_path / "src.txt"
    sentences.write_text("the cat .\nthe small red car is here .\n", encoding="utf-8")
    for argv, out in ((["decode", str(tiny_run), "--count", "4", "--batch-size", "2"], "tf.json"),
                      (["onnx", str(tiny_export), "--sentences", str(sentences), "--count", "2"], "ort.json")):
        assert profile.main(argv + ["--json", str(tmp_path / out), "--matmul-rounds", "1"]) == 0
        results = report_of(tmp_path / out, "experiments.profile_ops")["results"]
        ops = {row["op"]: row for row in results["ops"]}
        # A beam search multiplies matrices at every step, whatever runs it.
        assert any("MatMul" in op or op == "Gemm" for op in ops), sorted(ops)
        assert results["wall_seconds"] > 0 and results["op_self_seconds"] > 0
        assert abs(sum(row["share"] for row in results["ops"]) - 1.0) < 1e-6
    assert "op type" in capsys.readouterr().out


def test_output_layer_pieces(tmp_path, capsys):
    bench = load("experiments.output_layer")
    out = tmp_path / "out.json"
    assert bench.main(["--rows", "6", "--maxout", "4", "--vocab-size", "300", "--k", "5",
                       "--rounds", "2", "--matmul-rounds", "1", "--json", str(out)]) == 0
    results = report_of(out, "experiments.output_layer")["results"]
    assert [p["piece"] for p in results["pieces"]][0] == "product with bias"
    assert all(p["ms"] > 0 for p in results["pieces"])
    assert results["two_stage_same_ids"] is True
    assert "GFLOP/s" in capsys.readouterr().out


def test_precision_grid_reports_compilations_and_padding(tiny_corpus, tmp_path, capsys):
    precision = load("precision")
    out = tmp_path / "precision.json"
    assert precision.main(["--data", str(tiny_corpus), "--sizes", "16/16/16/8@8",
                           "--batch-sizes", "8", "--precisions", "float32", "--vocab-size", "60",
                           "--rounds", "1", "--steps", "3", "--warmup", "2",
                           "--set", "label_smoothing=0.1",
                           "--matmul-rounds", "1", "--json", str(out)]) == 0
    report = report_of(out, "precision")
    rows = report["results"]["training"]
    assert report["results"]["decoding"] is None and report["settings"]["config"]["hidden"]
    assert report["settings"]["config"]["label_smoothing"] == 0.1  # --set, in every setting
    assert [(r["precision"], r["jit"]) for r in rows] == [("float32", False), ("float32", True)]
    import tensorflow as tf

    on_gpu = bool(tf.config.list_physical_devices("GPU"))
    for row in rows:
        assert row["median"] > 0 and row["sentences_per_second"] > 0
        assert 0 < row["padding_efficiency"] <= 1
        # The peak GPU memory where there is a GPU, none on a CPU.
        assert row["peak_gpu_mib"] > 0 if on_gpu else row["peak_gpu_mib"] is None
        # Without jit one graph serves every shape; with it, one per width (<= 5 here).
        assert row["compilations"] == 1 if not row["jit"] else 1 <= row["compilations"] <= 5
    plain, padded = rows[0], rows[1]
    assert padded["padding_efficiency"] < plain["padding_efficiency"]  # what bounded shapes cost
    assert rows[0]["relative_to_float32"] == 1.0
    assert "compiles" in capsys.readouterr().out


def test_precision_compares_recipes_at_the_grids_batch():
    import argparse

    from keras_nmt.core.config import RECIPES

    precision = load("precision")
    args = argparse.Namespace(compare="recipe=none,budget")
    assert precision.compared(args) == ("recipe", ["none", "budget"])
    assert precision.compared_values("recipe", "none") == {}
    budget = precision.compared_values("recipe", "budget")
    assert budget["sampled_softmax"] == RECIPES["budget"]["sampled_softmax"]
    assert "batch_size" not in budget  # the grid's --batch-sizes decides
    assert precision.compared_values("dropout", 0.2) == {"dropout": 0.2}
    with pytest.raises(ValueError, match="unknown recipe"):
        precision.compared(argparse.Namespace(compare="recipe=none,fast"))


def test_the_benchmarks_trainer_trains_what_an_adapted_run_would(tmp_path):
    """bench.precision --compare freeze=... / parent_pull=... time the step a child runs:
    its frozen parts left out of the update, and the pull's penalty in it."""
    import tensorflow as tf

    from keras_nmt.core.config import variant_config

    common = load("_common")
    config = variant_config("search50").replace(
        embedding=8, hidden=8, attention=8, maxout=4, src_vocab_size=20, tgt_vocab_size=20,
        freeze="embeddings", parent_pull=0.5)
    nothing = tf.data.Dataset.range(0)  # no step is taken: only what a step would update
    child = common.new_trainer(config, nothing, tmp_path / "child")

    def paths(variables):  # below the model's name, which Keras numbers per process
        return {variable.path.split("/", 1)[1] for variable in variables}

    trained = paths(child.variables)
    every = paths(child.model.trainable_variables)
    assert sorted(every - trained) == ["decoder/embedding/embeddings",
                                       "encoder/embedding/embeddings"]
    assert child.step_functions.pull.strength == 0.5
    assert len(child.step_functions.pull.anchors) == len(trained)
    plain = common.new_trainer(config.replace(freeze="", parent_pull=0.0), nothing,
                               tmp_path / "plain")
    assert len(plain.variables) == len(every) and plain.step_functions.pull is None


def test_precision_on_the_gpu_refuses_without_a_gpu(tiny_corpus):
    import tensorflow as tf

    if tf.config.list_physical_devices("GPU"):
        pytest.skip("a GPU is present: bench.precision --gpu measures it instead of refusing")
    result = subprocess.run([sys.executable, "-m", "bench.precision", "--gpu",
                             "--data", str(tiny_corpus)],
                            capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 2 and result.stdout == ""
    lines = [line for line in result.stderr.splitlines() if line.startswith("python -m bench")]
    assert lines == ["python -m bench.precision: error: TensorFlow sees no GPU on this machine; "
                     "--gpu measures one (without --gpu this benchmark measures the CPU)"], result.stderr


def test_selection_bleu_against_the_exact_search(tiny_run, tiny_corpus, tmp_path, capsys):
    bench = load("selection_bleu")
    out = tmp_path / "selection.json"
    vocab = json.loads((tiny_run / "config.json").read_text())["tgt_vocab_size"]
    assert bench.main([str(tiny_run), "--src", str(tiny_corpus / "valid.en"),
                       "--ref", str(tiny_corpus / "valid.fr"), "--beam", "2",
                       "--shortlists", f"5,2:{vocab},1", "--matmul-rounds", "1",
                       "--json", str(out)]) == 0
    rows = report_of(out, "selection_bleu")["results"]
    assert [r["shortlist"] for r in rows] == [None, [5, 2], [vocab, 1]]
    # A shortlist of every word is the exact search.
    assert rows[2]["bleu"] == pytest.approx(rows[0]["bleu"]) and rows[2]["against_exact"] == 0
    assert all(r["seconds"] > 0 for r in rows)
    assert "vs exact" in capsys.readouterr().out


@pytest.mark.slow  # a SavedModel export with the constrained search
def test_terminology_s_savedmodel_path_translates_as_keras_does(tiny_run, tmp_path):
    from keras_nmt.cli import export as cli
    from keras_nmt.decoding.constraints import LineConstraints
    from keras_nmt.decoding.keras_translator import Translator

    out = tmp_path / "export"
    assert cli.main([str(tiny_run), "--out", str(out), "--beam", "3", "--constrained",
                     "--quiet"]) == 0
    translator = Translator.from_run_dir(tiny_run)
    lines = ["The man is here.", "A dog sleeps on the table.", "The cat eats ."]
    plain = translator.translate(lines, beam_size=3)
    word = next(w for w in translator.target_vocab.tokens[4:]
                if w.isalpha() and all(w not in t.tokens for t in plain))
    found = [LineConstraints((word,)), LineConstraints(prefix=word, avoid=(plain[1].tokens[0],)),
             None]
    path = load("terminology").SavedModelPath(out, "nmt", translator)
    got = path.translate(lines, constraints=found, batch_size=2)
    want = translator.translate(lines, beam_size=3, constraints=found, split_sentences=False)
    assert [t.text for t in got] == [t.text for t in want]
    assert word in got[0].tokens and got[1].tokens[0] == word
    assert [t.unmet for t in got] == [0, 0, 0]
    assert [t.text for t in path.translate(lines)] == [t.text for t in plain]


def test_terminology_sets_use_every_term_and_write_the_sets(tiny_run, tiny_corpus, tmp_path):
    bench = load("terminology")
    out, sets = tmp_path / "terminology.json", tmp_path / "sets"
    assert bench.main([str(tiny_run), "--src", str(tiny_corpus / "valid.en"),
                       "--ref", str(tiny_corpus / "valid.fr"), "--beam", "3", "--terms", "5",
                       "--skip-frequent", "0", "--best", "10", "--matmul-rounds", "1",
                       "--rounds", "2", "--sets-dir", str(sets), "--json", str(out)]) == 0
    [row] = report_of(out, "terminology")["results"]
    asked = [json.loads(line) for line in (sets / "terminology.jsonl").read_text().splitlines()]
    assert len(asked) == 30 and row["terms"] == sum(map(len, asked)) > 0
    assert row["sentences"] == sum(bool(terms) for terms in asked)
    # Every term asked is in its output: the search's guarantee, measured.
    assert row["term_use"] == 1.0 and row["glossary_term_use"] == 1.0
    assert row["term_use_unconstrained"] < 1.0
    glossary = (sets / "glossary.tsv").read_text().splitlines()
    assert 0 < len(glossary) <= 5 and all(len(line.split("\t")) == 2 for line in glossary)
    assert len(row["seconds_constrained"]) == len(row["throughput_ratios"]) == 2
    assert row["throughput_ratio"] == pytest.approx(np.median([
        p / g for p, g in zip(row["seconds_unconstrained"], row["seconds_constrained"])]))


def test_scale_growth_labels():
    scale = load("scale")
    assert scale.growth([10, 100, 1000], [1.0, 10.0, 100.0]) == "linear (N^1.00)"
    assert scale.growth([10, 100], [5.0, 5.1]).startswith("constant")
    assert scale.growth([10, 100], [1.0, 100.0]) == "superlinear (N^2.00)"
    assert scale.growth([10], [1.0]) == "one size: no trend"


@SLOW
def test_scale_runs_every_stage_and_resumes(tmp_path):
    report = tmp_path / "scale.json"
    argv = [sys.executable, "-m", "bench.scale", "--pairs", "300", "--types", "2000",
            "--steps", "2", "--work", str(tmp_path / "work"), "--json", str(report),
            "--commands", "train,resume,pipeline,evaluate,export", "--matmul-rounds", "1"]
    assert subprocess.run(argv, cwd=ROOT, capture_output=True).returncode == 0
    entry = report_of(report, "scale")["results"]["sizes"]["300"]["commands"]
    assert all(entry[c]["exit_status"] == 0 for c in ("train", "resume", "pipeline", "evaluate", "export"))
    assert set(entry["train"]["stages"]) == {"prepare", "setup", "first_batches", "held_out"}
    assert entry["pipeline"]["distinct_in_sample"] == entry["pipeline"]["order_sample"]
    assert not (tmp_path / "work" / "corpus-300").exists()  # removed once done
    # A second start finds everything done and runs nothing.
    again = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    assert again.returncode == 0 and "pairs: train" not in again.stderr


def test_the_gathered_pass_takes_the_rare_word_sentences_out_of_their_batches(
        tiny_selecting_export, tiny_corpus, monkeypatch):
    bench = load("serving_load")
    translator = OnnxTranslator.from_export_dir(tiny_selecting_export)
    sentences = (tiny_corpus / "valid.en").read_text(encoding="utf-8").splitlines()[:12]
    rare = [s for s in sentences if translator.rare[list(translator.source(s).ids)].any()]
    assert 0 < len(rare) < len(sentences)
    calls = []
    translate = translator.translate
    monkeypatch.setattr(translator, "translate",
                        lambda lines, **kw: calls.append(list(lines)) or translate(lines, **kw))
    gap = bench.where_the_gap_goes(translator, sentences, 3, 32, 4, rounds=1)
    assert gap["rare_word_sentences"] == len(rare)
    # The last pass: the batches of 4 in order without their rare-word sentences, then
    # those together.
    batches = [sentences[i:i + 4] for i in range(0, 12, 4)]
    assert calls[-4:] == [[s for s in b if s not in rare] for b in batches] + [rare]
    assert calls[-7:-4] == batches  # arrival order, as the server's batches


def test_serving_load_phases_on_the_tiny_export(tiny_export, tmp_path, capsys):
    bench = load("serving_load")
    out = tmp_path / "load.json"
    assert bench.main([str(tiny_export), "--count", "12", "--clients", "2", "--seconds", "1",
                       "--overload-clients", "8", "--overload-seconds", "1",
                       "--overload-queue", "8", "--per-overload", "4", "--fuzz", "60",
                       "--swap-seconds", "3", "--poll-seconds", "0.2",
                       "--matmul-rounds", "1", "--json", str(out)]) == 0
    report = report_of(out, "serving_load")
    model = report["settings"]["model"]
    assert model["int8"] is False and model["beam"] == 5  # no int8 model
    assert report["settings"]["spin"] is True and report["settings"]["work_niceness"] == 0
    report = report["results"]
    assert report["offline"]["sentences"] == 12 and report["offline"]["sentences_per_second"] > 0
    load_phase = report["load"]
    assert load_phase["errors"] == 0 and load_phase["sentences"] > 0
    # The yardstick in the server's batches: its mean batch, the same 12 sentences.
    gap = report["where_the_gap_goes"]
    arrival = gap["arrival_order"]
    assert arrival["batch_size"] == max(1, round(load_phase["mean_batch"]))
    assert gap["server_batch"]["batch_size"] == arrival["batch_size"]
    assert gap["sorted"]["batch_size"] == 32  # the bench's --batch-size
    for name in ("sorted", "server_batch", "arrival_order", "arrival_rare_gathered"):
        assert len(gap[name]["rates"]) == 5 and gap[name]["sentences_per_second"] > 0
    assert gap["rare_word_sentences"] == 0  # no selection: nothing is decoded apart
    assert gap["size"] * gap["make_up"] == pytest.approx(
        gap["sorted"]["sentences_per_second"] / arrival["sentences_per_second"])
    assert load_phase["ratio_to_arrival_order"] == pytest.approx(
        load_phase["sentences_per_second"] / arrival["sentences_per_second"])
    # Full vocabulary, float: a batch's neighbours change only rounding (matrix products
    # of another shape), which a barely trained model's near ties can still turn.
    assert load_phase["same_as_offline"] >= 0.75
    assert load_phase["p50_ms"] <= load_phase["p99_ms"] <= load_phase["max_ms"]
    assert load_phase["exit_status"] == 0
    overload = report["overload"]
    assert overload["rejected"] > 0 and overload["other_errors"] == 0
    assert overload["time_to_503"]["p50_ms"] > 0 and overload["exit_status"] == 0
    fuzz = report["fuzz"]
    assert sum(fuzz["statuses"].values()) == 60 and fuzz["5xx_not_503"] == 0
    assert fuzz["connection_failures"] == 0 and fuzz["alive"] and fuzz["correct_afterwards"]
    swap = report["swap"]  # a new version appears a second in: served, nothing failed
    assert swap["new_version"] == swap["old_version"] + 1 and swap["errors"] == 0
    assert 0 < swap["seconds_to_serve"] < 0.2 + 5 and swap["exit_status"] == 0
    assert swap["before"]["p99_ms"] > 0 and swap["after"]["p99_ms"] > 0
    printed = capsys.readouterr().out
    assert "overload 503" in printed and "swap (served in" in printed


def test_stdin_stream_answers_before_its_input_ends(tiny_export, tmp_path, capsys):
    """A run stopped by --seconds before its input ends, beside one that ends: the first
    output came while the pipe was still being fed, and the report says which run stopped."""
    bench = load("stdin_stream")
    out = tmp_path / "stream.json"
    # 25 s: on two cores shared with the other test worker, onnx-translate's start alone
    # took 9.4 s once, and the 70-line run must end on its own.
    assert bench.main([str(tiny_export), "--count", "5", "--lines", "70,100000000",
                       "--batch-size", "1", "--seconds", "25", "--matmul-rounds", "1",
                       "--json", str(out)]) == 0
    whole, endless = report_of(out, "stdin_stream")["results"]["runs"]
    assert whole["answered"] == 70 and whole["stopped_at_seconds"] is None
    assert whole["lines_written_before_first_output"] >= 64  # one chunk at --batch-size 1
    assert endless["stopped_at_seconds"] == 25 and 64 <= endless["answered"] < 100_000_000
    assert endless["lines_written_before_first_output"] < 100_000_000
    assert whole["peak_rss_mib"] > 0 and endless["first_output_seconds"] > 0
    assert "input lines" in capsys.readouterr().out


def test_serving_latency_over_rest_grpc_and_onnxruntime(tiny_export, tmp_path, capsys):
    """REST to ``keras-nmt serve`` started on the export, gRPC to the address --grpc names
    (here the tests' TF Serving stand-in serving the same export), onnxruntime offline."""
    from fake_model_server import ModelRegistry, StandInServer

    bench = load("serving_latency")
    out = tmp_path / "latency.json"
    registry = ModelRegistry()
    registry.add("nmt", tiny_export / "nmt")
    try:
        with StandInServer(registry) as standin:
            assert bench.main([str(tiny_export), "--count", "6", "--batch-size", "4",
                               "--rounds", "2", "--grpc", standin.grpc_target,
                               "--matmul-rounds", "1", "--json", str(out)]) == 0
    finally:
        registry.close()
    report = report_of(out, "serving_latency")
    assert report["settings"]["grpc"] == standin.grpc_target
    results = report["results"]
    assert list(results) == ["onnx", "rest", "grpc"]
    rest, grpc = results["rest"], results["grpc"]
    assert set(rest) == {"server_start_s", "first_request_s", "later_request_median_s",
                         "sentences_per_s_batch4", "cold_command_s"}
    assert set(grpc) == {"first_request_s", "later_request_median_s", "cold_command_s"}
    assert results["onnx"]["sentences_per_s_beam5_batch4"] > 0
    assert all(value > 0 for path in (rest, grpc) for value in path.values())
    assert "server_start_s" in capsys.readouterr().out


def test_attack_bench_on_the_tiny_export(tiny_export, tmp_path, capsys):
    """``python -m bench.serving_attack`` for a few seconds: every attack refused within
    its deadline, no 5xx but 503 and 504, and a fuzz run that ends with a right answer."""
    from bench import serving_attack

    out = tmp_path / "attack.json"
    assert serving_attack.main([
        str(tiny_export), "--duration", "4", "--clients", "4", "--count", "40", "--slow", "10",
        "--idle", "600", "--bombers", "1", "--constrained-flood", "4", "--read-timeout", "1",
        "--slow-margin", "3", "--fuzz", "200",
        "--no-spin", "--work-niceness", "3", "--matmul-rounds", "1", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    # The server ran with --no-spin and its work threads 3 nice levels down.
    assert report["settings"]["spin"] is False and report["settings"]["work_niceness"] == 3
    assert report["benchmark"] == "serving_attack" and report["settings"]["slow"] == 10
    results = report["results"]
    for name in ("without_attack", "with_attack"):
        result = results[name]
        assert result["5xx_not_503_504"] == 0 and result["normal"]["failures"] == 0, result
        assert result["normal"]["statuses"].get("200", 0) > 0 and result["health"]["requests"] > 0
        assert result["health"]["p50_ms"] <= result["health"]["p99_ms"]
    attacks = results["with_attack"]["attacks"]
    assert results["with_attack"]["all_refused_in_time"], {
        name: (attack["statuses"], attack["unanswered"], attack["max_ms"])
        for name, attack in attacks.items() if attack.get("not_refused_in_time")}
    expected = {"alignment_bomb": {"400"}, "sentence_bomb": {"400"},
                "long_sentence_bomb": {"400"}, "slow_body": {"408"}, "text_plain": {"415"},
                "cross_origin": {"403"},
                # The tiny export has no constrained search: refused, within its deadline.
                "constrained_flood": {"400"}, "glossary_bomb": {"400"}}
    for name, statuses in expected.items():
        assert attacks[name]["requests"] > 0 and set(attacks[name]["statuses"]) <= statuses | {
            "503"}, (name, attacks[name])
    assert attacks["disconnect"]["requests"] > 0
    # 600 sockets that send nothing, over the cap of 512: the oldest give their places.
    idle = attacks["idle_sockets"]
    assert idle["opened"] >= 600 and idle["dropped_by_server"] > 0, idle
    assert results["server_peak_rss_mib"] > 0 and results["exit_status"] == 0
    fuzz = results["fuzz"]
    # Each request is answered or its connection fails, but a connection may fail only
    # where the request carried a header the HTTP parser rejects (aiohttp answers 400 and
    # closes while such a client may still be sending).
    assert sum(fuzz["statuses"].values()) + fuzz["connection_failures"] == 200
    assert fuzz["5xx_not_503"] == 0
    assert fuzz["connection_failures"] == fuzz["connection_failure_headers"].get(
        "X-Junk", 0), fuzz
    assert fuzz["alive"] and fuzz["correct_afterwards"]
    assert {"403", "415", "421"} <= set(fuzz["statuses"])
    assert "with attack" in capsys.readouterr().out


def test_serving_load_bad_requests_are_repeatable_and_varied():
    bench = load("serving_load")
    first, again = bench.bad_requests("nmt", 500), bench.bad_requests("nmt", 500)
    assert first == again
    paths = {path for _, path, _ in first}
    assert {"/translate", "/v1/models/nmt:predict"} <= paths and len(paths) > 50


def test_heldout_sets_rare_words_and_joined_lines(tmp_path):
    sets = load("heldout_sets")
    from keras_nmt.corpus import heldout
    from keras_nmt.corpus.readers import ParallelFiles

    data = tmp_path / "data"
    data.mkdir()
    train = ["the cat sleeps .", "the cat eats .", "the dog eats ."] * 3 + ["a zebra ."]
    (data / "train.en").write_text("\n".join(train) + "\n", encoding="utf-8")
    (data / "train.fr").write_text("\n".join(["x"] * len(train)) + "\n", encoding="utf-8")
    # 40 development pairs: every tenth one has a never-seen word, the zebra one a rare one.
    sources = [f"the {'okapi' if i % 10 == 0 else 'cat'} eats {i} ." for i in range(39)]
    sources.append("a zebra sleeps .")
    targets = [f"t{i}" for i in range(40)]
    (data / "valid.en").write_text("\n".join(sources) + "\n", encoding="utf-8")
    (data / "valid.fr").write_text("\n".join(targets) + "\n", encoding="utf-8")

    summary = sets.write_sets(data, tmp_path / "sets", "en", "fr")
    report = [(s, t) for s, t in zip(sources, targets) if heldout.half_of(s) == heldout.REPORT]
    assert summary["report_pairs"] == len(report) > 0
    rare = (tmp_path / "sets" / "rare.en").read_text(encoding="utf-8").splitlines()
    # Numbers are not words: "eats 7" is not rare for its 7; okapi (never seen) and zebra
    # (seen once) are.
    assert rare == [s for s, _ in report if "okapi" in s or "zebra" in s]
    parts = [(tmp_path / "sets" / f"rare-{part}.en").read_text(encoding="utf-8").splitlines()
             for part in ("unseen", "seen")]
    assert parts == [[s for s in rare if "okapi" in s], [s for s in rare if "zebra" in s]]
    assert summary["rare_unseen_pairs"] == len(parts[0]) and summary["rare_seen_pairs"] == len(parts[1])
    groups = [int(g) for g in (tmp_path / "sets" / "joined.groups").read_text().split()]
    assert sum(groups) == len(report) and set(groups[:-1]) <= {2, 3} and groups[:2] == [2, 3][:len(groups[:2])]
    joined = (tmp_path / "sets" / "joined.fr").read_text(encoding="utf-8").splitlines()
    assert joined[0] == " ".join(t for _, t in report[:groups[0]])
    assert not (tmp_path / "sets" / "select.en").exists()
    select_rare = (tmp_path / "sets" / "select-rare.en").read_text(encoding="utf-8").splitlines()
    assert select_rare == [s for s in sources if heldout.half_of(s) != heldout.REPORT
                           and ("okapi" in s or "zebra" in s)]
    assert summary["select_rare_pairs"] == len(select_rare) > 0 and not set(select_rare) & set(rare)
    counts = sets.source_counts(ParallelFiles(data / "train.en", data / "train.fr"), "en")
    assert sets.copied_pairs([("the okapi eats .", "un okapi"), ("a zebra .", "un zèbre"),
                              ("a zebra .", "zebra !")], counts, "en", "fr", 1) == 2
    # okapi never seen, zebra seen once: the first and the last keep theirs
    assert summary["rare_copied_pairs"] == 0  # the references are t0, t1, ...


def test_onnx_side_by_side_times_every_export_in_each_round(tiny_selecting_export, tmp_path,
                                                            capsys):
    from experiments import onnx_side_by_side

    sentences = tmp_path / "src.en"
    sentences.write_text("the man .\n\nthe woman sees the dog .\n", encoding="utf-8")
    assert onnx_side_by_side.main([
        "--sentences", str(sentences), "--export", f"float={tiny_selecting_export}",
        "--export", f"int8={tiny_selecting_export}:int8", "--beam", "2", "--batch-size", "2",
        "--rounds", "2", "--matmul-rounds", "1", "--json", str(tmp_path / "r.json")]) == 0
    report = report_of(tmp_path / "r.json", "experiments.onnx_side_by_side")
    rows = report["results"]
    assert [row["export"] for row in rows] == ["float", "int8"]
    assert [row["int8"] for row in rows] == [False, True]
    assert all(len(row["seconds"]) == 2 and row["sentences_per_s"] > 0 for row in rows)
    assert rows[0]["time_ratio"] == 1.0 and report["settings"]["sentences"] == 2
    assert "float" in capsys.readouterr().out


@pytest.mark.slow  # trains two runs and scores three splits each: about 45 s
def test_adaptation_trains_children_and_scratch_runs_and_draws_the_curve(
        tiny_run, tiny_corpus, tmp_path):
    bench = load("adaptation")
    out = tmp_path / "adaptation"
    report = f"parent={tiny_corpus / 'test.en'},{tiny_corpus / 'test.fr'}"
    argv = ["--parent", str(tiny_run), "--data", str(tiny_corpus), "--minutes", "0.05",
            "--scratch", "--mix", "0.25", "--also-report", report, "--out", str(out),
            "--matmul-rounds", "1"]
    assert bench.main(argv) == 0
    found = report_of(out / "adaptation.json", "adaptation")["results"]
    assert [(r["kind"], r["minutes"]) for r in found["runs"]] == [("adapted", 0.05),
                                                                   ("scratch", 0.05)]
    for row in found["runs"]:
        assert 0 <= row["bleu"] <= 100 and "bleu_parent" in row and row["updates"] > 0
    assert set(found["parent"]) == {"bleu", "bleu_parent"}
    # The same corpus: the child's vocabulary is the parent's, its OOV rate the same.
    assert 0 <= found["source_oov"]["child"] == found["source_oov"]["parent"] < 1
    from PIL import Image

    with Image.open(out / "adaptation.png") as figure:  # the further split's panel beside
        assert figure.size == (1320, 480)
    child = json.loads((out / "runs" / "adapted-0.05min" / "data.json").read_text())
    assert child["mix"]["fraction"] == 0.25 and child["parent"]
    # A child as `keras-nmt train --init-from` makes one: no recipe, so no warm-up.
    config = json.loads((out / "runs" / "adapted-0.05min" / "config.json").read_text())
    assert config["warmup_steps"] == 0
    # Resumable: finished runs are not trained again.
    stamp = (out / "runs" / "scratch-0.05min" / "summary.json").stat().st_mtime_ns
    assert bench.main(argv) == 0
    assert (out / "runs" / "scratch-0.05min" / "summary.json").stat().st_mtime_ns == stamp


@pytest.mark.slow  # exports with --constrained: one ONNX conversion more, about a minute
def test_completion_latency_through_the_server(tiny_run, tiny_corpus, tmp_path):
    from keras_nmt.cli import export

    out = tmp_path / "export"
    assert export.main([str(tiny_run), "--out", str(out), "--onnx", "--constrained",
                        "--quiet"]) == 0
    bench = load("completion_latency")
    report = tmp_path / "completion.json"
    assert bench.main([str(out), "--sentences", str(tiny_corpus / "valid.en"), "--count", "4",
                       "--tokens", "8", "--rounds", "1", "--no-int8", "--matmul-rounds", "1",
                       "--json", str(report)]) == 0
    found = report_of(report, "completion_latency")["results"]
    assert found["sentences"] == 4 and found["starts_with_prefix"] == 1.0
    assert 0 < found["completion"]["p50_ms"] <= found["completion"]["max_ms"]
    assert found["exit_status"] == 0


def test_text_agreement_on_the_tiny_corpus(tiny_corpus, tmp_path, capsys):
    from keras_nmt.text.twin_check import KNOWN_DIFFERENCES

    bench = load("text_agreement")
    out = tmp_path / "agreement.json"
    assert bench.main(["--data", str(tiny_corpus), "--splits", "valid", "--matmul-rounds", "1",
                       "--json", str(out)]) == 0
    results = report_of(out, "text_agreement")["results"]
    assert [(row["file"], row["lines"]) for row in results["files"]] == [
        (f"{tiny_corpus.name}/valid.en", 30), (f"{tiny_corpus.name}/valid.fr", 30)]
    assert results["total"] == {"lines": 60, "tokenize": 0, "detokenize": 0,
                                "split_sentences": 0}
    assert set(results["classes"]) >= {"L", "N", "Z"}
    assert {name: found["assigned_in_python"] for name, found in results["classes"].items()
            if found["assigned_in_python"]} == {
        name: [f"U+{c:04X}" for c in points] for name, points in KNOWN_DIFFERENCES.items()}
    assert "split_sentences differs" in capsys.readouterr().out


def test_text_agreement_compares_the_javascript_rules_too(tiny_corpus, tmp_path, capsys):
    import shutil

    if shutil.which("node") is None:
        pytest.skip("node (Node.js) is not on PATH: --js runs the JavaScript rules in it")
    from keras_nmt.web.rules_check import KNOWN_JS_DIFFERENCES

    bench = load("text_agreement")
    out = tmp_path / "agreement.json"
    assert bench.main(["--data", str(tiny_corpus), "--splits", "valid", "--js",
                       "--matmul-rounds", "1", "--json", str(out)]) == 0
    results = report_of(out, "text_agreement")["results"]
    assert results["total"] == {"lines": 60, "tokenize": 0, "detokenize": 0, "split_sentences": 0,
                                "js tokenize": 0, "js detokenize": 0, "js split_sentences": 0,
                                "js token_words": 0}
    assert {name for name, found in results["js_classes"].items() if found["code_points"]} == set(
        KNOWN_JS_DIFFERENCES)
    assert all(found["known"] for found in results["js_classes"].values())
    assert results["js_classes"]["N"]["ranges"] == ["U+1246F", "U+12475-U+1247F", "U+12550-U+12686"]
    assert "js token_words differs" in capsys.readouterr().out



def test_text_agreement_streams_lines_as_the_corpus_readers_split_them(tmp_path):
    bench = load("text_agreement")
    path = tmp_path / "train.fr"
    path.write_text("a\rb\nc\u2028d\n\ne", encoding="utf-8", newline="")
    assert list(bench.chunks(path, size=2)) == [["a\rb", "c\u2028d"], ["", "e"]]
    assert list(bench.chunks(path, size=10)) == [["a\rb", "c\u2028d", "", "e"]]


def test_web_speed_times_every_path_on_the_same_sentences(tiny_web_export, tiny_corpus, tmp_path,
                                                          capsys):
    import shutil

    from support import CHROMEDRIVER, CHROMIUM

    if shutil.which("node") is None or not (CHROMIUM and CHROMEDRIVER):
        pytest.skip("needs node, Chromium and chromedriver (the web export's two runtimes)")
    bench = load("web_speed")
    out = tmp_path / "web.json"
    assert bench.main([str(tiny_web_export), "--sentences", str(tiny_corpus / "test.en"),
                       "--count", "12", "--batch-size", "4", "--latency-runs", "2",
                       "--matmul-rounds", "1", "--json", str(out)]) == 0
    results = report_of(out, "web_speed")["results"]
    paths = [row["path"] for row in results]
    assert paths[:3] == ["native, 2 threads", "node, 1 thread", "page, 1 thread"]
    assert paths[3].startswith("page, ")
    assert all(row["sentences_per_s"] > 0 and 0 <= row["equal_to_native"] <= 12 for row in results)
    assert results[0]["vs_native"] == 1.0 and results[1]["equal_to_node"] == 12
    pages = [row for row in results if row["path"].startswith("page")]
    assert all(row["latency_ms_p50"] > 0 and row["warm"]["ready_ms"] > 0 for row in pages)
    assert "x native" in capsys.readouterr().out
