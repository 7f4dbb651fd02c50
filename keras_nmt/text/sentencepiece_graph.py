"""SentencePiece inside TensorFlow graphs (tf.data and the exported SavedModel).

The graph twin of :class:`keras_nmt.text.sentencepiece.SentencePieceCodec`:
tensorflow_text's SentencepieceTokenizer on the run's model. The module owns the model
(a resource), so an export that tracks it carries the model into the SavedModel.
"""

from __future__ import annotations

import hashlib

import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)
from tensorflow_text.python.ops import sentencepiece_tokenizer as _tf_text_spm

from keras_nmt.text import sentencepiece
from keras_nmt.text.graph_ids import append_eos, ids_before_eos


class _SharedNameModelResource(_tf_text_spm._SentencepieceModelResource):
    """tensorflow_text's SentencePiece model resource with a ``shared_name`` of its own.

    tensorflow_text creates its model resource with an empty ``shared_name``. Two of
    them in one SavedModel (a source and a target model) then turn into one after
    loading: with tensorflow-text 2.21.1 the loaded target decoder ran the source model,
    through both the TF2 and the TF1 loader. A name made from the model's own bytes
    keeps them apart, and lets identical models share one resource harmlessly."""

    def __init__(self, model: bytes, name: str | None):
        self._shared_name = "keras_nmt_spm_" + hashlib.sha256(model).hexdigest()[:24]
        super().__init__(model, name)

    def _create_resource(self):
        with tf.name_scope(self._name or "SentenceTokenizerInitializer"):
            return _tf_text_spm.gen_sentencepiece_tokenizer.sentencepiece_op(
                model=self._model, shared_name=self._shared_name
            )


class SentencePieceEncoder(tf.Module):
    """A SentencePiece model in the graph: a batch of sentences [N] -> ragged ids ending
    with EOS, and a batch of id rows back to sentences."""

    kind = sentencepiece.KIND

    def __init__(self, model: bytes, lang: str, name: str | None = None):
        super().__init__(name=name)
        self.lang = lang
        self.tokenizer = tensorflow_text.SentencepieceTokenizer(model=model, out_type=tf.int32)
        # Replaces the tokenizer's own resource (see _SharedNameModelResource); the
        # tokenizer reads it from this attribute for every op, and tracks it.
        self.tokenizer._model_resource = _SharedNameModelResource(bytes(model), None)
        self.vocab_size = int(self.tokenizer.vocab_size())

    def __call__(self, lines, add_eos: bool = True) -> tf.RaggedTensor:
        ids = self.tokenizer.tokenize(tf.convert_to_tensor(lines, tf.string))
        return append_eos(ids) if add_eos else ids

    def decode(self, ids) -> tf.Tensor:
        """Id rows [N, T] (dense, or ragged) -> sentences [N]: each row up to its first
        EOS, PAD and BOS skipped, as :meth:`keras_nmt.text.sentencepiece.SentencePieceCodec.decode`."""
        return self.tokenizer.detokenize(ids_before_eos(ids))
