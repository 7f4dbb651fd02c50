"""Rewrites of an exported ONNX graph that keep what it computes.

tf2onnx writes the beam search's ``tf.while_loop`` as an ONNX ``Loop`` whose body gets
every weight as a loop-carried value, passed through unchanged at each iteration.
:func:`tidy` makes the body read those values from the enclosing graph (ONNX subgraphs
see the names around them) and removes the carried copies: onnxruntime no longer passes
them around each step, and the int8 quantizer (:mod:`keras_nmt.export.quantize`) sees
the body's weights as the constants they are.
"""

from __future__ import annotations

import numpy as np


def node_subgraphs(node):
    """The graphs a node holds (a Loop's body, an If's branches)."""
    from onnx import AttributeProto

    for attribute in node.attribute:
        if attribute.type == AttributeProto.GRAPH:
            yield attribute.g
        elif attribute.type == AttributeProto.GRAPHS:
            yield from attribute.graphs


def attributes(node) -> dict:
    """A node's attributes by name, as Python values."""
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def subgraphs(graph):
    """The graphs held by ``graph``'s nodes (not those nested deeper)."""
    for node in graph.node:
        yield from node_subgraphs(node)


def _constant_nodes(graph) -> dict:
    from onnx import numpy_helper

    values = {}
    for node in graph.node:
        if node.op_type == "Constant":
            for attribute in node.attribute:
                if attribute.name == "value":
                    values[node.output[0]] = numpy_helper.to_array(attribute.t)
    return values


def initializer_scope(graph, outer: dict) -> dict:
    """The constants ``graph`` can read: its initializers and Constant nodes, and those
    of the graphs around it."""
    from onnx import numpy_helper

    scope = dict(outer)
    for initializer in graph.initializer:
        scope[initializer.name] = numpy_helper.to_array(initializer)
    scope.update(_constant_nodes(graph))
    return scope


def rewrite_nodes(model, rewrite) -> int:
    """Walk every graph, enclosing ones first, with the constants in scope:
    ``rewrite(node, graph, scope)`` returns None to keep a node, or the nodes that
    replace it. Returns how many nodes were replaced."""
    count = 0

    def visit(graph, outer: dict) -> None:
        nonlocal count
        scope = initializer_scope(graph, outer)
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
        for subgraph in subgraphs(graph):
            visit(subgraph, scope)

    visit(model.graph, {})
    return count


def _rename_inputs(graph, old: str, new: str, keep: str | None = None) -> None:
    """Every use of ``old`` in ``graph`` and its subgraphs reads ``new`` instead, except
    the Identity whose output is ``keep`` (a loop body's pass-through of ``old``)."""
    for node in graph.node:
        if keep is not None and node.op_type == "Identity" and node.output[0] == keep:
            continue
        for i, name in enumerate(node.input):
            if name == old:
                node.input[i] = new
    for subgraph in subgraphs(graph):
        _rename_inputs(subgraph, old, new)


def hoist_loop_invariants(model) -> int:
    """In every Loop whose body passes a loop-carried value through unchanged, make the
    body read the value it was given (ONNX subgraphs see the enclosing graphs' names).
    The carried copy is then read by nobody (:func:`drop_unused_carried`). Returns how
    many values were hoisted."""
    count = 0

    def visit(graph) -> None:
        nonlocal count
        for node in graph.node:
            if node.op_type != "Loop":
                continue
            body = _body(node)
            identities = {n.output[0]: n.input[0] for n in body.node if n.op_type == "Identity"}
            for i in range(len(node.input) - 2):
                initial = node.input[2 + i]
                inside = body.input[2 + i].name
                out = body.output[1 + i].name
                if initial and (out == inside or identities.get(out) == inside):
                    _rename_inputs(body, inside, initial, keep=out)
                    count += 1
        for subgraph in subgraphs(graph):
            visit(subgraph)

    visit(model.graph)
    return count


def _body(loop):
    return next(a.g for a in loop.attribute if a.name == "body")


def _uses(graph) -> dict[str, int]:
    """How many times each name is read in ``graph`` and its subgraphs (graph outputs
    included)."""
    counts: dict[str, int] = {}

    def visit(g) -> None:
        for node in g.node:
            for name in node.input:
                counts[name] = counts.get(name, 0) + 1
        for output in g.output:
            counts[output.name] = counts.get(output.name, 0) + 1
        for subgraph in subgraphs(g):
            visit(subgraph)

    visit(graph)
    return counts


def drop_unused_carried(model) -> int:
    """Remove the loop-carried values that a Loop's body only passes through and whose
    final value nobody reads. A carried constant that stays costs a copy per call, and
    when the quantizer turns it into int8 its DequantizeLinear of the whole tensor runs
    in every call (the target embeddings: 7M values). Returns how many were removed."""
    count = 0

    def visit(graph) -> None:
        nonlocal count
        outer_uses = _uses(graph)
        for node in graph.node:
            if node.op_type != "Loop":
                continue
            body = _body(node)
            body_uses = _uses(body)
            for i in reversed(range(len(node.input) - 2)):
                inside = body.input[2 + i].name
                out = body.output[1 + i].name
                through = next((n for n in body.node if n.op_type == "Identity"
                                and n.output[0] == out and n.input[0] == inside), None)
                # Read only as the body's output, directly or through that Identity.
                unread = (body_uses.get(inside, 0) == 1 and body_uses.get(out, 0) == 1
                          and (out == inside or through is not None))
                if not unread or outer_uses.get(node.output[i], 0):
                    continue
                if through is not None:
                    body.node.remove(through)
                del node.input[2 + i]
                del body.input[2 + i]
                del body.output[1 + i]
                del node.output[i]
                count += 1
        for subgraph in subgraphs(graph):
            visit(subgraph)

    visit(model.graph)
    return count


def prune(model) -> int:
    """Remove the nodes none of whose outputs is read, and the initializers nobody
    reads, in every graph, until none is left. Returns how many nodes went."""
    removed = 0
    while True:
        uses = _uses(model.graph)
        dropped = 0

        def visit(graph) -> None:
            nonlocal dropped
            keep = [n for n in graph.node if any(uses.get(o, 0) for o in n.output if o)]
            dropped += len(graph.node) - len(keep)
            del graph.node[:]
            graph.node.extend(keep)
            initializers = [i for i in graph.initializer if uses.get(i.name, 0)]
            del graph.initializer[:]
            graph.initializer.extend(initializers)
            for subgraph in subgraphs(graph):
                visit(subgraph)

        visit(model.graph)
        removed += dropped
        if not dropped:
            return removed


def _names_read(node) -> set[str]:
    """What a node reads: its inputs, and the outer names its subgraphs read."""
    names = set(node.input)
    for graph in node_subgraphs(node):
        produced = {i.name for i in graph.input} | {i.name for i in graph.initializer}
        for inner in graph.node:
            names |= _names_read(inner) - produced
            produced |= set(inner.output)
    return names


def read_by_subgraphs(model) -> list[str]:
    """The names of the nodes whose outputs a subgraph reads from its enclosing graph
    (a Loop body reading a value computed before the Loop)."""
    names = []

    def visit(graph) -> None:
        producer = {name: node.name for node in graph.node for name in node.output}
        for node in graph.node:
            implicit = _names_read(node) - set(node.input)
            names.extend(producer[name] for name in implicit if name in producer)
        for subgraph in subgraphs(graph):
            visit(subgraph)

    visit(model.graph)
    return sorted(set(names))


def sort_nodes(model) -> None:
    """Order every graph's nodes so that each comes after the nodes it reads from,
    counting what a Loop's body reads from the enclosing graph. onnxruntime's quantizer
    sorts without those, which would put a value the body reads after the Loop; among
    the nodes that are ready, the earlier one goes first."""

    def visit(graph) -> None:
        nodes = list(graph.node)
        producer = {name: i for i, node in enumerate(nodes) for name in node.output if name}
        needs = [{producer[n] for n in _names_read(node) if n in producer} - {i}
                 for i, node in enumerate(nodes)]
        placed: set[int] = set()
        order: list[int] = []
        while len(order) < len(nodes):
            ready = next(i for i in range(len(nodes)) if i not in placed and needs[i] <= placed)
            placed.add(ready)
            order.append(ready)
        del graph.node[:]
        graph.node.extend(nodes[i] for i in order)
        for subgraph in subgraphs(graph):
            visit(subgraph)

    visit(model.graph)


def gather_rows_not_columns(model) -> int:
    """Rewrite, in every graph, each Gather of columns from a constant matrix,
    Gather(W, i, axis=1), as Transpose(Gather(W^T, i, axis=0)): the same values, with
    W^T a new initializer of the node's graph. Returns how many were rewritten.

    onnxruntime gathers along axis 1 one element at a time: the selecting search's
    output layer (2,176 of 12,728 columns of a 128-row matrix, once per batch) took
    2.3 ms that way against 0.09 ms as whole rows and a transpose, and 13 ms of a
    54 ms batch-1 completion inside the search graph."""
    from onnx import helper, numpy_helper

    def rewrite(node, graph, scope):
        weight = scope.get(node.input[0]) if node.op_type == "Gather" else None
        if weight is None or weight.ndim != 2 or attributes(node).get("axis", 0) not in (1, -1):
            return None
        name = node.name or node.output[0]
        table, rows = f"{name}_transposed", f"{node.output[0]}_rows"
        graph.initializer.append(numpy_helper.from_array(np.ascontiguousarray(weight.T), table))
        return [helper.make_node("Gather", [table, node.input[1]], [rows], name=f"{name}_rows",
                                 axis=0),
                helper.make_node("Transpose", [rows], [node.output[0]], name=name, perm=[1, 0])]

    return rewrite_nodes(model, rewrite)


def tidy(model) -> dict[str, int]:
    """The loop invariants read from outside the loop, their carried copies and every
    dead node removed, columns gathered as rows, the nodes in order: what each step did."""
    hoisted = hoist_loop_invariants(model)
    dropped = drop_unused_carried(model)
    as_rows = gather_rows_not_columns(model)
    pruned = prune(model)
    sort_nodes(model)
    return {"hoisted": hoisted, "carried_dropped": dropped, "columns_as_rows": as_rows,
            "pruned": pruned}


def op_counts(model) -> dict[str, int]:
    """Node counts by op type over the graph and its subgraphs."""
    counts: dict[str, int] = {}

    def visit(graph) -> None:
        for node in graph.node:
            counts[node.op_type] = counts.get(node.op_type, 0) + 1
        for subgraph in subgraphs(graph):
            visit(subgraph)

    visit(model.graph)
    return dict(sorted(counts.items()))
