"""Force decoding: what a model says about translations it is given.

The decoder reads a given target instead of its own choices (teacher forcing, as in
training), so one pass gives, for each target token and the final EOS, the model's
log-probability of that token after the tokens before it, and the attention weights it
used. Their sum is the sentence's log-probability, the negative of the training NLL
(:func:`keras_nmt.models.sentence_nll`, the full softmax, no dropout) on the same pair.
An ensemble (:class:`keras_nmt.ensemble.Ensemble`) gives the log of its members' mean
probability at each token, as its beam search does.

Definitions (``keras-nmt score`` writes them; docs/decoding.md):

- ``tokens``: the run's target tokens (words, or SentencePiece pieces) plus 1 for EOS;
- ``logprob``: the sum of the ``tokens`` log-probabilities (natural log), EOS included;
- ``logprob_per_token``: ``logprob / tokens``;
- ``score(alpha)``: ``logprob / tokens ** alpha``, the ranking score of the beam search
  (whose lengths also count EOS), so alpha 1 is ``logprob_per_token``.

Nothing is cut: a pair is scored whole however long it is (the RNN has no length limit);
an empty side is EOS alone (an empty target scores the model's probability of ending at
once). A target word outside the vocabulary is scored as ``<unk>``, as in training, and
so is the text ``<unk>`` in the target of a word run, which is how a translation writes
the unknown word (:func:`target_tokens`).

Cost: one encoder and decoder pass per pair, linear in the corpus's tokens. A batch's
memory grows with its rows x longest target x vocabulary size (the logits), so its rows x
longest side stay within ``batch_size x (max_len + 1)`` (a longer pair goes alone). Only :func:`force_decode` imports TensorFlow, when it is called.
"""

from __future__ import annotations

import dataclasses
import weakref
from typing import Any, Callable, Sequence

import numpy as np

from keras_nmt.constants import BOS_ID, EOS_ID, UNK, UNK_ID
from keras_nmt.text import codecs


@dataclasses.dataclass(frozen=True)
class ForcedPair:
    """One force-decoded pair."""

    source_tokens: tuple[str, ...]  # the run's tokens, EOS not included
    target_tokens: tuple[str, ...]
    token_logprobs: np.ndarray  # float32 [target tokens + 1]: each token's, then EOS's
    attention: np.ndarray | None  # float32 [target tokens + 1, source tokens + 1], or None
    unknown: int  # target tokens outside the vocabulary (scored as <unk>)

    @property
    def tokens(self) -> int:
        """Scored target tokens, EOS included."""
        return len(self.token_logprobs)

    @property
    def logprob(self) -> float:
        return float(np.sum(self.token_logprobs, dtype=np.float64))

    @property
    def logprob_per_token(self) -> float:
        return self.logprob / self.tokens

    def score(self, alpha: float) -> float:
        """``logprob / tokens ** alpha``: the beam search's ranking score."""
        return self.logprob / self.tokens ** alpha


_FNS: "weakref.WeakKeyDictionary[Any, Callable]" = weakref.WeakKeyDictionary()


def _forced_fn(model) -> Callable:
    """(source ids, decoder inputs, targets) [B, T] -> (token log-probabilities [B, T],
    0 at padding; attention [B, T, Tx]) for ``model``, traced once per model."""
    import tensorflow as tf

    from keras_nmt.models import token_nll

    if model not in _FNS:
        def forced(source, target_in, target_out):
            outputs, weights = model.forced(source, target_in)
            return -token_nll(outputs, target_out), tf.cast(weights, tf.float32)

        _FNS[model] = tf.function(
            forced, input_signature=[tf.TensorSpec([None, None], tf.int32)] * 3
        )
    return _FNS[model]


def batches(source_lengths: Sequence[int], target_lengths: Sequence[int], batch_size: int,
            positions: int) -> list[list[int]]:
    """Pair indices in batches of similar lengths: at most ``batch_size`` rows, and rows x
    the batch's longest side at most ``positions`` (a pair longer than that goes alone)."""
    order = sorted(range(len(source_lengths)), key=lambda i: (source_lengths[i], target_lengths[i]))
    out: list[list[int]] = []
    current: list[int] = []
    widest = 0
    for i in order:
        width = max(widest, source_lengths[i], target_lengths[i])
        if current and (len(current) == batch_size or (len(current) + 1) * width > positions):
            out.append(current)
            current, width = [], max(source_lengths[i], target_lengths[i])
        current.append(i)
        widest = width
    if current:
        out.append(current)
    return out


def target_tokens(codec, line: str) -> tuple[list[str], list[int]]:
    """The tokens and ids of a target line. In a word run, the text ``<unk>`` (what
    ``keras-nmt translate`` writes for the unknown word) is read back as that word; the
    tokenizer alone would split it into "<", "unk" and ">"."""
    if codec.kind != codecs.WORD or UNK not in line:
        return codec.tokenize(line), codec.encode(line)
    tokens: list[str] = []
    ids: list[int] = []
    for n, part in enumerate(line.split(UNK)):
        if n:
            tokens.append(UNK)
            ids.append(UNK_ID)
        tokens += codec.tokenize(part)
        ids += codec.encode(part)
    return tokens, ids


def force_decode(
    translator, sources: Sequence[str], targets: Sequence[str], batch_size: int = 32,
    attention: bool = False, progress: Callable[[int], None] | None = None,
) -> list[ForcedPair]:
    """Force-decode each target given its source with ``translator``'s model and codecs
    (a :class:`keras_nmt.translator.Translator`, or any object with ``model``,
    ``source_codec`` and ``target_codec``). One :class:`ForcedPair` per pair, in order;
    ``attention`` keeps the weights. ``progress`` is called with the number of pairs
    finished after each batch."""
    import tensorflow as tf

    if len(sources) != len(targets):
        raise ValueError(f"{len(sources)} sources for {len(targets)} targets")
    if batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    forced = _forced_fn(translator.model)
    source_codec, target_codec = translator.source_codec, translator.target_codec
    source_ids = [source_codec.encode(line) + [EOS_ID] for line in sources]
    target_side = [target_tokens(target_codec, line) for line in targets]
    target_ids = [ids + [EOS_ID] for _, ids in target_side]
    positions = batch_size * (int(translator.model.config.max_len) + 1)
    out: list[ForcedPair | None] = [None] * len(sources)
    for chosen in batches([len(s) for s in source_ids], [len(t) for t in target_ids],
                          batch_size, positions):
        source = np.zeros((len(chosen), max(len(source_ids[i]) for i in chosen)), np.int32)
        target_out = np.zeros((len(chosen), max(len(target_ids[i]) for i in chosen)), np.int32)
        for row, i in enumerate(chosen):
            source[row, : len(source_ids[i])] = source_ids[i]
            target_out[row, : len(target_ids[i])] = target_ids[i]
        target_in = np.zeros_like(target_out)
        target_in[:, 0] = BOS_ID
        target_in[:, 1:] = np.where(target_out[:, 1:] > 0, target_out[:, :-1], 0)
        logprobs, weights = forced(tf.constant(source), tf.constant(target_in),
                                   tf.constant(target_out))
        logprobs = logprobs.numpy()
        weights = weights.numpy() if attention else None
        for row, i in enumerate(chosen):
            rows, columns = len(target_ids[i]), len(source_ids[i])
            out[i] = ForcedPair(
                tuple(source_codec.tokenize(sources[i])),
                tuple(target_side[i][0]),
                logprobs[row, :rows].copy(),
                None if weights is None else weights[row, :rows, :columns].copy(),
                target_ids[i].count(UNK_ID),
            )
        if progress is not None:
            progress(len(chosen))
    return out  # type: ignore[return-value]
