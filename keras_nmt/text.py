"""Text -> token ids inside TensorFlow graphs (tf.data and exported models).

Runs the rewrite table of :mod:`keras_nmt.tokenizer` with ``tf.strings`` ops, so the
tokenization used for training is the one the exported SavedModel carries.
"""

from __future__ import annotations

import tensorflow as tf

from keras_nmt import tokenizer
from keras_nmt.tokenizer import BOS_ID, EOS_ID, UNK_ID, Vocabulary


def tokenize(lines, lang: str) -> tf.RaggedTensor:
    """A batch of raw sentences [N] (tf.string) -> tokens, ragged [N, None]."""
    lines = tf.convert_to_tensor(lines, tf.string)
    for pattern, rewrite in tokenizer.rules_for(lang):
        lines = tf.strings.regex_replace(lines, pattern, rewrite)
    return tf.strings.split(lines)  # whitespace runs; no empty tokens


def detokenize(tokens: tf.RaggedTensor, lang: str) -> tf.Tensor:
    """Tokens, ragged [N, None] (tf.string) -> text [N]: :func:`keras_nmt.tokenizer.detokenize`
    as graph ops (the same rewrite table, run with ``tf.strings.regex_replace``)."""
    joined = tf.strings.reduce_join(tokens, axis=-1, separator=tokenizer.TOKEN_SEPARATOR)
    lines = tokenizer.mark_tokens(joined)  # str + tf.string tensor: tf.strings concatenation
    for pattern, rewrite in tokenizer.detokenize_rules(lang):
        lines = tf.strings.regex_replace(lines, pattern, rewrite)
    return lines


class TokenEncoder(tf.Module):
    """Raw sentences of one language -> ragged ids ending with EOS.

    Owns the vocabulary lookup table, so a model that tracks this module carries its
    vocabulary into the SavedModel.
    """

    def __init__(self, vocabulary: Vocabulary, lang: str, name: str | None = None):
        super().__init__(name=name)
        self.lang = lang
        self.vocab_size = len(vocabulary)
        self.table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(vocabulary.tokens, tf.string),
                tf.range(len(vocabulary), dtype=tf.int64),
            ),
            default_value=UNK_ID,
        )

    def __call__(self, lines, add_eos: bool = True) -> tf.RaggedTensor:
        tokens = tokenize(lines, self.lang)
        ids = tf.cast(tf.ragged.map_flat_values(self.table.lookup, tokens), tf.int32)
        if add_eos:
            eos = tf.fill([ids.nrows(), 1], tf.constant(EOS_ID, tf.int32))
            ids = tf.concat([ids, eos], axis=1)
        return ids


def decoder_io(target_ids: tf.RaggedTensor) -> tuple[tf.RaggedTensor, tf.RaggedTensor]:
    """Targets ending with EOS -> (decoder inputs BOS y_1..y_T, outputs y_1..y_T EOS)."""
    bos = tf.fill([target_ids.nrows(), 1], tf.constant(BOS_ID, tf.int32))
    return tf.concat([bos, target_ids[:, :-1]], axis=1), target_ids
