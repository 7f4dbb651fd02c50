"""The word figures of :mod:`keras_nmt.decoding.confidence` as graph ops, for the SavedModel's
string signatures: TF Serving's clients get each output word's confidence from the graph,
as the Python API computes it.

The rule is :func:`keras_nmt.decoding.confidence.word_of_tokens`' (the reference the word codec's
one-pass rule is tested against): a token belongs to the last word of the text its prefix
detokenizes to, and to the words that text gained with it; a word's figure is the smallest
probability of its tokens. Every prefix of every best hypothesis is detokenized by the
export's own target decoder, so the words are those its texts split into, for word and
SentencePiece targets alike.

Cost: S sentences of T output tokens detokenize S * T prefixes of at most T tokens, and
the ownership is an [S, T, W] comparison (W: the most words of a sentence): quadratic in
the output's length, which the search bounds, and linear in the batch.
"""

from __future__ import annotations

import functools
import sys
from typing import Callable

import tensorflow as tf

from keras_nmt.core.constants import PAD_ID


@functools.cache
def _python_spaces() -> str:
    """An RE2 class of the characters ``str.split()`` splits on: Python's whitespace, the
    no-break spaces included, where ``tf.strings.split`` knows ASCII's only. Read from
    Python itself, so the two rules cannot drift apart."""
    spaces = (chr(code) for code in range(sys.maxunicode + 1) if chr(code).isspace())
    return "[" + "".join(f"\\x{{{ord(char):x}}}" for char in spaces) + "]"


def split_words(texts: tf.Tensor) -> tf.RaggedTensor:
    """``[text.split() for text in texts]`` in the graph: ragged [N, (words)]."""
    return tf.strings.split(tf.strings.regex_replace(texts, _python_spaces(), " "))


def word_confidences(ids: tf.Tensor, token_logprobs: tf.Tensor, tokens: tf.Tensor,
                     texts: tf.Tensor, decode_text: Callable
                     ) -> tuple[tf.RaggedTensor, tf.RaggedTensor]:
    """Each sentence's words and their figures, ragged [S, (words)].

    ``ids`` int32 [S, T]: each sentence's best hypothesis (its tokens, then EOS and PAD);
    ``token_logprobs`` float32 [S, T]: their log-probabilities; ``tokens`` int32 [S]: how
    many output tokens each has, EOS not counted; ``texts`` string [S]: the texts written
    for them (their space-separated words are the words); ``decode_text``: ids [B, N, T]
    -> texts [B, N], the export's target decoder (PAD skipped)."""
    length = tf.shape(ids)[1]
    position = tf.range(length)
    kept = position[None, :] < tokens[:, None]  # [S, T]: an output token, not EOS or after
    body = tf.where(kept, ids, PAD_ID)
    # Prefix k of sentence s holds its tokens 0..k: [S, T (prefix), T (position)].
    in_prefix = position[None, :] <= position[:, None]
    prefixes = tf.where(in_prefix[None], body[:, None, :], PAD_ID)
    prefix_texts = decode_text(prefixes)  # [S, T]
    shape = tf.shape(prefix_texts)
    prefix_words = tf.reshape(
        tf.cast(split_words(tf.reshape(prefix_texts, [-1])).row_lengths(), tf.int32),
        shape)

    words = split_words(texts)  # ragged [S, (W)]
    counts = tf.cast(words.row_lengths(), tf.int32)
    made = tf.minimum(prefix_words, counts[:, None])  # [S, T]
    # The most words an earlier prefix made (0 before the first token).
    earlier = position[None, :] < position[:, None]  # [T (k), T (j)]: j before k
    seen = tf.reduce_max(tf.where(earlier[None], made[:, None, :], 0), axis=2)
    first = tf.maximum(tf.where(made > 0, tf.minimum(seen, made - 1), 0), 0)
    end = tf.maximum(made, 1)
    word = tf.range(tf.reduce_max(tf.concat([counts, [0]], axis=0)))  # [W]
    owned = (kept[:, :, None] & (first[:, :, None] <= word[None, None, :])
             & (word[None, None, :] < end[:, :, None]))  # [S, T, W]
    lowest = tf.reduce_min(
        tf.where(owned, token_logprobs[:, :, None], float("inf")), axis=1)  # [S, W]
    # A word no token made (none with the codecs here) gets figure 1, as in Python.
    figures = tf.exp(tf.where(tf.math.is_inf(lowest), 0.0, lowest))
    return words, tf.RaggedTensor.from_tensor(figures, lengths=counts)
