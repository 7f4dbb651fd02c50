"""The ONNX graph rewrites every ONNX export gets: a Loop's invariants read from outside
it, their carried copies dropped, dead nodes pruned, nodes in order; and how tf2onnx is
asked to convert."""

import numpy as np
import pytest

from keras_nmt.export import onnx_rewrites
from support import onnx_files
from onnx_models import loop_model


def _model_and_input():
    rng = np.random.default_rng(5)
    weight = rng.normal(size=(4, 20)).astype(np.float32)
    columns = np.array([0, 3, 19], np.int32)
    return weight, columns, rng.normal(size=(3, 4)).astype(np.float32)


def _run(model, x, outputs=("y",)):
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(list(outputs), {"x": x})


def _loop(model):
    return next(n for n in model.graph.node if n.op_type == "Loop")


def test_tidy_reads_invariants_from_outside_the_loop():
    import onnx

    weight, columns, x = _model_and_input()
    model = loop_model(weight, columns)
    before = _run(model, x)[0]
    assert onnx_rewrites.tidy(model) == {"hoisted": 3, "carried_dropped": 3,
                                      "columns_as_rows": 1, "pruned": 0}
    onnx.checker.check_model(model)
    loop = _loop(model)
    assert list(loop.input) == ["trips", "cond"] and list(loop.output) == ["y"]
    body = loop.attribute[0].g
    assert [n.op_type for n in body.node] == ["MatMul", "Identity"]
    assert list(body.node[0].input) == ["x", "cols"]  # the enclosing graph's names
    np.testing.assert_array_equal(_run(model, x)[0], before)
    np.testing.assert_allclose(before[1], x @ weight[:, columns], rtol=1e-5)


def test_a_carried_value_read_after_the_loop_stays():
    weight, columns, x = _model_and_input()
    model = loop_model(weight, columns, keep_last_w=True)
    stats = onnx_rewrites.tidy(model)
    assert stats["hoisted"] == 3 and stats["carried_dropped"] == 2
    assert list(_loop(model).output) == ["w_last", "y"]
    y, w_last = _run(model, x, ("y", "w_last"))
    np.testing.assert_array_equal(w_last, weight)
    np.testing.assert_allclose(y[0], x @ weight[:, columns], rtol=1e-5)


def test_sort_puts_what_a_body_reads_before_its_loop():
    """After hoisting, the body reads ``cols`` from the enclosing graph: a node order
    that ignores that (onnxruntime's quantizer's) puts its Gather after the Loop."""
    import onnx

    weight, columns, x = _model_and_input()
    model = loop_model(weight, columns)
    onnx_rewrites.tidy(model)
    nodes = list(model.graph.node)
    del model.graph.node[:]
    model.graph.node.extend(reversed(nodes))  # Loop first
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(model)
    onnx_rewrites.sort_nodes(model)
    assert [n.op_type for n in model.graph.node] == ["Gather", "Transpose", "Loop"]
    onnx.checker.check_model(model)
    np.testing.assert_allclose(_run(model, x)[0][0], x @ weight[:, columns], rtol=1e-5)


@pytest.mark.parametrize("axis", [1, -1])
def test_columns_of_a_constant_are_gathered_as_rows_of_its_transpose(axis):
    """Gather(W, i, axis=1) of a constant W becomes Transpose(Gather(W^T, i, axis=0)),
    with the same values; W itself goes when nothing else reads it. A Gather of rows, or
    of a value that is not a constant, stays as it is."""
    from onnx import TensorProto, helper, numpy_helper

    weight, columns, _ = _model_and_input()
    graph = helper.make_graph(
        [helper.make_node("Gather", ["w", "i"], ["cols"], name="cols", axis=axis),
         helper.make_node("Gather", ["w", "r"], ["rows"], name="rows", axis=0),
         helper.make_node("Gather", ["v", "i"], ["vcols"], name="vcols", axis=1)],
        "g", [helper.make_tensor_value_info("i", TensorProto.INT32, [None]),
              helper.make_tensor_value_info("v", TensorProto.FLOAT, [2, 20])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
         for n in ("cols", "rows", "vcols")],
        [numpy_helper.from_array(weight, "w"),
         numpy_helper.from_array(np.array([1], np.int32), "r")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    assert onnx_rewrites.gather_rows_not_columns(model) == 1
    assert [(n.name, n.op_type) for n in model.graph.node] == [
        ("cols_rows", "Gather"), ("cols", "Transpose"), ("rows", "Gather"), ("vcols", "Gather")]
    import onnxruntime as ort

    v = np.arange(40, dtype=np.float32).reshape(2, 20)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(["cols", "rows", "vcols"], {"i": columns, "v": v})
    np.testing.assert_array_equal(got[0], weight[:, columns])
    np.testing.assert_array_equal(got[1], weight[[1]])
    np.testing.assert_array_equal(got[2], v[:, columns])


def test_prune_removes_dead_nodes_and_initializers():
    from onnx import helper, numpy_helper

    weight, columns, x = _model_and_input()
    model = loop_model(weight, columns)
    model.graph.initializer.append(numpy_helper.from_array(np.ones(3, np.float32), "unused"))
    model.graph.node.append(helper.make_node("Relu", ["x"], ["dead"], name="dead"))
    model.graph.node.append(helper.make_node("Neg", ["dead"], ["deader"], name="deader"))
    assert onnx_rewrites.prune(model) == 2
    assert "unused" not in {i.name for i in model.graph.initializer}
    assert onnx_rewrites.op_counts(model) == {"Gather": 1, "Identity": 4, "Loop": 1, "MatMul": 1}


@pytest.mark.parametrize("file", ["nmt.onnx", "nmt.forced.onnx"])
def test_the_exported_loops_carry_no_weights(tiny_selecting_export, file):
    """Every ONNX export is tidied: the search's Loop (and the force decoder's) carries
    only what changes."""
    import onnx

    model = onnx.load(str(onnx_files(tiny_selecting_export) / file))
    loops = [n for n in model.graph.node if n.op_type == "Loop"]
    assert len(loops) == 2  # the encoder's recurrence and the search (or force decoding)
    for loop in loops:
        body = loop.attribute[0].g
        through = {n.output[0]: n.input[0] for n in body.node if n.op_type == "Identity"}
        inputs = [i.name for i in body.input[2:]]
        outputs = [o.name for o in body.output[1 : 1 + len(inputs)]]
        assert not [o for i, o in zip(inputs, outputs) if o == i or through.get(o) == i]


def _doubled_by_tf2onnx(tmp_path, monkeypatch, fail_without_rollback=False):
    """A tf.function x -> 2x converted by keras_nmt.export.onnx_conversion; returns the
    model's output on [1, 2] and the ``catch_errors`` of each tf2onnx optimizer run."""
    import tensorflow as tf
    import tf2onnx.optimizer

    from keras_nmt.export import onnx_conversion

    optimize, asked = tf2onnx.optimizer.optimize_graph, []

    def recorded(graph, catch_errors=True, optimizers=None):
        asked.append(catch_errors)
        if fail_without_rollback and not catch_errors:
            raise RuntimeError("an optimizer pass failed")
        return optimize(graph, catch_errors, optimizers)

    monkeypatch.setattr(tf2onnx.optimizer, "optimize_graph", recorded)
    signature = [tf.TensorSpec([None], tf.float32, name="x")]
    model = onnx_conversion._convert(lambda x: tf.identity(2.0 * x, name="y"), signature,
                          tmp_path / "double.onnx", onnx_conversion.OPSET)
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.array([1.0, 2.0], np.float32)
    return session.run(None, {session.get_inputs()[0].name: x})[0], asked


def test_conversion_skips_tf2onnx_s_rollback_copies(tmp_path, monkeypatch):
    """tf2onnx deep-copies the graph before every optimizer pass unless its variable says
    not to (14% of an export): the export sets it for the conversion only."""
    import os

    monkeypatch.delenv("TF2ONNX_CATCH_ERRORS", raising=False)
    doubled, asked = _doubled_by_tf2onnx(tmp_path, monkeypatch)
    np.testing.assert_array_equal(doubled, [2.0, 4.0])
    assert asked == [False]
    assert "TF2ONNX_CATCH_ERRORS" not in os.environ


def test_a_failing_pass_converts_again_with_rollback(tmp_path, monkeypatch):
    monkeypatch.delenv("TF2ONNX_CATCH_ERRORS", raising=False)
    doubled, asked = _doubled_by_tf2onnx(tmp_path, monkeypatch, fail_without_rollback=True)
    np.testing.assert_array_equal(doubled, [2.0, 4.0])
    assert asked == [False, True]
