"""An int8 twin of the exported ONNX model, for onnxruntime on CPUs.

onnxruntime's dynamic quantization stores the weights of MatMul (and Gather) nodes as
int8 and quantizes their activations on the fly, per call. Three things in our graph
stand in its way, and this module removes them:

- tf2onnx writes a matmul followed by a bias as one ``Gemm`` node, which
  ``quantize_dynamic`` leaves in float: :func:`split_gemm` rewrites every Gemm (in the
  main graph and in the Loop body, where decoding spends its time) as ``MatMul`` + ``Add``;
- the beam search is one ``Loop``, whose body is a subgraph: it is quantized only with
  ``EnableSubgraph``, and only where a weight is a constant there. The float export
  already makes the body read its weights from the enclosing graph
  (:func:`keras_nmt.export.onnx_graph.tidy`); tf2onnx also splits the GRU's kernel by
  gate inside the body, and :func:`fold_constants` precomputes Split / Transpose of a
  constant;
- a selecting search's output layer is gathered from the whole one once per batch (as
  rows of its transpose: :func:`keras_nmt.export.onnx_graph.gather_rows_not_columns`),
  so its product's weight is no constant: :func:`quantize_gathered_columns` gathers it
  from an int8 copy instead.

Whether the result still translates well is the export's business
(:func:`keras_nmt.export.exporter.int8_check`): it compares BLEU on a sample and refuses
an int8 model that falls more than a stated bound behind the float one.
"""

from __future__ import annotations

import pathlib
import tempfile

import numpy as np

# int8 weights use 7 bits (-63..63), as onnxruntime's ``reduce_range``. On x86 CPUs
# without VNNI (AVX2, and AVX-512 before Cascade Lake), its uint8 x int8 kernels add
# pairs of products into 16 bits, which saturate (2 x 255 x 127 > 32,767): a full-range
# weight gave products wrong by up to 70% of a column's size there, with no error. With
# 7 bits the pair sums fit (2 x 255 x 63 < 32,767), on every CPU.
WEIGHT_LEVELS = 63

from keras_nmt.export import onnx_graph


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

    return onnx_graph.rewrite_nodes(model, rewrite)


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

    return onnx_graph.rewrite_nodes(model, rewrite)


def quantize_gathered_columns(model) -> tuple[int, list[str]]:
    """A product with columns gathered from a constant, MatMul(x, W[:, columns]) written
    as :func:`~keras_nmt.export.onnx_graph.gather_rows_not_columns` leaves it,
    MatMul(x, Transpose(Gather(W^T, columns, axis=0))), becomes an int8 one: the rows of
    W^T are gathered in int8 (symmetric, one scale per row, a column of W) with their
    scales, and the product is onnxruntime's DynamicQuantizeMatMul, which quantizes x per
    call. This is the selecting search's output layer: its columns are gathered once per
    batch, so they are not a constant the quantizer would see. Returns how many products
    were rewritten, and the names of the nodes it wrote, which the quantizer must leave as
    they are (it would quantize the scales' Gather)."""
    from onnx import helper, numpy_helper

    producers = {}  # name -> (node, its graph, the constants that graph sees)

    def collect(graph, outer: dict) -> None:
        scope = onnx_graph.initializer_scope(graph, outer)
        for node in graph.node:
            for name in node.output:
                producers[name] = (node, graph, scope)
        for subgraph in onnx_graph.subgraphs(graph):
            collect(subgraph, scope)

    def attributes(node) -> dict:
        return {a.name: helper.get_attribute_value(a) for a in node.attribute}

    collect(model.graph, {})
    matches = []
    for name, (node, graph, _) in list(producers.items()):
        if node.op_type != "MatMul" or name != node.output[0] or node.input[1] not in producers:
            continue
        transpose, _, _ = producers[node.input[1]]
        if (transpose.op_type != "Transpose" or attributes(transpose).get("perm") != [1, 0]
                or transpose.input[0] not in producers):
            continue
        gather, home, scope = producers[transpose.input[0]]
        rows = scope.get(gather.input[0])
        if (gather.op_type == "Gather" and attributes(gather).get("axis", 0) == 0
                and rows is not None and rows.ndim == 2 and rows.dtype == np.float32):
            matches.append((node, transpose, gather, home, rows))
    # Edited in place: rebuilding a graph's node list would copy the Loop nodes, and the
    # bodies held in ``matches`` with them.
    done: dict[str, tuple[str, str]] = {}
    written = []
    for node, transpose, gather, home, rows in matches:
        if transpose.output[0] not in done:
            base = transpose.name or transpose.output[0]
            scales = np.abs(rows).max(axis=1) / WEIGHT_LEVELS
            scales[scales == 0] = 1.0
            table = np.clip(np.rint(rows / scales[:, None]), -WEIGHT_LEVELS,
                            WEIGHT_LEVELS).astype(np.int8)
            names = (f"{base}_int8", f"{base}_int8_scale")
            home.initializer.extend([numpy_helper.from_array(table, f"{names[0]}_table"),
                                     numpy_helper.from_array(scales.astype(np.float32),
                                                             f"{names[1]}_table")])
            at = list(home.node).index(transpose) + 1
            new = [helper.make_node("Gather", [f"{names[0]}_table", gather.input[1]],
                                    [f"{names[0]}_rows"], name=f"{names[0]}_rows", axis=0),
                   helper.make_node("Transpose", [f"{names[0]}_rows"], [names[0]],
                                    name=names[0], perm=[1, 0]),
                   helper.make_node("Gather", [f"{names[1]}_table", gather.input[1]],
                                    [names[1]], name=names[1], axis=0)]
            for offset, added in enumerate(new):
                home.node.insert(at + offset, added)
            done[transpose.output[0]] = names
            written += [added.name for added in new]
        quantized, scale = done[transpose.output[0]]
        x = node.input[0]
        node.op_type, node.domain = "DynamicQuantizeMatMul", "com.microsoft"
        node.name = f"{node.name}_int8_columns"
        del node.input[:]
        node.input.extend([x, quantized, scale])
        written.append(node.name)
    if matches and not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return len(matches), written


def quantize(float_path: str | pathlib.Path, int8_path: str | pathlib.Path) -> dict:
    """Write the dynamically quantized (int8 weights) twin of ``float_path``; returns
    what was done (Gemm nodes split, node counts by type before and after)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    import logging

    model = onnx.load(str(float_path))
    # The export's own float model is tidy already (onnx.convert); any other may not be.
    tidied = onnx_graph.tidy(model)
    folded = fold_constants(model)
    split = split_gemm(model)
    columns, written = quantize_gathered_columns(model)
    onnx_graph.prune(model)  # the float columns' Gather, now read by nobody
    with tempfile.TemporaryDirectory(prefix="keras_nmt_int8_") as tmp:
        prepared = pathlib.Path(tmp) / "split.onnx"
        onnx.save_model(model, str(prepared))
        # The quantizer logs a warning, with a tensor dump, for every tensor whose type
        # its shape inference cannot tell (most of the loop's): nothing a user can act on.
        # It must leave alone what the loop body reads from outside: it loses the values
        # of the outer nodes it rewrites that only a subgraph reads.
        logging.disable(logging.WARNING)
        try:
            quantize_dynamic(str(prepared), str(int8_path), weight_type=QuantType.QInt8,
                             reduce_range=True,  # WEIGHT_LEVELS
                             nodes_to_exclude=written + onnx_graph.read_by_subgraphs(model),
                             extra_options={"EnableSubgraph": True})
        finally:
            logging.disable(logging.NOTSET)
    quantized = onnx.load(str(int8_path))
    onnx_graph.sort_nodes(quantized)
    onnx.checker.check_model(quantized)
    onnx.save_model(quantized, str(int8_path))
    return {"gemm_split": split, "folded": folded, **tidied,
            "int8_columns": columns,
            "float_ops": onnx_graph.op_counts(model), "int8_ops": onnx_graph.op_counts(quantized)}
