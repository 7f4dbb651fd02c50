"""UNK replacement inside TensorFlow graphs: :func:`keras_nmt.decoding.unk_replace.replace_unknowns`
as graph ops, for the SavedModel of a word run exported with ``--unk-replace``.

Each ``<unk>`` a hypothesis holds becomes the source word its step attended to most
(the source EOS never counts), looked up in the run's dictionary; a word the dictionary
lacks is copied. A step whose weights are all zero keeps its ``<unk>``, as the Python
function does.
"""

from __future__ import annotations

from typing import Mapping

import tensorflow as tf

from keras_nmt.core.constants import UNK_ID
from keras_nmt.text import word_graph
from keras_nmt.text.graph_ids import kept_before_eos
from keras_nmt.text.vocab import Vocabulary


class UnknownWords(tf.Module):
    """Search outputs -> texts with every ``<unk>`` replaced. Owns the dictionary's lookup
    table, so an export that tracks this module carries the dictionary."""

    def __init__(self, target_vocabulary: Vocabulary, target_lang: str,
                 dictionary: Mapping[str, str] | None, name: str | None = None):
        super().__init__(name=name)
        self.target_lang = target_lang
        self.target_tokens = tuple(target_vocabulary.tokens)
        keys = sorted(dictionary or {})
        # An empty table still needs one typed key; "" is never a token.
        self.table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(keys or [""], tf.string),
                tf.constant([dictionary[k] for k in keys] or [""], tf.string)),
            default_value="",
        )

    def texts(self, words: tf.RaggedTensor, ids, attention) -> tf.Tensor:
        """The source tokens the search read, ragged [B, None] (:func:`keras_nmt.text.
        word_graph.tokenize`, cut to the export's source length), its search outputs
        ``ids`` [B, N, T] and ``attention`` [B, N, T, X] -> texts [B, N], each hypothesis
        up to its first EOS."""
        return self.join(self.written(words, ids, attention), ids)

    def prefix_decoder(self, written):
        """``decode_text`` for :func:`keras_nmt.decoding.confidence_graph.word_confidences`
        over the best hypotheses' tokens as :meth:`written` wrote them (string [S, T]):
        prefixes of their ids [S, T, T] (PAD outside each) -> the texts of those prefixes
        with their ``<unk>`` replaced, [S, T]."""
        def decode(prefixes):
            return self.join(tf.broadcast_to(written[:, None, :], tf.shape(prefixes)), prefixes)
        return decode

    def join(self, written, ids) -> tf.Tensor:
        """Tokens as written (string [B, N, T]) -> texts [B, N], each row's tokens up to
        its first EOS, PAD and BOS left out, as ``ids`` [B, N, T] says."""
        ids = tf.cast(ids, tf.int32)
        shape = tf.shape(ids)
        rows = shape[0] * shape[1]  # not -1: B * N may be 0
        flat_ids = tf.reshape(ids, [rows, shape[2]])
        kept = tf.ragged.boolean_mask(tf.reshape(written, [rows, shape[2]]),
                                      kept_before_eos(flat_ids))
        return tf.reshape(word_graph.detokenize(kept, self.target_lang), shape[:2])

    def written(self, words: tf.RaggedTensor, ids, attention) -> tf.Tensor:
        """Each output token as :meth:`texts` writes it (string [B, N, T]): a word, or for
        ``<unk>`` its replacement (the arguments are :meth:`texts`')."""
        counts = tf.cast(words.row_lengths(), tf.int32)
        words = words.to_tensor("")
        # Width at least 1, so that a batch of empty sentences still has a column to
        # gather. X is the search's source width, EOS included, so X >= width.
        words = tf.pad(words, [[0, 0], [0, 1 - tf.minimum(tf.shape(words)[1], 1)]])
        width = tf.shape(words)[1]
        weights = attention[..., :width]
        inside = tf.range(width)[None, None, None, :] < counts[:, None, None, None]
        weights = tf.where(inside, weights, -1.0)  # the EOS column and padding never win
        position = tf.argmax(weights, axis=-1, output_type=tf.int32)  # [B, N, T]
        attended = tf.gather(words, position, batch_dims=1)
        found = self.table.lookup(attended)
        filling = tf.where(tf.equal(found, ""), attended, found)
        ids = tf.cast(ids, tf.int32)
        replace = tf.equal(ids, UNK_ID) & (tf.reduce_max(weights, axis=-1) > 0.0)
        return tf.where(replace, filling, tf.gather(tf.constant(self.target_tokens), ids))
