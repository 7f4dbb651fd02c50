"""The word tokenizer inside TensorFlow graphs (tf.data and the exported SavedModel).

Runs the rewrite tables of :mod:`keras_nmt.text.word` with ``tf.strings`` ops, so the
tokenization used for training is the one the exported SavedModel carries.
"""

from __future__ import annotations

import tensorflow as tf

from keras_nmt.core.constants import UNK_ID
from keras_nmt.text import word
from keras_nmt.text.graph_ids import append_eos, ids_before_eos
from keras_nmt.text.vocab import Vocabulary


def tokenize(lines, lang: str) -> tf.RaggedTensor:
    """A batch of raw sentences [N] (tf.string) -> tokens, ragged [N, None]."""
    lines = tf.convert_to_tensor(lines, tf.string)
    for pattern, rewrite in word.rules_for(lang):
        lines = tf.strings.regex_replace(lines, pattern, rewrite)
    return tf.strings.split(lines)  # whitespace runs; no empty tokens


def detokenize(tokens: tf.RaggedTensor, lang: str) -> tf.Tensor:
    """Tokens, ragged [N, None] (tf.string) -> text [N]: :func:`keras_nmt.text.word.detokenize`
    as graph ops (the same rewrite table, run with ``tf.strings.regex_replace``)."""
    joined = tf.strings.reduce_join(tokens, axis=-1, separator=word.TOKEN_SEPARATOR)
    lines = word.mark_tokens(joined)  # str + tf.string tensor: tf.strings concatenation
    for pattern, rewrite in word.detokenize_rules(lang):
        lines = tf.strings.regex_replace(lines, pattern, rewrite)
    return lines


class WordEncoder(tf.Module):
    """Raw sentences of one language -> ragged ids ending with EOS, and id rows back to
    sentences.

    Owns the vocabulary lookup table, so a model that tracks this module carries its
    vocabulary into the SavedModel.
    """

    kind = word.KIND

    def __init__(self, vocabulary: Vocabulary, lang: str, name: str | None = None):
        super().__init__(name=name)
        self.lang = lang
        self.tokens = tuple(vocabulary.tokens)
        self.vocab_size = len(vocabulary)
        self.table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(vocabulary.tokens, tf.string),
                tf.range(len(vocabulary), dtype=tf.int64),
            ),
            default_value=UNK_ID,
        )

    def __call__(self, lines, add_eos: bool = True) -> tf.RaggedTensor:
        return self.ids(tokenize(lines, self.lang), add_eos)

    def ids(self, tokens: tf.RaggedTensor, add_eos: bool = True) -> tf.RaggedTensor:
        """Tokens of :func:`tokenize`, ragged [N, None] -> their ids (``<unk>`` for a word
        the vocabulary lacks): for a caller that reads the tokens too."""
        ids = tf.cast(tf.ragged.map_flat_values(self.table.lookup, tokens), tf.int32)
        return append_eos(ids) if add_eos else ids

    def decode(self, ids) -> tf.Tensor:
        """Id rows [N, T] (dense, or ragged) -> sentences [N]: each row up to its first
        EOS, PAD and BOS skipped, as :meth:`keras_nmt.text.word.WordCodec.decode`."""
        tokens = tf.constant(self.tokens, tf.string)  # a constant: no resource to track
        kept = ids_before_eos(ids)
        return detokenize(tf.ragged.map_flat_values(lambda i: tf.gather(tokens, i), kept), self.lang)
