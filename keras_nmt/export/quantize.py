"""An int8 twin of the exported ONNX model, for onnxruntime on CPUs: onnxruntime's dynamic
quantization (int8 weights of MatMul and Gather, activations quantized per call), with the
rewrites our graph needs first:

- :func:`split_gemm`: every ``Gemm`` (main graph and ``Loop`` body) becomes ``MatMul`` +
  ``Add``, which ``quantize_dynamic`` leaves in float otherwise;
- :func:`fold_constants`: the Loop body's Split / Transpose of a constant precomputed, so
  ``EnableSubgraph`` finds constant weights there;
- :func:`quantize_gathered_columns`: a selecting search gathers its output layer from an
  int8 copy;
- :func:`quantize_main_graph`: a main graph holding an ``If`` (the constrained search) is
  quantized here, which onnxruntime's quantizer cannot do and still load.

Whether the result translates well is :func:`keras_nmt.export.exporter.int8_check`'s
business. Cost: linear in the model's nodes and weights.
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

from keras_nmt.export import onnx_rewrites


def int8_table(weight: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """``weight`` (2-D) as symmetric int8 steps of ``WEIGHT_LEVELS`` levels, with one
    float32 scale per column (``axis=0``: the maximum over each column) or per row
    (``axis=1``); an all-zero column or row gets scale 1."""
    scales = np.abs(weight).max(axis=axis) / WEIGHT_LEVELS
    scales[scales == 0] = 1.0
    shaped = scales[None, :] if axis == 0 else scales[:, None]
    steps = np.clip(np.rint(weight / shaped), -WEIGHT_LEVELS, WEIGHT_LEVELS).astype(np.int8)
    return steps, scales.astype(np.float32)


def split_gemm(model) -> int:
    """Rewrite, in place, every ``Gemm`` (alpha = beta = 1, A not transposed) as MatMul
    + Add, transposing a constant B when ``transB`` is set. Returns how many were
    rewritten; a Gemm of another form is left as it is."""
    from onnx import helper, numpy_helper

    def rewrite(node, graph, scope):
        attributes = onnx_rewrites.attributes(node)
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

    return onnx_rewrites.rewrite_nodes(model, rewrite)


def fold_constants(model) -> int:
    """Replace Split and Transpose nodes of constants by their results (initializers of
    the same graph), in every graph. Returns how many nodes were folded."""
    from onnx import numpy_helper

    def rewrite(node, graph, scope):
        value = scope.get(node.input[0]) if node.input else None
        if value is None or node.op_type not in ("Split", "Transpose"):
            return None
        attributes = onnx_rewrites.attributes(node)
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

    return onnx_rewrites.rewrite_nodes(model, rewrite)


def quantize_gathered_columns(model) -> tuple[int, list[str]]:
    """A product with columns gathered from a constant, MatMul(x, W[:, columns]) written
    as :func:`~keras_nmt.export.onnx_rewrites.gather_rows_not_columns` leaves it,
    MatMul(x, Transpose(Gather(W^T, columns, axis=0))), becomes an int8 one: the rows of
    W^T are gathered in int8 (symmetric, one scale per row, a column of W) with their
    scales, and the product is onnxruntime's DynamicQuantizeMatMul, which quantizes x per
    call. This is the selecting search's output layer: its columns are gathered once per
    batch, so they are not a constant the quantizer would see. Returns how many products
    were rewritten, and the names of the nodes it wrote, which the quantizer must leave as
    they are (it would quantize the scales' Gather)."""
    from onnx import helper, numpy_helper

    products = []  # each MatMul, with what its graph sees: name -> (node, graph, constants)

    def collect(graph, outer: dict, seen: dict) -> None:
        # Sibling subgraphs (a conditional's branches) may name their values alike: each
        # graph sees its own values and those of the graphs around it, no others.
        scope = onnx_rewrites.initializer_scope(graph, outer)
        seen = dict(seen)
        for node in graph.node:
            for name in node.output:
                seen[name] = (node, graph, scope)
        products.extend((node, seen) for node in graph.node if node.op_type == "MatMul")
        for subgraph in onnx_rewrites.subgraphs(graph):
            collect(subgraph, scope, seen)

    def source(name: str, seen: dict):
        """The node that computes ``name``, through the Identity nodes that pass it into a
        conditional's branch."""
        node = seen[name][0]
        while node.op_type == "Identity" and node.input[0] in seen:
            node = seen[node.input[0]][0]
        return node

    collect(model.graph, {}, {})
    matches = []
    for node, seen in products:
        if node.input[1] not in seen:
            continue
        transpose = source(node.input[1], seen)
        if (transpose.op_type != "Transpose"
                or onnx_rewrites.attributes(transpose).get("perm") != [1, 0]
                or transpose.input[0] not in seen):
            continue
        gather, home, scope = seen[transpose.input[0]]
        rows = scope.get(gather.input[0])
        if (gather.op_type == "Gather" and onnx_rewrites.attributes(gather).get("axis", 0) == 0
                and rows is not None and rows.ndim == 2 and rows.dtype == np.float32):
            matches.append((node, transpose, gather, home, rows))
    # Edited in place: rebuilding a graph's node list would copy the Loop nodes, and the
    # bodies held in ``matches`` with them.
    done: dict[str, tuple[str, str]] = {}
    written = []
    for node, transpose, gather, home, rows in matches:
        if transpose.output[0] not in done:
            base = transpose.name or transpose.output[0]
            table, scales = int8_table(rows, axis=1)
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


def quantize_main_graph(model) -> list[str]:
    """The main graph's weights in int8, written here rather than by onnxruntime's
    quantizer: each product with a constant matrix, MatMul(x, W), becomes
    DynamicQuantizeMatMul (one scale per column of W), and each Gather of rows of a constant
    matrix (an embedding) gathers int8 rows and their scales, one per row. For a model
    whose main graph holds an If (the constrained search's choice of loop): onnxruntime 1.31
    aborts loading such a model once its own quantizer has rewritten a node of the main
    graph. Returns the names of the nodes written."""
    from onnx import helper, numpy_helper

    scope = onnx_rewrites.initializer_scope(model.graph, {})
    written = []

    graph = model.graph

    def rewrite(node):
        if not node.input:
            return None
        weight = scope.get(node.input[1] if node.op_type == "MatMul" else node.input[0])
        if weight is None or weight.ndim != 2 or weight.dtype != np.float32:
            return None
        name = node.name or node.output[0]
        if node.op_type == "MatMul":
            quantized, scales = int8_table(weight, axis=0)
            graph.initializer.extend([numpy_helper.from_array(quantized, f"{name}_int8"),
                                      numpy_helper.from_array(scales, f"{name}_int8_scale")])
            written.append(name)
            return [helper.make_node("DynamicQuantizeMatMul",
                                     [node.input[0], f"{name}_int8", f"{name}_int8_scale"],
                                     list(node.output), name=name, domain="com.microsoft")]
        if node.op_type != "Gather" or onnx_rewrites.attributes(node).get("axis", 0) != 0:
            return None
        quantized, scales = int8_table(weight, axis=1)
        graph.initializer.extend([numpy_helper.from_array(quantized, f"{name}_int8"),
                                  numpy_helper.from_array(scales, f"{name}_int8_scale"),
                                  numpy_helper.from_array(np.array([-1], np.int64),
                                                          f"{name}_last_axis")])
        ids, out = node.input[1], node.output[0]
        nodes = [
            helper.make_node("Gather", [f"{name}_int8", ids], [f"{out}_int8"],
                             name=f"{name}_int8"),
            helper.make_node("Cast", [f"{out}_int8"], [f"{out}_steps"], name=f"{name}_steps",
                             to=1),  # float
            helper.make_node("Gather", [f"{name}_int8_scale", ids], [f"{out}_scale"],
                             name=f"{name}_scale"),
            helper.make_node("Unsqueeze", [f"{out}_scale", f"{name}_last_axis"],
                             [f"{out}_scales"], name=f"{name}_scales"),
            helper.make_node("Mul", [f"{out}_steps", f"{out}_scales"], [out], name=name),
        ]
        written.extend(n.name for n in nodes)
        return nodes

    nodes = []
    for node in graph.node:  # the main graph's, not its subgraphs'
        replacement = rewrite(node)
        nodes.extend([node] if replacement is None else replacement)
    del graph.node[:]
    graph.node.extend(nodes)
    if written and not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return written


def quantize(float_path: str | pathlib.Path, int8_path: str | pathlib.Path) -> dict:
    """Write the dynamically quantized (int8 weights) twin of ``float_path``; returns
    what was done (Gemm nodes split, node counts by type before and after)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    import logging

    model = onnx.load(str(float_path))
    # The export's own float model is tidy already (onnx_conversion.convert); any other may not be.
    tidied = onnx_rewrites.tidy(model)
    folded = fold_constants(model)
    split = split_gemm(model)
    columns, written = quantize_gathered_columns(model)
    onnx_rewrites.prune(model)  # the float columns' Gather, now read by nobody
    # With an If in the main graph, its nodes are left to quantize_main_graph, after
    # onnxruntime's quantizer (whose shape inference must see them as they were).
    conditional = any(node.op_type == "If" for node in model.graph.node)
    with tempfile.TemporaryDirectory(prefix="keras_nmt_int8_") as tmp:
        prepared = pathlib.Path(tmp) / "split.onnx"
        onnx.save_model(model, str(prepared))
        # The quantizer logs a warning, with a tensor dump, for every tensor whose type
        # its shape inference cannot tell (most of the loop's): nothing a user can act on.
        # It must leave alone what the loop body reads from outside: it loses the values
        # of the outer nodes it rewrites that only a subgraph reads.
        excluded = written + onnx_rewrites.read_by_subgraphs(model)
        if conditional:
            excluded += [node.name for node in model.graph.node]
        logging.disable(logging.WARNING)
        try:
            quantize_dynamic(str(prepared), str(int8_path), weight_type=QuantType.QInt8,
                             reduce_range=True,  # WEIGHT_LEVELS
                             nodes_to_exclude=excluded,
                             extra_options={"EnableSubgraph": True})
        finally:
            logging.disable(logging.NOTSET)
    quantized = onnx.load(str(int8_path))
    main_graph = quantize_main_graph(quantized) if conditional else []
    onnx_rewrites.prune(quantized)  # the main graph's float weights, when rewritten
    onnx_rewrites.sort_nodes(quantized)
    onnx.checker.check_model(quantized)
    onnx.save_model(quantized, str(int8_path))
    return {"gemm_split": split, "folded": folded, **tidied,
            "int8_columns": columns, "main_graph_int8": len(main_graph),
            "float_ops": onnx_rewrites.op_counts(model),
            "int8_ops": onnx_rewrites.op_counts(quantized)}
