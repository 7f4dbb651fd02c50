"""Running an exported SavedModel the two ways it gets loaded.

- :class:`TF2Model`: ``tf.saved_model.load`` and a signature's concrete function;
- :class:`SessionModel`: the TF1 loader (``tf.compat.v1.saved_model.loader.load`` into a
  ``Session``, then ``Session.run`` on the signature's tensor names), the code path
  TensorFlow Serving itself uses. An export that works in TF2 can still fail here (a
  ``tf.saved_model.save`` of a ``tf.Module`` wrapping a Keras 3 model does), so every
  export is checked with it.

Both take numpy (or Python) inputs by signature input name and return numpy outputs.
"""

from __future__ import annotations

import pathlib
from typing import Any, Mapping

import numpy as np
import tensorflow as tf
# A SentencePiece run's export runs TF Text's ops, which exist in a process only once the
# package is imported: without it a fresh process cannot load such an export.
import tensorflow_text  # noqa: F401

SERVE_TAG = "serve"


class TF2Model:
    def __init__(self, path: str | pathlib.Path):
        self.loaded = tf.saved_model.load(str(path))

    def run(self, signature: str, **inputs: Any) -> dict[str, np.ndarray]:
        fn = self.loaded.signatures[signature]
        specs = fn.structured_input_signature[1]
        feeds = {name: tf.constant(value, specs[name].dtype) for name, value in inputs.items()}
        return {name: value.numpy() for name, value in fn(**feeds).items()}


class SessionModel:
    def __init__(self, path: str | pathlib.Path):
        self.graph = tf.Graph()
        self.session = tf.compat.v1.Session(graph=self.graph)
        with self.graph.as_default():
            meta = tf.compat.v1.saved_model.loader.load(self.session, [SERVE_TAG], str(path))
        self.signatures: Mapping[str, Any] = meta.signature_def

    def run(self, signature: str, **inputs: Any) -> dict[str, np.ndarray]:
        definition = self.signatures[signature]
        feeds = {}
        for name, value in inputs.items():
            info = definition.inputs[name]
            dtype = tf.dtypes.as_dtype(info.dtype).as_numpy_dtype
            feeds[info.name] = np.asarray(value, dtype=dtype)
        fetches = {name: info.name for name, info in definition.outputs.items()}
        return self.session.run(fetches, feeds)

    def close(self) -> None:
        self.session.close()
