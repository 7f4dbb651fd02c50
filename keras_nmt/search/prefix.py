"""A constrained search's prefix, decoded before its beam loop (docs/decoding.md,
"Constraints").

Every hypothesis of a sentence starts with the sentence's prefix, so the prefix is one
path, not a beam: :func:`feed_prefix` runs the model over it once per sentence (one row,
not K) with nothing of the beam's per-step work (no top-k over the candidates, no banks,
no pool), in a loop of its own. The beam loop then starts from the state the prefix left,
with its log-probability as the first hypothesis' score, and :func:`after_prefix` puts
the prefix in front of each returned hypothesis. A prefix is cut to its sentence's length
limit less one, so the limit's EOS still fits, as when the beam imposed it token by token.

The loop's history lives in loop variables grown by ``tf.concat`` (no TensorArray), like
the beam's, so the graph converts to ONNX. Cost: one decoder step over B rows per token
of the batch's longest prefix.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import tensorflow as tf

from keras_nmt.core.constants import BOS_ID
from keras_nmt.search import constrained
from keras_nmt.search.candidates import normalised_best
from keras_nmt.search.top_k import take_along_rows


@dataclasses.dataclass(frozen=True)
class Prefix:
    """What :func:`feed_prefix` leaves, one row per sentence: the decoder ``state``
    after it, the ``last`` token fed (word id; BOS for an empty prefix), its summed
    ``log_prob`` [B], its ``length`` [B] (tokens kept), its ``ids`` [B, P] (word ids, 0
    after a row's length), ``attention`` [B, P, Tx] (Tx 0 without attention),
    ``token_logprobs`` [B, P] and the constraints' ``matches`` after it (a
    :class:`~keras_nmt.search.constrained.MatchState`)."""

    state: Any
    last: Any
    log_prob: Any
    length: Any
    ids: Any
    attention: Any
    token_logprobs: Any
    matches: Any


class _Fed(NamedTuple):
    """The prefix loop's variables: ``t`` tokens fed, the decoder ``state``, the ``last``
    token, the summed ``log_prob`` and the histories so far, the constraints' matches."""

    t: Any
    state: Any
    last: Any
    log_prob: Any
    ids: Any
    attention: Any
    token_logprobs: Any
    matches: Any


def _keep(going, new, old):
    """``new`` where ``going`` (bool [B]), else ``old``; any rank >= 1."""
    return tf.where(tf.reshape(going, [-1] + [1] * (new.shape.rank - 1)), new, old)


def feed_prefix(model, state, memory, projection, count, words, columns, limits,
                  rules: constrained.Constraints, attention: bool, source_time) -> Prefix:
    """Feed each sentence's prefix to the model: ``words`` (its word ids, [B, T], PAD
    after it) and ``columns`` (the same tokens as output columns: the words themselves,
    or with vocabulary selection their positions) score under the step's log-softmax over
    every column, as the beam scores an imposed token. ``state`` and ``memory`` are the
    encoder's, a row per sentence; ``rules`` the sentences' constraints in column space,
    whose matches follow the prefix. At most ``limits - 1`` tokens are kept. With
    ``attention``, the step's weights over the ``source_time`` positions are kept."""
    batch = tf.shape(words)[0]
    length = tf.minimum(constrained.phrase_lengths(words), tf.maximum(limits - 1, 0))  # [B]
    attention_time = source_time if attention else 0
    # The loop reads a copy of the memory: the int8 export leaves in float a product whose
    # output a loop reads from outside (keras_nmt.export.quantize), and the encoder's are
    # the beam's too.
    memory = tf.nest.map_structure(lambda x: tf.gather(x, tf.range(batch)), memory)
    first = _Fed(tf.constant(0, tf.int32), state, tf.fill([batch], BOS_ID),
                 tf.zeros([batch], tf.float32), tf.zeros([batch, 0], tf.int32),
                 tf.zeros([batch, 0, attention_time], tf.float32),
                 tf.zeros([batch, 0], tf.float32), constrained.start_state(rules))
    invariants = tf.nest.map_structure(lambda x: tf.TensorShape([None] * x.shape.rank), first)
    invariants = invariants._replace(state=tf.nest.map_structure(
        lambda x: tf.TensorShape([None] + x.shape[1:].as_list()), state))

    def body(fed: _Fed):
        logits, new_state, weights = model.step(fed.last, fed.state, memory, projection)
        logits = tf.cast(logits, tf.float32)
        _, _, peak, log_norm, _ = normalised_best(logits, 1, count)
        column = tf.gather(columns, fed.t, axis=1)  # [B]
        token_lp = (take_along_rows(logits, column[:, None]) - peak - log_norm)[:, 0]
        going = fed.t < length
        word = tf.where(going, tf.gather(words, fed.t, axis=1), 0)
        step_lp = tf.where(going, token_lp, 0.0)
        attn = fed.attention
        if attention:
            step_attn = _keep(going, tf.cast(weights, tf.float32), tf.zeros_like(weights,
                                                                               tf.float32))
            attn = tf.concat([attn, step_attn[:, None, :]], axis=1)
        after = constrained.advance(fed.matches, rules, column, in_prefix=True)
        return (_Fed(
            fed.t + 1,
            tf.nest.map_structure(lambda new, old: _keep(going, new, old), new_state, fed.state),
            tf.where(going, word, fed.last), fed.log_prob + step_lp,
            tf.concat([fed.ids, word[:, None]], axis=1), attn,
            tf.concat([fed.token_logprobs, step_lp[:, None]], axis=1),
            tf.nest.map_structure(lambda new, old: _keep(going, new, old), after, fed.matches)),)

    (final,) = tf.while_loop(lambda fed: fed.t < tf.reduce_max(length), body, (first,),
                             shape_invariants=(invariants,))
    return Prefix(final.state, final.last, final.log_prob, length, final.ids, final.attention,
                  final.token_logprobs, final.matches)


def after_prefix(prefix, continuation, length, lengths, out_time):
    """Each hypothesis' whole output: ``prefix`` [B, P, ...] (a row's first ``length``
    [B] positions), then ``continuation`` [B, N, W, ...] (what the beam generated after
    it), cut to ``out_time`` positions and zero from each hypothesis' ``lengths``
    [B, N] on: [B, N, out_time, ...]."""
    # One zero position each, so that neither gather reads an empty axis.
    prefix = tf.pad(prefix, [[0, 0], [0, 1]] + [[0, 0]] * (prefix.shape.rank - 2))
    continuation = tf.pad(continuation,
                          [[0, 0], [0, 0], [0, 1]] + [[0, 0]] * (continuation.shape.rank - 3))
    batch, hypotheses = tf.shape(continuation)[0], tf.shape(continuation)[1]
    position = tf.range(out_time)[None, :]  # [1, T]
    start = length[:, None]  # [B, 1]
    in_prefix = tf.minimum(position, tf.shape(prefix)[1] - 1) + tf.zeros_like(start)  # [B, T]
    later = tf.clip_by_value(position - start, 0, tf.shape(continuation)[2] - 1)  # [B, T]
    sentence = tf.broadcast_to(tf.range(batch)[:, None, None], [batch, hypotheses, out_time])
    hypothesis = tf.broadcast_to(tf.range(hypotheses)[None, :, None],
                                 [batch, hypotheses, out_time])
    from_prefix = tf.gather_nd(prefix, tf.stack([sentence[:, 0], in_prefix], axis=-1))
    from_beam = tf.gather_nd(continuation, tf.stack(
        [sentence, hypothesis, tf.broadcast_to(later[:, None, :], tf.shape(sentence))], axis=-1))
    whole = tf.where(_widen((position < start)[:, None, :], from_beam),
                     from_prefix[:, None], from_beam)
    inside = (position[None] < lengths[:, :, None])  # [B, N, T]
    return tf.where(_widen(inside, whole), whole, tf.zeros_like(whole))


def _widen(mask, like):
    """``mask`` [B, N, T] with ones appended to ``like``'s rank."""
    extra = like.shape.rank - 3
    return tf.reshape(mask, tf.concat([tf.shape(mask), tf.ones([extra], tf.int32)], axis=0))
