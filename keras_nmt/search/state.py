"""The beam search's loop state as named structures, and what stays fixed over a search.

:class:`BeamState` is everything one step of :mod:`keras_nmt.search.beam`'s loop reads and
writes: the decoder rows, the :class:`Live` hypotheses, the :class:`Pool` of finished ones
and, for a constrained search, the live hypotheses' phrase matches. NamedTuples, so
``tf.while_loop`` and ``tf.nest`` take them as they are. A part the search does without
(attention or token log-probability histories not asked for, a plain search's matches and
unmet counts) is ``()``: no loop variable at all, and the loop's structure is static per
graph. Histories grow by one column a step inside loop variables (no TensorArray), which
tf2onnx converts. Size, with A sentences still decoded, B in the batch, K the beam, t the
tokens so far and Tx the source length: [A*K, t, Tx] live and [B, K, t, Tx] pooled
attention, [A*K, t] and [B, K, t] for ids and token log-probabilities.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import tensorflow as tf

from keras_nmt.layers.row_layout import tile_rows


@dataclasses.dataclass(frozen=True)
class Setup:
    """What every step of one search reads and none changes: the ``model``, the beam size
    ``k``, the ``batch`` size, UNK ban, length-normalisation ``alpha``, each sentence's
    ``limits`` [B] (and ``limits ** alpha``, ``limit_penalty``), the loop's ``max_steps``,
    the hypotheses ``returned`` per sentence (N), vocabulary selection (``columns``,
    ``count`` and ``projection``; None without it), ``source_time`` (Tx) and the options
    of :func:`~keras_nmt.search.beam.beam_search`."""

    model: Any
    k: Any
    batch: Any
    forbid_unk: Any
    alpha: Any
    limits: Any
    limit_penalty: Any
    max_steps: Any
    returned: Any
    dead: Any
    columns: Any
    count: Any
    projection: Any
    source_time: Any
    attention: bool
    token_logprobs: bool
    early_stopping: bool
    compact: bool


class History(NamedTuple):
    """One column per generated token: ``ids`` (int32), ``attention`` (the step's weights
    over the source, float32 [..., t, Tx]) and ``token_logprobs`` (float32); the last two
    ``()`` unless asked for."""

    ids: Any
    attention: Any
    token_logprobs: Any


class Live(NamedTuple):
    """The active sentences' live hypotheses: ``log_probs`` [A, K] (DEAD for a dead slot)
    and their ``history`` [A*K, t, ...]."""

    log_probs: Any
    history: History


class Pool(NamedTuple):
    """Every sentence's K best finished hypotheses, sorted by ``scores`` [B, K] (the
    ranking score, DEAD for an empty slot): ``log_probs`` [B, K], ``lengths`` [B, K]
    (0: empty slot), ``history`` [B, K, t, ...] and, with phrases, ``unmet`` [B, K] (the
    phrases to include each lacks; ``()`` otherwise)."""

    scores: Any
    log_probs: Any
    lengths: Any
    history: History
    unmet: Any


class BeamState(NamedTuple):
    """The loop's variables: ``t`` tokens generated so far, the batch rows of the A
    sentences still decoded (``active`` [A]) and whether each has stopped (``done``
    [A]), the ``previous_ids`` [A*K] fed next, the ``decoder`` state [A*K, ...] (rows in
    the layout of :mod:`keras_nmt.layers.row_layout`), the encoder's ``memory`` [A, ...]
    (a row per sentence, which the model's step reads for its K hypotheses, so it is
    neither copied nor gathered K times), the ``live`` hypotheses, the ``pool`` of
    finished ones and, with phrases, the live hypotheses' ``matches``
    (:class:`~keras_nmt.search.constrained.MatchState` [A*K, ...]; ``()`` otherwise)."""

    t: Any
    active: Any
    done: Any
    previous_ids: Any
    decoder: Any
    memory: Any
    live: Live
    pool: Pool
    matches: Any


def shape_invariants(state: BeamState) -> BeamState:
    """``state``'s shapes with every axis free (hypotheses come and go, histories grow),
    but the decoder state's and the memory's trailing ones."""
    def free(x):
        return tf.TensorShape([None] * x.shape.rank)

    def rows_free(x):
        return tf.TensorShape([None] + x.shape[1:].as_list())

    loose = tf.nest.map_structure(free, state)
    return loose._replace(decoder=tf.nest.map_structure(rows_free, state.decoder),
                          memory=tf.nest.map_structure(rows_free, state.memory))


def empty_history(setup: Setup, rows) -> History:
    """A history of no token for ``rows`` (the leading dimensions, a list)."""
    return History(
        tf.zeros(rows + [0], tf.int32),
        tf.zeros(rows + [0, setup.source_time], tf.float32) if setup.attention else (),
        tf.zeros(rows + [0], tf.float32) if setup.token_logprobs else (),
    )


def start(setup: Setup, decoder, memory, first_token, first_lp) -> BeamState:
    """The state before the first step: one live hypothesis per sentence, ``first_token``
    [B] to feed with log-probability ``first_lp`` [B] (the K-1 others dead, so copies of
    the same prefix never fill the beam), ``decoder`` state a row per sentence, an empty
    pool."""
    k, batch, dead = setup.k, setup.batch, setup.dead
    first_live = tf.where(tf.equal(tf.range(k), 0)[None, :], first_lp[:, None], dead)
    return BeamState(
        t=tf.constant(0, tf.int32),
        active=tf.range(batch),
        done=tf.zeros([batch], tf.bool),
        previous_ids=tile_rows(first_token, k),
        decoder=tf.nest.map_structure(lambda x: tile_rows(x, k), decoder),
        memory=memory,
        live=Live(first_live, empty_history(setup, [batch * k])),
        pool=Pool(tf.fill([batch, k], dead), tf.fill([batch, k], dead),
                  tf.zeros([batch, k], tf.int32), empty_history(setup, [batch, k]), ()),
        matches=(),
    )
