"""An int8 twin of the exported ONNX model, for onnxruntime on CPUs.

onnxruntime's dynamic quantization stores the weights of MatMul (and Gather) nodes as
int8 and quantizes their activations on the fly, per call. Two things in our graph
stand in its way, and this module removes them:

- tf2onnx writes a matmul followed by a bias as one ``Gemm`` node, which
  ``quantize_dynamic`` leaves in float: :func:`split_gemm` rewrites every Gemm (in the
  main graph and in the Loop body, where decoding spends its time) as ``MatMul`` + ``Add``;
- the beam search is one ``Loop``, whose body is a subgraph: it is quantized only with
  ``EnableSubgraph``, and only where a weight is a constant there. tf2onnx hands the
  weights to the body as loop-carried values, passed through unchanged each iteration,
  and splits the GRU's kernel by gate inside the body: :func:`hoist_loop_constants`
  makes the body read those weights from the enclosing graph (ONNX subgraphs see outer
  names), and :func:`fold_constants` precomputes Split / Transpose of a constant.

Whether the result still translates well is the export's business
(:func:`keras_nmt.export.exporter.int8_check`): it compares BLEU on a sample and refuses
an int8 model that falls more than a stated bound behind the float one.
"""

from __future__ import annotations

import pathlib
import tempfile

import numpy as np


def _subgraphs(graph):
    from onnx import AttributeProto

    for node in graph.node:
        for attribute in node.attribute:
            if attribute.type == AttributeProto.GRAPH:
                yield attribute.g
            elif attribute.type == AttributeProto.GRAPHS:
                yield from attribute.graphs


def _constant_nodes(graph) -> dict:
    from onnx import numpy_helper

    values = {}
    for node in graph.node:
        if node.op_type == "Constant":
            for attribute in node.attribute:
                if attribute.name == "value":
                    values[node.output[0]] = numpy_helper.to_array(attribute.t)
    return values


def _initializer_scope(graph, outer: dict) -> dict:
    """The constants ``graph`` can read: its initializers and Constant nodes, and those
    of the graphs around it."""
    from onnx import numpy_helper

    scope = dict(outer)
    for initializer in graph.initializer:
        scope[initializer.name] = numpy_helper.to_array(initializer)
    scope.update(_constant_nodes(graph))
    return scope


def _rewrite(model, rewrite) -> int:
    """Walk every graph, enclosing ones first, with the constants in scope:
    ``rewrite(node, graph, scope)`` returns None to keep a node, or the nodes that
    replace it. Returns how many nodes were replaced."""
    count = 0

    def visit(graph, outer: dict) -> None:
        nonlocal count
        scope = _initializer_scope(graph, outer)
        nodes = []
        for node in graph.node:
            replacement = rewrite(node, graph, scope)
            if replacement is None:
                nodes.append(node)
            else:
                nodes.extend(replacement)
                count += 1
        del graph.node[:]
        graph.node.extend(nodes)
        for subgraph in _subgraphs(graph):
            visit(subgraph, scope)

    visit(model.graph, {})
    return count


def split_gemm(model) -> int:
    """Rewrite, in place, every ``Gemm`` (alpha = beta = 1, A not transposed) as MatMul
    + Add, transposing a constant B when ``transB`` is set. Returns how many were
    rewritten; a Gemm of another form is left as it is."""
    from onnx import helper, numpy_helper

    def rewrite(node, graph, scope):
        attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if (node.op_type != "Gemm" or attributes.get("alpha", 1.0) != 1.0
                or attributes.get("beta", 1.0) != 1.0 or attributes.get("transA", 0)):
            return None
        weight = node.input[1]
        if attributes.get("transB", 0):
            if weight not in scope:
                return None
            weight = f"{node.name}_kernel"
            graph.initializer.append(numpy_helper.from_array(
                np.ascontiguousarray(scope[node.input[1]].T), weight))
        product = f"{node.output[0]}_matmul"
        nodes = [helper.make_node("MatMul", [node.input[0], weight], [product],
                                  name=f"{node.name}_matmul")]
        if len(node.input) > 2 and node.input[2]:
            nodes.append(helper.make_node("Add", [product, node.input[2]], [node.output[0]],
                                          name=f"{node.name}_add"))
        else:
            nodes.append(helper.make_node("Identity", [product], [node.output[0]],
                                          name=f"{node.name}_out"))
        return nodes

    return _rewrite(model, rewrite)


def _rename_inputs(graph, old: str, new: str, keep: str | None = None) -> None:
    """Every use of ``old`` in ``graph`` and its subgraphs reads ``new`` instead, except
    the Identity whose output is ``keep`` (a loop body's pass-through of ``old``)."""
    for node in graph.node:
        if keep is not None and node.op_type == "Identity" and node.output[0] == keep:
            continue
        for i, name in enumerate(node.input):
            if name == old:
                node.input[i] = new
    for subgraph in _subgraphs(graph):
        _rename_inputs(subgraph, old, new)


def hoist_loop_constants(model) -> int:
    """In every Loop whose body passes a loop-carried value through unchanged and whose
    initial value is a constant of the enclosing graphs, make the body read the constant
    itself. Returns how many values were hoisted."""
    count = 0

    def visit(graph, outer: dict) -> None:
        nonlocal count
        scope = _initializer_scope(graph, outer)
        for node in graph.node:
            if node.op_type != "Loop":
                continue
            body = next(a.g for a in node.attribute if a.name == "body")
            identities = {n.output[0]: n.input[0] for n in body.node if n.op_type == "Identity"}
            carried = len(node.input) - 2
            for i in range(carried):
                initial = node.input[2 + i]
                inside = body.input[2 + i].name
                out = body.output[1 + i].name
                if initial in scope and (out == inside or identities.get(out) == inside):
                    _rename_inputs(body, inside, initial, keep=out)
                    count += 1
        for subgraph in _subgraphs(graph):
            visit(subgraph, scope)

    visit(model.graph, {})
    return count


def fold_constants(model) -> int:
    """Replace Split and Transpose nodes of constants by their results (initializers of
    the same graph), in every graph. Returns how many nodes were folded."""
    from onnx import helper, numpy_helper

    def rewrite(node, graph, scope):
        value = scope.get(node.input[0]) if node.input else None
        if value is None or node.op_type not in ("Split", "Transpose"):
            return None
        attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type == "Transpose":
            results = [np.transpose(value, attributes.get("perm"))]
        else:
            axis = attributes.get("axis", 0)
            sizes = attributes.get("split")
            if len(node.input) > 1 and node.input[1]:
                if node.input[1] not in scope:
                    return None
                sizes = scope[node.input[1]]
            if sizes is None:
                results = np.split(value, len(node.output), axis=axis)
            else:
                results = np.split(value, np.cumsum(np.asarray(sizes))[:-1], axis=axis)
        for name, result in zip(node.output, results):
            graph.initializer.append(numpy_helper.from_array(np.ascontiguousarray(result), name))
            scope[name] = result
        return []

    return _rewrite(model, rewrite)


def quantize(float_path: str | pathlib.Path, int8_path: str | pathlib.Path) -> dict:
    """Write the dynamically quantized (int8 weights) twin of ``float_path``; returns
    what was done (Gemm nodes split, node counts by type before and after)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    import logging

    model = onnx.load(str(float_path))
    hoisted = hoist_loop_constants(model)
    folded = fold_constants(model)
    split = split_gemm(model)
    with tempfile.TemporaryDirectory(prefix="keras_nmt_int8_") as tmp:
        prepared = pathlib.Path(tmp) / "split.onnx"
        onnx.save_model(model, str(prepared))
        # The quantizer logs a warning, with a tensor dump, for every tensor whose type
        # its shape inference cannot tell (most of the loop's): nothing a user can act on.
        logging.disable(logging.WARNING)
        try:
            quantize_dynamic(str(prepared), str(int8_path), weight_type=QuantType.QInt8,
                             extra_options={"EnableSubgraph": True})
        finally:
            logging.disable(logging.NOTSET)
    quantized = onnx.load(str(int8_path))
    onnx.checker.check_model(quantized)
    return {"gemm_split": split, "hoisted": hoisted, "folded": folded,
            "float_ops": op_counts(model), "int8_ops": op_counts(quantized)}


def op_counts(model) -> dict[str, int]:
    """Node counts by op type over the graph and its subgraphs."""
    counts: dict[str, int] = {}

    def visit(graph) -> None:
        for node in graph.node:
            counts[node.op_type] = counts.get(node.op_type, 0) + 1
        for subgraph in _subgraphs(graph):
            visit(subgraph)

    visit(model.graph)
    return dict(sorted(counts.items()))
