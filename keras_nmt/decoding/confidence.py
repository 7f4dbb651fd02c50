"""How sure the model is of a translation it made: a sentence figure and one figure per
word, from its own token log-probabilities (docs/decoding.md, "Confidence").

Input: the force-decoding log-probabilities of the output against its source
(:class:`keras_nmt.evaluation.forced.ForcedPair`'s ``token_logprobs``, EOS last), so the
figures match ``keras-nmt score``'s. A sentence's is ``exp(mean token log-probability)``,
EOS included, in (0, 1]. A word's (a space-separated word of the output) is the smallest
probability of its tokens. A line of several sentences takes the mean over all its tokens
(its sentences' figures weighted by token count), and its sentences' words in order.
:func:`sentence_signals` gives the pass's other signals (token entropy, attention coverage);
none predicted quality better than the mean log-probability (docs/decoding.md, "How good a
predictor it is"), so the figures stay these formulas. No fitted weights, no TensorFlow: the
onnxruntime path imports this module. Cost: linear in the tokens.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Sequence

import numpy as np


@dataclasses.dataclass(frozen=True)
class Confidence:
    """A translation's confidence (the module docstring says what the numbers mean)."""

    mean_logprob: float  # mean natural-log probability of the output tokens and EOS
    tokens: int  # scored tokens, EOS included: a sentence's weight in its line's figure
    words: tuple[str, ...]  # the output's space-separated words
    word_confidences: tuple[float, ...]  # one per word, in (0, 1]

    @property
    def sentence(self) -> float:
        """``exp(mean_logprob)``, in (0, 1]."""
        return math.exp(self.mean_logprob)

    def to_json(self) -> dict:
        """The fields a command writes: ``confidence`` and ``words`` ([word, figure])."""
        return {"confidence": round(self.sentence, 6),
                "words": [[word, round(value, 6)] for word, value in
                          zip(self.words, self.word_confidences)]}


def line_fields(line: Confidence | None, sentences: Sequence[Confidence | None]) -> dict:
    """A line's figures as the commands and the server write them: ``confidence`` (the
    line's; null for a line never decoded), ``sentences`` (each decoded sentence's, in
    order) and ``words`` ([word, figure] pairs), rounded to 6 decimals."""
    if line is None:
        return {"confidence": None, "sentences": [], "words": []}
    found = line.to_json()
    return {"confidence": found["confidence"],
            "sentences": [round(part.sentence, 6) for part in sentences if part is not None],
            "words": found["words"]}


def word_of_tokens(tokens: Sequence[str], detokenize: Callable[[Sequence[str]], str]
                   ) -> tuple[tuple[str, ...], list[tuple[int, ...]]]:
    """The words of ``detokenize(tokens).split()`` and, for each of ``tokens``, the
    numbers of the words it belongs to (usually one). A token belongs to the last word of
    the text its prefix detokenizes to, and to any words that text gained with it; this
    holds for any codec whose detokenization of a prefix is a prefix of the text's words
    (the word tokenizer's rules, SentencePiece's word-initial pieces). A token that adds
    no word (text before any word) belongs to the first."""
    words = tuple(detokenize(tokens).split())
    owners: list[tuple[int, ...]] = []
    seen = 0
    for k in range(len(tokens)):
        made = min(len(detokenize(tokens[: k + 1]).split()), len(words))
        first = min(seen, made - 1) if made else 0
        owners.append(tuple(range(max(first, 0), max(made, 1))) if words else ())
        seen = max(seen, made)
    return words, owners


WordsOf = Callable[[Sequence[str]], tuple[tuple[str, ...], list[tuple[int, ...]]]]


def confidence_of(token_logprobs: np.ndarray, tokens: Sequence[str],
                  detokenize: Callable[[Sequence[str]], str],
                  words_of: WordsOf | None = None) -> Confidence:
    """The Confidence of an output of ``tokens`` whose log-probabilities are
    ``token_logprobs`` (one per token, then EOS's); ``detokenize`` is the target codec's.
    ``words_of``: the codec's own :func:`word_of_tokens` in one pass (the word codec's
    ``token_words``: one detokenization per output rather than one per token); None: the
    prefix rule of :func:`word_of_tokens`."""
    logprobs = np.asarray(token_logprobs, np.float64)
    if len(logprobs) != len(tokens) + 1:
        raise ValueError(f"{len(logprobs)} log-probabilities for {len(tokens)} tokens + EOS")
    words, owners_of = (word_of_tokens(tokens, detokenize) if words_of is None
                        else words_of(tokens))
    lowest = np.full(len(words), np.inf)
    for logprob, owners in zip(logprobs, owners_of):
        for word in owners:
            lowest[word] = min(lowest[word], logprob)
    lowest[np.isinf(lowest)] = 0.0  # a word no token made (none with the codecs here)
    return Confidence(float(np.mean(logprobs)), len(logprobs), words,
                      tuple(float(value) for value in np.exp(lowest)))


def codec_confidence(token_logprobs: np.ndarray, tokens: Sequence[str], codec) -> Confidence:
    """:func:`confidence_of` with a target codec's rules: its ``detokenize`` and, where
    it has one (the word codec), its one-pass ``token_words``."""
    return confidence_of(token_logprobs, tokens, codec.detokenize,
                         getattr(codec, "token_words", None))


def join_confidences(parts: Sequence[Confidence | None]) -> Confidence | None:
    """A line's Confidence from its sentences' (in order; None for a sentence never
    decoded, left out): the mean log-probability over all their tokens, their words one
    after the other. None when no sentence has one."""
    found = [part for part in parts if part is not None]
    if not found:
        return None
    if len(found) == 1:
        return found[0]
    tokens = sum(part.tokens for part in found)
    return Confidence(
        sum(part.mean_logprob * part.tokens for part in found) / tokens, tokens,
        tuple(word for part in found for word in part.words),
        tuple(value for part in found for value in part.word_confidences),
    )


# The sentence signals of one force-decoding pass, each oriented so that higher is surer.
SIGNALS = ("mean_logprob", "min_logprob", "neg_mean_entropy", "neg_coverage_gap")


def sentence_signals(token_logprobs: np.ndarray, token_entropies: np.ndarray | None = None,
                     attention: np.ndarray | None = None) -> dict[str, float]:
    """A sentence's signals from its force decoding (one value per token, EOS's last;
    the attention [tokens + 1, source tokens + 1]), each higher when the model is surer:

    - ``mean_logprob``: the mean token log-probability (the plain confidence's log);
    - ``min_logprob``: the least probable token's log-probability;
    - ``neg_mean_entropy``: minus the mean entropy (nats) of the model's distribution at
      each token: how peaked it was, whichever token it scored;
    - ``neg_coverage_gap``: minus the mean, over the source positions (EOS included), of
      how far the attention they received in all is from 1: a source word attended
      several times, or never, is a sign of a repeated or dropped phrase.

    A signal whose input is not given is left out."""
    logprobs = np.asarray(token_logprobs, np.float64)
    found = {"mean_logprob": float(np.mean(logprobs)), "min_logprob": float(np.min(logprobs))}
    if token_entropies is not None:
        found["neg_mean_entropy"] = -float(np.mean(np.asarray(token_entropies, np.float64)))
    if attention is not None:
        coverage = np.sum(np.asarray(attention, np.float64), axis=0)
        found["neg_coverage_gap"] = -float(np.mean(np.abs(coverage - 1.0)))
    return found

