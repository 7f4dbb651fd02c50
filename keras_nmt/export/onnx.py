"""The ``translate_ids`` function as an ONNX model (tf2onnx), for onnxruntime.

String ops, lookup tables and tensorflow_text's SentencePiece ops do not convert to ONNX,
so the ONNX model is the id-in / id-out beam search; the onnxruntime path encodes and
decodes in Python (:mod:`keras_nmt.text` codecs: the word tokenizer, or the run's SentencePiece
models) with the vocabularies (and models) written next to it and the settings of
``NAME.onnx.json``.
"""

from __future__ import annotations

import pathlib

import tensorflow as tf

from keras_nmt.export import onnx_graph
from keras_nmt.export.savedmodel import ID_OUTPUTS, translate_ids_function
from keras_nmt.models import TranslationModel

OPSET = 17


def convert(model: TranslationModel, nbest: int, path: str | pathlib.Path, opset: int = OPSET,
            lexicon_table=None):
    """Convert and write ``path``; returns the checked ONNX ModelProto. With
    ``lexicon_table`` the graph holds it and takes the two shortlist inputs."""
    import onnx
    import tf2onnx

    fn, signature = translate_ids_function(model, nbest, lexicon_table)
    function = tf.function(fn, input_signature=signature, autograph=False)
    proto, _ = tf2onnx.convert.from_function(function, input_signature=signature, opset=opset)
    onnx_graph.tidy(proto)  # the loop's weights read from outside it, not carried
    onnx.checker.check_model(proto)
    onnx.save_model(proto, str(path))
    return proto


def input_names(proto) -> list[str]:
    return [i.name for i in proto.graph.input]


def output_names(proto) -> list[str]:
    return [o.name for o in proto.graph.output]


class OnnxModel:
    """An onnxruntime session run like :class:`keras_nmt.export.loaders.TF2Model` (numpy in and out)."""

    def __init__(self, path: str | pathlib.Path):
        import onnxruntime

        options = onnxruntime.SessionOptions()
        self.session = onnxruntime.InferenceSession(
            str(path), options, providers=["CPUExecutionProvider"]
        )
        self.outputs = [o.name for o in self.session.get_outputs()]

    def run(self, feeds) -> dict:
        return dict(zip(self.outputs, self.session.run(None, dict(feeds))))


__all__ = ["ID_OUTPUTS", "OPSET", "OnnxModel", "convert", "input_names", "output_names"]
