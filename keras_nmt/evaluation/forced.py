"""Force decoding: what a model says about translations it is given.

The decoder reads a given target (teacher forcing), so one pass gives each target token's
log-probability, EOS last, and the attention weights. Their sum is the sentence's
log-probability, minus the training NLL (:func:`keras_nmt.models.rnnsearch.sentence_nll`); an
ensemble (:class:`keras_nmt.decoding.ensemble.Ensemble`) gives the log of its members' mean
probability. ``tokens`` counts EOS; ``logprob_per_token`` is ``logprob / tokens`` and
``score(alpha)`` ``logprob / tokens ** alpha`` (docs/decoding.md, "Scoring"). Nothing is cut;
an empty side is EOS alone; an unknown target word, or the text ``<unk>`` of a word run, is
scored as ``<unk>`` (:func:`target_tokens`). :func:`stepwise_forced` is the same computation as
one ``tf.while_loop``, the form ``NAME.forced.onnx`` is made from. Only :func:`force_decode`,
:func:`force_ids`, :func:`force_signals` and :func:`stepwise_forced` import TensorFlow.
Cost: linear in the corpus's tokens. A batch's memory grows with rows x longest target x
vocabulary, so rows x longest side stay within ``batch_size x (max_len + 1)`` (longer: alone).
"""

from __future__ import annotations

import dataclasses
import weakref
from typing import Any, Callable, Sequence

import numpy as np

from keras_nmt.core.constants import BOS_ID, EOS, EOS_ID, PAD_ID, UNK, UNK_ID
from keras_nmt.text import codecs
from keras_nmt.text.line_join import block_diagonal


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


def join_pairs(pairs: Sequence[ForcedPair]) -> ForcedPair:
    """The pairs of a line's sentences as one (a line split into sentences,
    :mod:`keras_nmt.text.sentences`): the tokens of each side one sentence after the
    other with EOS between them, so that the matrix stays [target tokens + 1, source
    tokens + 1]; the log-probabilities concatenated (each sentence's EOS included), the
    attention block-diagonal (None when a pair has none), the unknown words summed. One
    pair: itself. The attention is dense: (sum of target tokens + 1) x (sum of source
    tokens + 1) cells, far more than the pairs' own for a line of many sentences, so
    :class:`keras_nmt.decoding.translation.Translation` joins them only when its ``alignment`` is
    read."""
    if len(pairs) == 1:
        return pairs[0]

    def tokens(side: str) -> tuple[str, ...]:
        joined = [token for pair in pairs for token in (*getattr(pair, side), EOS)]
        return tuple(joined[:-1])  # the last EOS is the matrix's own

    attention = None
    if all(pair.attention is not None for pair in pairs):
        attention = block_diagonal([pair.attention for pair in pairs])
    return ForcedPair(tokens("source_tokens"), tokens("target_tokens"),
                      np.concatenate([pair.token_logprobs for pair in pairs]), attention,
                      sum(pair.unknown for pair in pairs))


_FNS: "weakref.WeakKeyDictionary[Any, dict[bool, Callable]]" = weakref.WeakKeyDictionary()


def _forced_fn(model, dropout: bool = False) -> Callable:
    """(source ids, decoder inputs, targets) [B, T] -> (token log-probabilities [B, T],
    0 at padding; attention [B, T, Tx]) for ``model``, traced once per model and mode.
    ``dropout``: the model as in training, its dropout masks drawn anew at each call."""
    import tensorflow as tf

    from keras_nmt.models.rnnsearch import token_nll

    traced = _FNS.setdefault(model, {})
    if dropout not in traced:
        def forced(source, target_in, target_out):
            outputs, weights = model.forced(source, target_in, training=dropout)
            return -token_nll(outputs, target_out), tf.cast(weights, tf.float32)

        traced[dropout] = tf.function(  # no autograph: no branch on a tensor here
            forced, input_signature=[tf.TensorSpec([None, None], tf.int32)] * 3,
            autograph=False)
    return traced[dropout]


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
    (a :class:`keras_nmt.decoding.keras_translator.Translator`, or any object with ``model``,
    ``source_codec`` and ``target_codec``). One :class:`ForcedPair` per pair, in order;
    ``attention`` keeps the weights. ``progress`` is called with the number of pairs
    finished after each batch."""
    if len(sources) != len(targets):
        raise ValueError(f"{len(sources)} sources for {len(targets)} targets")
    if batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    source_codec, target_codec = translator.source_codec, translator.target_codec
    source_ids = [source_codec.encode(line) + [EOS_ID] for line in sources]
    target_side = [target_tokens(target_codec, line) for line in targets]
    target_ids = [ids + [EOS_ID] for _, ids in target_side]
    results = force_ids(translator.model, source_ids, target_ids, batch_size, attention,
                        progress)
    return [ForcedPair(tuple(source_codec.tokenize(sources[i])), tuple(target_side[i][0]),
                       logprobs, weights, target_ids[i].count(UNK_ID))
            for i, (logprobs, weights) in enumerate(results)]


def force_ids(
    model, source_ids: Sequence[Sequence[int]], target_ids: Sequence[Sequence[int]],
    batch_size: int = 32, attention: bool = False,
    progress: Callable[[int], None] | None = None, dropout: bool = False,
) -> list[tuple[np.ndarray, np.ndarray | None]]:
    """:func:`force_decode` of id rows (EOS included) with ``model``: per pair, its token
    log-probabilities and (with ``attention``) its attention (:func:`run_batches`).
    ``dropout``: with the model's dropout on, as in training (one sample of its masks)."""
    import tensorflow as tf

    forced = _forced_fn(model, dropout)

    def run(source, target_out):
        logprobs, weights = forced(tf.constant(source), tf.constant(decoder_inputs(target_out)),
                                   tf.constant(target_out))
        return logprobs.numpy(), weights.numpy() if attention else None

    positions = batch_size * (int(model.config.max_len) + 1)
    return run_batches(run, source_ids, target_ids, batch_size, positions, progress)


def dropout_logprobs(
    model, source_ids: Sequence[Sequence[int]], target_ids: Sequence[Sequence[int]],
    samples: int, batch_size: int = 32,
) -> list[np.ndarray]:
    """Per pair (id rows, EOS included), the mean over ``samples`` passes with the model's
    dropout on of each token's log-probability: Monte Carlo dropout (Gal & Ghahramani
    2016), whose agreement Fomicheva et al. (TACL 2020) found a better predictor of
    quality than the single pass. A pass costs one force decoding of every pair."""
    import tensorflow as tf

    check_dropout(model)
    forced = _forced_fn(model, dropout=True)

    def run(source, target_out):  # the samples of a batch, padded and batched once
        inputs = [tf.constant(value)
                  for value in (source, decoder_inputs(target_out), target_out)]
        total = np.zeros(target_out.shape, np.float64)
        for _ in range(samples):
            total += forced(*inputs)[0].numpy()
        return (total / samples).astype(np.float32), None

    positions = batch_size * (int(model.config.max_len) + 1)
    return [logprobs for logprobs, _ in run_batches(run, source_ids, target_ids, batch_size,
                                                      positions)]


def decoder_inputs(target_out: np.ndarray) -> np.ndarray:
    """Padded target rows [B, T] -> the decoder's inputs: BOS, then each row's tokens
    shifted right one place (padding kept)."""
    target_in = np.zeros_like(target_out)
    target_in[:, 0] = BOS_ID
    target_in[:, 1:] = np.where(target_out[:, 1:] > 0, target_out[:, :-1], 0)
    return target_in


def check_dropout(model) -> None:
    """ValueError unless ``model`` (or a member of an ensemble) has dropout to sample."""
    if not max(float(member.config.dropout) for member in getattr(model, "models", [model])):
        raise ValueError("the model was trained without dropout: there is nothing for "
                         "dropout samples to sample")


@dataclasses.dataclass(frozen=True)
class ForcedSignals:
    """What one force-decoding pass says about a pair beyond its log-probabilities: the
    signals a confidence may be made of (:mod:`keras_nmt.decoding.confidence`)."""

    token_logprobs: np.ndarray  # float32 [target tokens + 1], as ForcedPair's
    token_entropies: np.ndarray  # float32 [target tokens + 1]: the entropy (nats) of the
    #                              model's distribution over the vocabulary at each token
    attention: np.ndarray | None  # float32 [target tokens + 1, source tokens + 1], or None


_SIGNAL_FNS: "weakref.WeakKeyDictionary[Any, Callable]" = weakref.WeakKeyDictionary()


def _signals_fn(model) -> Callable:
    """:func:`_forced_fn` that also gives each token's entropy [B, T] (0 at padding)."""
    import tensorflow as tf

    from keras_nmt.models.rnnsearch import token_nll

    if model not in _SIGNAL_FNS:
        def forced(source, target_in, target_out):
            outputs, weights = model.forced(source, target_in)
            logits = tf.cast(outputs, tf.float32)
            log_p = tf.nn.log_softmax(logits, axis=-1)
            entropy = -tf.reduce_sum(tf.exp(log_p) * log_p, axis=-1)
            entropy *= tf.cast(tf.not_equal(target_out, PAD_ID), tf.float32)
            return -token_nll(outputs, target_out), entropy, tf.cast(weights, tf.float32)

        _SIGNAL_FNS[model] = tf.function(
            forced, input_signature=[tf.TensorSpec([None, None], tf.int32)] * 3,
            autograph=False)
    return _SIGNAL_FNS[model]


def force_signals(
    model, source_ids: Sequence[Sequence[int]], target_ids: Sequence[Sequence[int]],
    batch_size: int = 32,
) -> list[ForcedSignals]:
    """:func:`force_ids` of id rows (EOS included) with the entropy of each token's
    distribution and the attention kept: one :class:`ForcedSignals` per pair, in order,
    from the same single pass (the entropy costs one more reduction over the logits the
    pass computes anyway). An RNNencdec model's attention is None."""
    import tensorflow as tf

    forced = _signals_fn(model)
    attends = bool(model.config.uses_attention)
    out: list[ForcedSignals | None] = [None] * len(source_ids)
    positions = batch_size * (int(model.config.max_len) + 1)
    for chosen in batches([len(s) for s in source_ids], [len(t) for t in target_ids],
                          batch_size, positions):
        source = pad_rows([source_ids[i] for i in chosen])
        target_out = pad_rows([target_ids[i] for i in chosen])
        target_in = decoder_inputs(target_out)
        logprobs, entropies, weights = (value.numpy() for value in forced(
            tf.constant(source), tf.constant(target_in), tf.constant(target_out)))
        for row, i in enumerate(chosen):
            rows, columns = len(target_ids[i]), len(source_ids[i])
            out[i] = ForcedSignals(
                np.array(logprobs[row, :rows], np.float32),
                np.array(entropies[row, :rows], np.float32),
                np.array(weights[row, :rows, :columns], np.float32) if attends else None)
    return out  # type: ignore[return-value]


def pad_rows(rows: Sequence[Sequence[int]]) -> np.ndarray:
    """Id rows -> int32 [len(rows), longest], padded with PAD."""
    batch = np.zeros((len(rows), max((len(row) for row in rows), default=0)), np.int32)
    for i, row in enumerate(rows):
        batch[i, : len(row)] = row
    return batch


def run_batches(
    run: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray | None]],
    source_ids: Sequence[Sequence[int]], target_ids: Sequence[Sequence[int]],
    batch_size: int, positions: int, progress: Callable[[int], None] | None = None,
) -> list[tuple[np.ndarray, np.ndarray | None]]:
    """Force-decode id rows (EOS included) in :func:`batches` with ``run``: padded source
    [B, S] and target [B, T] -> (token log-probabilities [B, T], attention [B, T, S] or
    None). Per pair, in order: its log-probabilities and attention cut to its own lengths.
    The TensorFlow path (:func:`force_decode`) and the onnxruntime path
    (:class:`keras_nmt.decoding.onnx_translator.OnnxTranslator`) both go through here."""
    out: list[tuple[np.ndarray, np.ndarray | None] | None] = [None] * len(source_ids)
    for chosen in batches([len(s) for s in source_ids], [len(t) for t in target_ids],
                          batch_size, positions):
        logprobs, weights = run(pad_rows([source_ids[i] for i in chosen]),
                                pad_rows([target_ids[i] for i in chosen]))
        for row, i in enumerate(chosen):
            rows, columns = len(target_ids[i]), len(source_ids[i])
            out[i] = (np.array(logprobs[row, :rows], np.float32),
                      None if weights is None else np.array(weights[row, :rows, :columns],
                                                             np.float32))
        if progress is not None:
            progress(len(chosen))
    return out  # type: ignore[return-value]


def stepwise_forced(model, source_ids, target_ids) -> dict:
    """Force decoding as one ``tf.while_loop`` over ``model.step``, traceable with
    autograph off and convertible by tf2onnx (as :mod:`keras_nmt.search` is: the history
    grows by one column a step in loop variables, no TensorArray).

    ``source_ids`` int32 [B, S] and ``target_ids`` int32 [B, T] (B >= 1), both with EOS, padded
    with PAD -> ``{"token_logprobs": float32 [B, T] (0 at padding), "attention": float32
    [B, T, S]}``; an RNNencdec model has no attention and gives only the log-probabilities.
    Equal to :func:`force_decode`'s within float32 rounding: the step is the search's
    (its context precomputed per source position), the teacher-forcing pass computes the
    context first. Cost: T steps for the batch, each over the whole target vocabulary."""
    import tensorflow as tf

    source_ids = tf.convert_to_tensor(source_ids, tf.int32)
    target_ids = tf.convert_to_tensor(target_ids, tf.int32)
    rows, length = tf.shape(source_ids)[0], tf.shape(target_ids)[1]
    state, memory = model.encode(source_ids)

    def body(t, previous, state, logprobs, attention):
        logits, state, weights = model.step(previous, state, memory)
        logits = tf.cast(logits, tf.float32)
        target = tf.gather(target_ids, t, axis=1)
        # The target's logit by a one-hot product: a plain form every converter keeps.
        chosen = tf.reduce_sum(logits * tf.one_hot(target, tf.shape(logits)[1]), axis=1)
        real = tf.cast(tf.not_equal(target, PAD_ID), tf.float32)
        logprob = (chosen - tf.reduce_logsumexp(logits, axis=1)) * real
        return (t + 1, target, state, tf.concat([logprobs, logprob[:, None]], axis=1),
                tf.concat([attention, tf.cast(weights, tf.float32)[:, None, :]], axis=1))

    loop_vars = (tf.constant(0), tf.fill([rows], BOS_ID), state,
                 tf.zeros([rows, 0], tf.float32),
                 tf.zeros([rows, 0, tf.shape(source_ids)[1]], tf.float32))
    invariants = (tf.TensorShape([]), tf.TensorShape([None]),
                  tf.TensorShape([None, state.shape[-1]]), tf.TensorShape([None, None]),
                  tf.TensorShape([None, None, None]))
    _, _, _, logprobs, attention = tf.while_loop(
        lambda t, *_: t < length, body, loop_vars, shape_invariants=invariants)
    if not model.config.uses_attention:
        return {"token_logprobs": logprobs}
    return {"token_logprobs": logprobs, "attention": attention}
