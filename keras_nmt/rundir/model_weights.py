"""Checkpoint files: which step a checkpoint holds, whether it reads back intact, and
reading a model's weights from one, checked to fit the model.

TensorFlow restores a checkpoint by matching its object graph to the Python objects, and
leaves any model variable it finds no value for at its initial value. Training's own
checkpoints also hold the optimizer, the input position and counters, so every load of
model weights reads partially, and a partial read alone would accept a checkpoint of
another configuration (or one written before a variable was renamed) and translate with
random weights. :func:`check_model` is the check every load makes first: each model
variable must have a value of its shape in the checkpoint, and a variable the model
reaches by two paths (tied embeddings) one value under both; other objects in the
checkpoint are fine.
"""

from __future__ import annotations

import collections

import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

from keras_nmt.core.errors import CheckpointMismatchError

# The name the model has in every checkpoint the project writes: tf.train.Checkpoint(model=...).
MODEL = "model"
# How many unmatched variables the error names.
NAMED = 3


def checkpoint_step(path: str | None) -> int | None:
    """The step number at the end of a checkpoint prefix (``.../ckpt-120`` -> 120)."""
    if not path:
        return None
    try:
        return int(path.rsplit("-", 1)[1])
    except (IndexError, ValueError):
        return None


def checkpoint_problem(path: str) -> str | None:
    """Why the checkpoint at prefix ``path`` cannot be restored, or None when every
    tensor its index lists reads back intact (RestoreV2 checks each one's CRC32C; it
    also reads the variant tensors, such as the input pipeline's state, that
    CheckpointReader cannot turn into numpy)."""
    try:
        dtypes = tf.train.load_checkpoint(path).get_variable_to_dtype_map()
        names = sorted(dtypes)
        with tf.device("CPU"):
            tf.raw_ops.RestoreV2(
                prefix=path, tensor_names=names, shape_and_slices=[""] * len(names),
                dtypes=[dtypes[name] for name in names],
            )
    except (tf.errors.OpError, ValueError) as error:
        return getattr(error, "message", None) or str(error).splitlines()[0]
    return None


def _object_paths(model) -> tuple[dict[int, str], dict[str, str]]:
    """(the first path of each object below ``model``, by id; each further path to an
    object already reached -> that object's first path). A layer two parents share (the
    tied embeddings) has one first path and an alias."""
    names: dict[int, str] = {}
    aliases: dict[str, str] = {}
    queue = collections.deque([("", model)])
    seen = {id(model)}
    while queue:
        prefix, parent = queue.popleft()
        for local, child in tf.train.TrackableView.children(parent).items():
            if id(child) in seen:
                if id(child) in names:
                    aliases[prefix + local] = names[id(child)]
                continue
            seen.add(id(child))
            names[id(child)] = prefix + local
            queue.append((prefix + local + "/", child))
    return names, aliases


def model_variables(model) -> dict[str, tf.Variable]:
    """Each of ``model.weights`` by its path in the checkpoint object graph below the
    model (``decoder/attention/energy_kernel``), the first one a breadth-first walk
    finds, as TensorFlow's own walk does. A weight the walk never reaches (which no
    checkpoint could restore) appears under its Keras path."""
    return _variables_and_shared(model)[0]


def _variables_and_shared(model) -> tuple[dict[str, tf.Variable], dict[str, list[str]]]:
    """(:func:`model_variables`, each weight's first path -> its other paths through a
    layer the model shares: ``encoder/embedding/_embeddings`` ->
    ``[decoder/embedding/_embeddings]``), from one walk of the model."""
    names, aliases = _object_paths(model)
    variables = {names.get(id(weight), weight.path): weight for weight in model.weights}
    shared: dict[str, list[str]] = collections.defaultdict(list)
    for first in variables:
        for alias, target in aliases.items():
            if first.startswith(target + "/"):
                shared[first].append(alias + first[len(target):])
    return variables, shared


def _checkpoint_values(path: str) -> dict[str, tuple[str, list[int]]]:
    """(the key, the shape) of each variable value in the checkpoint at ``path``, by its
    object path below the model: the checkpoint's own object graph is walked, so every
    path to a variable counts, not only the one its value was saved under."""
    reader = tf.train.load_checkpoint(path)
    if not reader.has_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"):
        return {}  # a name-based (TF1) checkpoint: nothing in it can be matched
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
    shapes = reader.get_variable_to_shape_map()
    found: dict[str, tuple[str, list[int]]] = {}
    root = next((c.node_id for c in graph.nodes[0].children if c.local_name == MODEL), None)
    queue = collections.deque([("", root)] if root is not None else [])
    seen = {root}
    while queue:
        prefix, node_id = queue.popleft()
        for child in graph.nodes[node_id].children:
            name = prefix + child.local_name
            for attribute in graph.nodes[child.node_id].attributes:
                if attribute.name == "VARIABLE_VALUE" and attribute.checkpoint_key in shapes:
                    found.setdefault(name, (attribute.checkpoint_key,
                                          shapes[attribute.checkpoint_key]))
            if child.node_id not in seen:
                seen.add(child.node_id)
                queue.append((name + "/", child.node_id))
    return found


def check_model(path: str, model) -> None:
    """Raise :class:`CheckpointMismatchError` (one line) unless the checkpoint at prefix
    ``path`` holds a value of the right shape for every variable of ``model``."""
    values = _checkpoint_values(path)
    available = {name: shape for name, (_, shape) in values.items()}
    wanted, shared = _variables_and_shared(model)
    missing = [name for name in wanted if name not in available]
    reshaped = [(name, available[name], list(weight.shape)) for name, weight in wanted.items()
                if name in available and available[name] != list(weight.shape)]
    # A weight the model shares (tied embeddings) restores from each of its paths: a
    # checkpoint with two values there (an untied run) would leave one of them.
    untied = [(first, other) for first, others in shared.items()
              for other in others
              if first in values and other in values and values[first][0] != values[other][0]]
    if not missing and not reshaped and not untied:
        return
    problems = []
    if missing:
        problems.append(f"{len(missing)} of {len(wanted)} variables missing, first: "
                        + ", ".join(missing[:NAMED]))
    if reshaped:
        name, there, here = reshaped[0]
        problems.append(f"{len(reshaped)} of {len(wanted)} variables of another shape, first: "
                        f"{name} {there} in the checkpoint, {here} in this model")
    if untied:
        first, other = untied[0]
        problems.append(f"{first} and {other} are one variable in this model (tied), two "
                        f"in the checkpoint")
    raise CheckpointMismatchError(
        f"checkpoint {path} does not match this model: {'; '.join(problems)}; was it "
        f"written by another configuration?"
    )


def read_model(path: str, model) -> None:
    """Load ``model``'s weights from the checkpoint at prefix ``path`` after
    :func:`check_model`; what else the checkpoint holds (optimizer, counters) is left."""
    check_model(path, model)
    tf.train.Checkpoint(**{MODEL: model}).read(path).expect_partial()
