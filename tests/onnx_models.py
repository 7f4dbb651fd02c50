"""Small hand-made ONNX models for the tests of the ONNX graph rewrites."""

import numpy as np


def loop_model(weight, columns, keep_last_w: bool = False):
    """y_i = x @ W[:, columns] for 2 iterations of a Loop (a scan output), which carries x,
    W and the columns' Gather unchanged, as tf2onnx hands a search's weights to its body.
    ``keep_last_w``: the Loop's final W is an output of the graph too."""
    from onnx import TensorProto, helper, numpy_helper

    def value(name, shape, kind=TensorProto.FLOAT):
        return helper.make_tensor_value_info(name, kind, shape)

    carried = [("x", [3, 4]), ("w", list(weight.shape)), ("cols", [4, len(columns)])]
    body = helper.make_graph(
        [helper.make_node("MatMul", ["x_in", "cols_in"], ["y_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])]
        + [helper.make_node("Identity", [f"{n}_in"], [f"{n}_out"]) for n, _ in carried],
        "body",
        [value("i", [], TensorProto.INT64), value("cond_in", [], TensorProto.BOOL)]
        + [value(f"{n}_in", shape) for n, shape in carried],
        [value("cond_out", [], TensorProto.BOOL)]
        + [value(f"{n}_out", shape) for n, shape in carried] + [value("y_out", [3, len(columns)])])
    graph = helper.make_graph(
        [helper.make_node("Gather", ["w", "columns"], ["cols"], name="columns", axis=1),
         helper.make_node("Loop", ["trips", "cond", "x", "w", "cols"],
                          ["x_last", "w_last", "cols_last", "y"], name="loop", body=body)],
        "g", [value("x", [3, 4])],
        [value("y", [2, 3, len(columns)])] + ([value("w_last", list(weight.shape))] if keep_last_w else []),
        [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(columns, "columns"),
         numpy_helper.from_array(np.array(2, np.int64), "trips"),
         numpy_helper.from_array(np.array(True), "cond")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
