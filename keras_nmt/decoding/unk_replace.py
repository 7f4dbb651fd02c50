"""Replace generated UNK tokens with source words chosen by the attention weights.

A shortlist model writes ``<unk>`` for every word outside its target vocabulary. After
decoding, each such token is replaced by the source word that received the largest
attention weight at that output step (the source EOS column is never chosen), and that
word is looked up in an optional bilingual dictionary; a word the dictionary lacks is
copied as it is (names, numbers and rare words often are the same in both languages).

The dictionary's file is written and read by :mod:`keras_nmt.lexicon.unk_dictionary`.

Pure Python and NumPy: no TensorFlow import.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from keras_nmt.core.constants import UNK
from keras_nmt.text import word

__all__ = ["on_by_default", "replace_unknowns"]


def on_by_default(config, tokenizer: str) -> bool:
    """Whether a run's translations replace ``<unk>`` unless told not to: a word run of
    RNNsearch trained with ``vocab_min_count`` above 1 learned to write ``<unk>`` for the
    words it left out, on purpose, so a reader should never see one. Any other run writes
    one only where its vocabulary ran out, and keeps the paper's output."""
    return config.vocab_min_count > 1 and config.uses_attention and tokenizer == word.KIND


def replace_unknowns(
    tokens: Sequence[str],
    source_tokens: Sequence[str],
    attention: np.ndarray,
    dictionary: Mapping[str, str] | None = None,
    unk: str = UNK,
) -> tuple[str, ...]:
    """``tokens`` with every ``unk`` replaced by its most attended source word.

    Args:
      tokens: the output tokens (EOS not included); token ``j`` was generated at step ``j``.
      source_tokens: the source tokens the model read (EOS not included).
      attention: weights [steps, source positions]: at least ``len(tokens)`` rows and
        ``len(source_tokens)`` columns; the usual shape, with the EOS row and column,
        is [len(tokens) + 1, len(source_tokens) + 1]. Columns past the source words
        (EOS, padding) are ignored.
      dictionary: source word -> replacement; words not in it are copied unchanged.

    An UNK stays as it is when there is no source word or its row has no positive weight
    (an RNNencdec model has no attention). Ties go to the leftmost source word.
    """
    tokens = tuple(tokens)
    if unk not in tokens:
        return tokens
    weights = np.asarray(attention)
    if weights.ndim != 2 or weights.shape[0] < len(tokens) or weights.shape[1] < len(source_tokens):
        raise ValueError(
            f"attention of shape {weights.shape} does not cover {len(tokens)} output and "
            f"{len(source_tokens)} source tokens"
        )
    if not source_tokens:
        return tokens
    dictionary = dictionary or {}
    out = list(tokens)
    for step, token in enumerate(tokens):
        if token != unk:
            continue
        row = weights[step, : len(source_tokens)]
        if not np.max(row) > 0:
            continue
        word = source_tokens[int(np.argmax(row))]
        out[step] = dictionary.get(word, word)
    return tuple(out)
