"""Vocabulary selection: the target words a batch is scored on.

A search with a :class:`Shortlist` scores each batch on its candidate words only: the
output layer's rows for them are gathered once per batch (:func:`output_columns`), the
softmax normalises over them, and the chosen columns map back to word ids. Without one,
every step uses the model's whole output layer. Cost per batch: a scatter of the
B * Tx * ``best`` translations into a vocabulary-wide mask and one gather of the output
layer's C rows; every step's output layer then costs C, not V, columns.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import tensorflow as tf

from keras_nmt.core.constants import PAD_ID, RESERVED
from keras_nmt.search.top_k import BLOCK


@dataclasses.dataclass(frozen=True)
class Shortlist:
    """Vocabulary selection (Jean et al., 2015; Marian's ``--shortlist``): each batch is
    scored on the ``frequent`` most frequent target words, the ``best`` most probable
    translations of every source word in the batch (rows of ``table``, a lexical table
    p(t | s) of :mod:`keras_nmt.lexicon.table`: int32 [source vocabulary, >= best], PAD-padded)
    and the reserved ids (EOS; UNK unless the search forbids it). ``frequent`` and
    ``best`` may be scalar tensors (signature inputs); both <= 0 turns selection off
    (every word). Vocabulary ids are sorted by training frequency, so the most frequent
    words are the ids right after the reserved ones. A row of ``table`` that starts with
    :data:`~keras_nmt.lexicon.table.RARE_MARK` (a source word training saw too rarely,
    :meth:`~keras_nmt.lexicon.table.Lexicon.selection_table`) turns selection off for every
    batch that holds that word."""

    table: Any
    frequent: Any
    best: Any


def output_columns(source_ids, vocab_size: int, shortlist: Shortlist | None = None,
                   required=None):
    """The target words a batch is scored on: (``columns`` int32 [C], ``count`` int32 []).

    ``columns`` holds ``count`` word ids in ascending order (the reserved ids first, at
    their own positions: column i is word i for i < 4), then PAD up to a whole number of
    blocks of the two-stage top-k (:data:`keras_nmt.search.top_k.BLOCK`); the model
    masks those padding columns out
    (:meth:`~keras_nmt.models.rnnsearch.TranslationModel.output_projection`). Without a shortlist,
    or with it turned off, every word of the vocabulary. ``required`` (int [N]): words
    kept whatever the shortlist says (a constrained search's phrases)."""
    words = tf.range(vocab_size, dtype=tf.int32)
    if shortlist is None:
        chosen = words
    else:
        table = tf.convert_to_tensor(shortlist.table, tf.int32)
        frequent = tf.cast(shortlist.frequent, tf.int32)
        best = tf.clip_by_value(tf.cast(shortlist.best, tf.int32), 0, tf.shape(table)[1])
        rows = tf.gather(table, source_ids)  # [B, Tx, table width]
        # Marked rows hold RARE_MARK in every column: PAD (a reserved id, kept anyway)
        # stands in for it, and the batch keeps every word.
        translations = tf.reshape(tf.maximum(rows[:, :, :best], PAD_ID), [-1, 1])
        if required is not None:
            translations = tf.concat(
                [translations, tf.reshape(tf.cast(required, tf.int32), [-1, 1])], axis=0)
        hits = tf.scatter_nd(translations, tf.ones(tf.shape(translations)[:1], tf.float32),
                             [vocab_size])
        # A count, not reduce_any: onnxruntime reduces an empty bool tensor to nothing.
        rare = tf.reduce_sum(tf.cast(rows[:, :, 0] < 0, tf.int32)) > 0
        off = ((frequent <= 0) & (best <= 0)) | rare
        keep = (hits > 0) | (words < len(RESERVED) + frequent) | off
        chosen = tf.cast(tf.reshape(tf.where(keep), [-1]), tf.int32)
    count = tf.shape(chosen)[0]
    padded = (count + BLOCK - 1) // BLOCK * BLOCK
    return tf.pad(chosen, [[0, padded - count]], constant_values=PAD_ID), count
