"""The one factory of codecs: a tokenizer kind, a language and a vocabulary in, the
Python codec out, and from a Python codec its graph twin.

A run directory (:class:`keras_nmt.rundir.run_directory.RunDir`) and an ONNX export
(:mod:`keras_nmt.decoding.onnx_translator`) both name their tokenizer and files and get
their codecs here. No TensorFlow import until :func:`graph_encoder` is called.
"""

from __future__ import annotations

import os

from keras_nmt.core.errors import CodecError
from keras_nmt.text import sentencepiece, word
from keras_nmt.text.vocab import Vocabulary

WORD, SENTENCEPIECE = word.KIND, sentencepiece.KIND
TOKENIZERS = (WORD, SENTENCEPIECE)


def check_kind(kind: str, where: str) -> str:
    if kind not in TOKENIZERS:
        raise CodecError(f"unknown tokenizer {kind!r} in {where}; known: {', '.join(TOKENIZERS)}")
    return kind


def make_codec(kind: str, lang: str, vocabulary: Vocabulary,
               model_path: str | os.PathLike | None = None,
               vocabulary_name: str = "its vocabulary file"):
    """The codec of one language: ``word`` over ``vocabulary``, or the SentencePiece
    model at ``model_path``, whose pieces must be ``vocabulary`` (read from
    ``vocabulary_name``) token for token."""
    if kind == WORD:
        return word.WordCodec(vocabulary, lang)
    if kind != SENTENCEPIECE:
        raise CodecError(f"unknown tokenizer {kind!r}; known: {', '.join(TOKENIZERS)}")
    codec = sentencepiece.SentencePieceCodec.load(model_path, lang)
    if codec.vocabulary.tokens != vocabulary.tokens:
        raise CodecError(f"{model_path} does not match {vocabulary_name}")
    return codec


def graph_encoder(codec):
    """The graph twin of a Python codec: a ``tf.Module`` called as
    ``encoder(lines) -> ragged int32 ids + EOS``, with ``decode(ids) -> text``. It owns
    its resources (lookup table, SentencePiece model), so an export that tracks it
    carries them into the SavedModel."""
    if codec.kind == SENTENCEPIECE:
        from keras_nmt.text.sentencepiece_graph import SentencePieceEncoder

        return SentencePieceEncoder(codec.model, codec.lang, name=f"sentencepiece_{codec.lang}")
    from keras_nmt.text.word_graph import WordEncoder

    return WordEncoder(codec.vocabulary, codec.lang)


def graph_tokenizer(kind: str, lang: str, sentencepiece_model: bytes | None = None):
    """What the one tokenization pass over a training split runs, before any vocabulary
    exists: lines [N] -> ragged tokens (``word``: the same ops as the word graph
    encoder, without its lookup) or ragged piece ids without EOS (``sentencepiece``)."""
    if check_kind(kind, "the run") == SENTENCEPIECE:
        from keras_nmt.text.sentencepiece_graph import SentencePieceEncoder

        encoder = SentencePieceEncoder(sentencepiece_model, lang, name=f"sentencepiece_{lang}")
        return lambda lines: encoder(lines, add_eos=False)
    from keras_nmt.text.word_graph import tokenize

    return lambda lines: tokenize(lines, lang)
