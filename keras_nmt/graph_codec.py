"""Text codecs inside TensorFlow graphs (tf.data, and later the exported SavedModel).

The graph twin of :mod:`keras_nmt.codec`. For a run's tokenizer, :func:`graph_encoder`
gives a ``tf.Module`` called as ``encoder(lines) -> ragged int32 ids + EOS``:

- ``word``: :class:`keras_nmt.text.TokenEncoder` (the rewrite table as tf.strings ops and
  the shortlist as a lookup table);
- ``sentencepiece``: :class:`SentencePieceEncoder`, tensorflow_text's
  SentencepieceTokenizer on the run's model. It also decodes: ``decode(ids) -> text``.

Each module owns its resources (lookup table, SentencePiece model), so an export that
tracks the module carries them into the SavedModel.
"""

from __future__ import annotations

import hashlib
import pathlib

import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)
from tensorflow_text.python.ops import sentencepiece_tokenizer as _tf_text_spm

from keras_nmt import codec as codec_lib
from keras_nmt.text import TokenEncoder
from keras_nmt.tokenizer import BOS_ID, EOS_ID, PAD_ID, Vocabulary


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
        if add_eos:
            eos = tf.fill([ids.nrows(), 1], tf.constant(EOS_ID, tf.int32))
            ids = tf.concat([ids, eos], axis=1)
        return ids

    def decode(self, ids) -> tf.Tensor:
        """Id rows [N, T] (dense, or ragged) -> sentences [N]: each row up to its first
        EOS, PAD and BOS skipped, as :meth:`keras_nmt.codec.SentencePieceCodec.decode`."""
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(ids))
        ids = tf.cast(ids, tf.int32)
        before_eos = tf.math.cumsum(tf.cast(tf.equal(ids, EOS_ID), tf.int32), axis=1) == 0
        kept = before_eos & tf.not_equal(ids, PAD_ID) & tf.not_equal(ids, BOS_ID)
        return self.tokenizer.detokenize(tf.ragged.boolean_mask(ids, kept))


def run_graph_encoders(run_path: str | pathlib.Path):
    """(source encoder, target encoder) of a run directory: what an export tracks."""
    run_path = pathlib.Path(run_path)
    source, target = codec_lib.run_codecs(run_path)
    info = codec_lib.read_data_info(run_path)
    return (graph_encoder(run_path, info, source.lang, source.vocabulary),
            graph_encoder(run_path, info, target.lang, target.vocabulary))


def graph_encoder(run_path: str | pathlib.Path, info: dict, lang: str, vocabulary: Vocabulary):
    """The graph encoder of one language of a run (see the module docstring)."""
    if codec_lib.tokenizer_of(info) == codec_lib.SENTENCEPIECE:
        model = codec_lib.load_codec(run_path, info, lang, vocabulary).model
        return SentencePieceEncoder(model, lang, name=f"sentencepiece_{lang}")
    return TokenEncoder(vocabulary, lang)
