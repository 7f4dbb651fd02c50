"""The int8 ONNX export: Gemm split into MatMul + Add, dynamic quantization of the Loop
body, and the BLEU check that refuses a degraded int8 model."""

import io
import json

import numpy as np
import pytest

from keras_nmt.cli import export as export_cli
from keras_nmt.cli import onnx_translate as onnx_cli
from keras_nmt.core.errors import ExportError
from keras_nmt.export import exporter, onnx_rewrites, quantize
from support import onnx_files
from onnx_models import loop_model

BEAM = 2
SHORTLIST = (5, 2)  # the shared export's (conftest.tiny_selecting_export)


def _gemm_model(trans_b: int):
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(trans_b)
    weight = rng.normal(size=(3, 4) if trans_b else (4, 3)).astype(np.float32)
    bias = rng.normal(size=(3,)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w", "b"], ["y"], name="dense", transB=trans_b)],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(bias, "b")])
    # IR version 8 (onnx 1.23 writes a newer one than onnxruntime reads by default).
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("trans_b", [0, 1])
def test_split_gemm_keeps_the_function(trans_b):
    import onnx
    import onnxruntime as ort

    model = _gemm_model(trans_b)
    x = np.random.default_rng(9).normal(size=(2, 4)).astype(np.float32)

    def run(m):
        session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        return session.run(None, {"x": x})[0]

    before = run(model)
    assert quantize.split_gemm(model) == 1
    onnx.checker.check_model(model)
    assert onnx_rewrites.op_counts(model) == {"Add": 1, "MatMul": 1}
    np.testing.assert_allclose(run(model), before, rtol=1e-5, atol=1e-6)


def test_gathered_columns_become_an_int8_product(tmp_path):
    """The selecting search's output layer: W's columns gathered per batch, then a
    product in the loop. It becomes DynamicQuantizeMatMul on int8 columns with one scale
    per column, within int8 rounding of the float product; the float W is gone."""
    import onnx
    import onnxruntime as ort

    rng = np.random.default_rng(3)
    weight = rng.normal(size=(4, 50)).astype(np.float32)
    weight[:, 7] *= 100.0  # one scale per column: a large column costs the others nothing
    columns = np.array([1, 7, 9, 30, 49], np.int32)
    x = rng.normal(size=(3, 4)).astype(np.float32)
    float_path, int8_path = tmp_path / "f.onnx", tmp_path / "q.onnx"
    onnx.save_model(loop_model(weight, columns), str(float_path))
    done = quantize.quantize(float_path, int8_path)
    assert done["int8_columns"] == 1 and done["carried_dropped"] == 3
    model = onnx.load(str(int8_path))
    assert onnx_rewrites.op_counts(model).get("DynamicQuantizeMatMul") == 1
    assert "w" not in {i.name for i in model.graph.initializer}
    # 7-bit weights: onnxruntime's kernels on CPUs without VNNI saturate on 8-bit ones.
    tables = [onnx.numpy_helper.to_array(i) for i in model.graph.initializer
              if i.data_type == onnx.TensorProto.INT8]
    assert tables and max(int(np.abs(t.astype(np.int32)).max()) for t in tables) == 63
    session = ort.InferenceSession(str(int8_path), providers=["CPUExecutionProvider"])
    got = session.run(["y"], {"x": x})[0][1]
    want = x @ weight[:, columns]
    # Relative to each column's size: int8 steps of max|W[:, c]| / 127, x quantized too.
    error = np.abs(got - want) / np.abs(weight[:, columns]).max(axis=0)
    assert error.max() < 0.05, error
    assert np.abs(got[:, 1] - want[:, 1]).max() > 0  # int8, not the float product


def test_the_quantizer_leaves_what_the_loop_reads_from_outside(tmp_path, monkeypatch):
    """Without the column pass, the loop body reads the gathered columns (the Transpose of
    a Gather of rows) from the enclosing graph: onnxruntime's quantizer, left to rewrite
    such a node, loses its value ("unknown initializers/tensors"). The export keeps it out
    of the quantizer's hands; the Gather of rows before it is the quantizer's to store in
    int8, so the product is within int8 rounding of the float one."""
    import onnx
    import onnxruntime as ort

    monkeypatch.setattr(quantize, "quantize_gathered_columns", lambda model: (0, []))
    rng = np.random.default_rng(4)
    weight = rng.normal(size=(4, 30)).astype(np.float32)
    columns = np.array([2, 5, 29], np.int32)
    model = loop_model(weight, columns)
    onnx_rewrites.tidy(model)
    assert onnx_rewrites.read_by_subgraphs(model) == ["columns"]
    float_path, int8_path = tmp_path / "f.onnx", tmp_path / "q.onnx"
    onnx.save_model(model, str(float_path))
    quantize.quantize(float_path, int8_path)
    x = rng.normal(size=(3, 4)).astype(np.float32)
    session = ort.InferenceSession(str(int8_path), providers=["CPUExecutionProvider"])
    kept = {n.name: n.op_type for n in onnx.load(str(int8_path)).graph.node}
    assert kept["columns"] == "Transpose"
    got, want = session.run(["y"], {"x": x})[0][0], x @ weight[:, columns]
    assert (np.abs(got - want) / np.abs(weight).max()).max() < 0.05


def test_the_main_graph_is_quantized_in_place_of_the_quantizer(tmp_path):
    """A product with a constant matrix becomes DynamicQuantizeMatMul with one scale per
    column, a Gather of an embedding's rows gathers int8 rows and their scales: within
    int8 rounding of the float values, with no float matrix left once pruned."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(8)
    weight = rng.normal(size=(4, 6)).astype(np.float32)
    weight[:, 2] *= 50.0  # a large column costs the others nothing
    table = rng.normal(size=(9, 4)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["rows"], name="embed"),
         helper.make_node("MatMul", ["rows", "w"], ["y"], name="product")],
        "g", [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 3])],
        [helper.make_tensor_value_info("rows", TensorProto.FLOAT, [2, 3, 4]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 6])],
        [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(table, "table")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    written = quantize.quantize_main_graph(model)
    assert "product" in written and "embed" in written
    onnx_rewrites.prune(model)
    onnx.checker.check_model(model)
    assert not [i.name for i in model.graph.initializer if i.data_type == TensorProto.FLOAT
                and len(i.dims) == 2]
    ids = np.array([[0, 4, 8], [3, 3, 1]], np.int64)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rows, y = session.run(["rows", "y"], {"ids": ids})
    want_rows = table[ids]
    assert np.abs(rows - want_rows).max() <= np.abs(table).max(axis=1).max() / 63 / 2 + 1e-6
    assert np.abs(rows - want_rows).max() > 0  # int8, not the float table
    error = np.abs(y - want_rows @ weight) / (np.abs(weight).max(axis=0) * 4)
    assert error.max() < 0.05, error


@pytest.fixture(scope="module")
def int8_export(tiny_selecting_export):
    """tiny_run exported once (conftest) with --onnx --shortlist 5,2 --int8."""
    return tiny_selecting_export


def test_int8_export_quantizes_the_loop_body(int8_export, capsys):
    import onnx

    meta = json.loads((onnx_files(int8_export) / "nmt.onnx.json").read_text(encoding="utf-8"))
    entry = meta["int8"]
    # The selecting search's output layer, gathered per batch, is an int8 product too.
    assert entry["model"] == "nmt.int8.onnx" and entry["int8_columns"] == 1
    assert sum(entry["quantized_ops"].values()) > 0
    check = entry["check"]
    assert check["sentences"] > 0 and check["bleu_float"] - check["bleu_int8"] <= 5
    quantized = onnx.load(str(onnx_files(int8_export) / "nmt.int8.onnx"))
    # The decoder step runs in the Loop body: its matrix products are int8 there.
    # The search's Loop: the largest body (the encoder's recurrence is a Loop too).
    body = max((a.g for n in quantized.graph.node if n.op_type == "Loop" for a in n.attribute),
               key=lambda g: len(g.node))
    body_ops = onnx_rewrites.op_counts(onnx.helper.make_model(body))
    assert any("Integer" in op or "QuantizeMatMul" in op for op in body_ops), body_ops
    assert "Gemm" not in onnx_rewrites.op_counts(quantized)
    assert body_ops.get("DynamicQuantizeMatMul", 0) >= 1
    # No weight is dequantized whole per call: only gathered rows are (an embedding's).
    outer = [n for n in quantized.graph.node if n.op_type == "DequantizeLinear"]
    initializers = {i.name for i in quantized.graph.initializer}
    assert not [n.name for n in outer if n.input[0] in initializers]
    # onnx-translate runs it (one line out per line in).
    lines = "a b c\n\nthe man\n"
    assert onnx_cli.main([str(int8_export), "--int8", "--quiet"],
                         stdin=io.BytesIO(lines.encode())) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 3 and out[1] == ""


def _corrupted(path, tmp_path):
    """A copy of the int8 model with every weight scale multiplied by 30."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path))
    graphs = [model.graph]
    graphs += [a.g for n in model.graph.node for a in n.attribute if a.g.node]
    corrupted = 0
    for graph in graphs:
        for i, initializer in enumerate(graph.initializer):
            if initializer.name.endswith("_scale"):
                value = numpy_helper.to_array(initializer) * 30.0
                graph.initializer[i].CopyFrom(numpy_helper.from_array(value, initializer.name))
                corrupted += 1
    assert corrupted > 0
    target = tmp_path / "corrupt.int8.onnx"
    onnx.save_model(model, str(target))
    return target


def test_int8_check_refuses_a_degraded_model(int8_export, tiny_run, tmp_path, monkeypatch):
    from keras_nmt.rundir.run_directory import RunDir
    from keras_nmt.decoding.keras_translator import Translator

    run = RunDir(tiny_run).inspect("best")
    translator = Translator.from_run_dir(tiny_run)
    # References the float model matches (its own translations): a degraded int8 model
    # must lose BLEU against them. The barely trained model's real BLEU is about 0.
    words = translator.source_vocab.tokens[4:40]
    sentences = [" ".join(words[i : i + 4]) for i in range(0, 32, 4)]
    # Each line whole, as the check decodes its sample (the words hold "." and capitals).
    own = [t.text for t in translator.translate(sentences, beam_size=BEAM, shortlist=SHORTLIST,
                                                split_sentences=False)]
    monkeypatch.setattr(exporter, "_sample_pairs", lambda run, count: (sentences, own))
    float_path = onnx_files(int8_export) / "nmt.onnx"
    good = exporter.int8_check(float_path, onnx_files(int8_export) / "nmt.int8.onnx", run, translator,
                               BEAM, 1.0, SHORTLIST, max_drop=30.0)
    assert good["bleu_float"] > 99
    with pytest.raises(ExportError, match="int8 model is refused"):
        exporter.int8_check(float_path, _corrupted(onnx_files(int8_export) / "nmt.int8.onnx", tmp_path),
                            run, translator, BEAM, 1.0, SHORTLIST, max_drop=30.0)


def test_int8_needs_onnx(tiny_run, tmp_path, capsys):
    assert export_cli.main([str(tiny_run), "--out", str(tmp_path), "--int8"]) == 2
    assert "add --onnx" in capsys.readouterr().err
