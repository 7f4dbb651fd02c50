"""What a constrained search adds to a beam search step: phrases the output must hold,
phrases it must not, and a prefix it must start with (docs/decoding.md, "Constraints").

Contract: every function is plain TensorFlow on the batch's tensors (it runs in Keras,
the SavedModel and ONNX alike), with phrases in the search's token space (word ids, or
with vocabulary selection their columns: :func:`phrase_columns`). Hypotheses that cover
more constraint tokens keep a share of the beam (:func:`bank_select`); a hypothesis may
end only once it has met every phrase to include, or at its length limit, and one that
missed some ranks after every one that met them all, with the count (``unmet``) kept.

Cost per step, over the A*K rows of the live hypotheses: the matches of P phrases of L
tokens to include and Q of M to avoid are bool [A*K, P, L] and [A*K, Q, M], updated in
O(A*K * (P*L + Q*M)); scoring each row's K + P candidates adds O(A*K * (K + P) * P*L);
the banks sort each sentence's K * (K + P) candidates once.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import tensorflow as tf

from keras_nmt.core.constants import EOS_ID, PAD_ID, UNK_ID
from keras_nmt.layers.row_layout import tile_rows
from keras_nmt.search.candidates import (
    ALIVE, DEAD, never_generated, normalised_best, only_first,
)
from keras_nmt.search.top_k import take_along_rows

# Subtracted from a finished hypothesis' ranking score per phrase it did not include: it
# ranks below every hypothesis that met them all (real scores are far smaller in size),
# and stays far above DEAD.
UNMET_PENALTY = 1e6


@dataclasses.dataclass(frozen=True)
class Constraints:
    """The batch's constraints, PAD-padded int32 tensors (a phrase of PAD only is none):

    ``include`` [B, P, L]: phrases each sentence's output must contain;
    ``avoid`` [B, Q, M]: phrases it must not contain;
    ``prefix`` [B, T]: tokens it must start with.
    """

    include: Any
    avoid: Any
    prefix: Any

    @classmethod
    def of(cls, include, avoid, prefix) -> "Constraints":
        """From tensors of any integer type, each axis at least one wide (an empty axis is
        padded: the graph then needs no special case for "no phrases")."""
        def widen(x, rank):
            x = tf.cast(tf.convert_to_tensor(x), tf.int32)
            shape = tf.shape(x)
            pads = [[0, 0]] + [[0, tf.maximum(1 - shape[axis], 0)] for axis in range(1, rank)]
            return tf.pad(x, pads)
        return cls(widen(include, 3), widen(avoid, 3), widen(prefix, 2))

    def gather(self, sentences) -> "Constraints":
        """The constraints of the batch's sentences ``sentences`` (int [A])."""
        return Constraints(*(tf.gather(x, sentences) for x in (self.include, self.avoid,
                                                             self.prefix)))

    def rows(self, k) -> "Constraints":
        """Each sentence's constraints repeated for its K hypotheses ([B*K, ...])."""
        return Constraints(*(tile_rows(x, k) for x in (self.include, self.avoid, self.prefix)))

    def words(self):
        """Every id the constraints name (PAD included), int32 [N]: what vocabulary
        selection must keep."""
        return tf.concat([tf.reshape(x, [-1]) for x in (self.include, self.avoid,
                                                        self.prefix)], axis=0)


def phrase_lengths(phrases):
    """Tokens of each phrase: int32 [..., P] of [..., P, L] (PAD does not count)."""
    return tf.reduce_sum(tf.cast(tf.not_equal(phrases, PAD_ID), tf.int32), axis=-1)


def phrase_columns(constraints: Constraints, columns) -> Constraints:
    """``constraints`` in the column space of vocabulary selection: each word id replaced
    by its position in ``columns`` (int32 [C], :func:`~keras_nmt.search.shortlist.output_columns`
    sorted ids, reserved ids at their own positions, so PAD stays PAD). Every word must
    be among the columns (:func:`~keras_nmt.search.shortlist.output_columns`' ``required``)."""
    def to_columns(x):
        flat = tf.reshape(x, [-1, 1])
        hits = tf.cast(tf.equal(flat, columns[None, :]), tf.int32)
        return tf.reshape(tf.cast(tf.argmax(hits, axis=1), tf.int32), tf.shape(x))
    return Constraints(*(to_columns(x) for x in (constraints.include, constraints.avoid,
                                                 constraints.prefix)))


class MatchState(NamedTuple):
    """Per hypothesis: the partial matches of the phrases to include and to avoid (bool
    [rows, P, L] and [rows, Q, M]) and which phrases to include it has met (bool [rows, P]).
    A NamedTuple, so that a loop may carry it as it is."""

    include: Any
    avoid: Any
    met: Any

    def gather(self, rows) -> "MatchState":
        return MatchState(*(tf.gather(x, rows) for x in self))


def start_state(constraints: Constraints) -> MatchState:
    """The match state of empty hypotheses, one per row of ``constraints``."""
    def empty(phrases):
        width = tf.shape(phrases)[2]
        return tf.broadcast_to(tf.equal(tf.range(width), 0)[None, None, :], tf.shape(phrases))
    return MatchState(empty(constraints.include), empty(constraints.avoid),
                      tf.equal(phrase_lengths(constraints.include), 0))


def _advance(matches, phrases, lengths, tokens, keep=None):
    """(new matches, completed): ``matches`` [..., P, L] after ``tokens`` [...];
    ``completed`` [..., P]: the token finished a whole phrase. ``keep`` (bool [..., P]):
    the phrases the token may advance (default: all)."""
    width = tf.shape(phrases)[-1]
    hit = matches & tf.equal(phrases, tokens[..., None, None])  # [..., P, L]
    if keep is not None:
        hit &= keep[..., None]
    completed = tf.reduce_sum(tf.cast(
        hit & tf.equal(tf.range(width), lengths[..., None] - 1), tf.int32), axis=-1) > 0
    shape = tf.shape(hit)
    first = tf.ones(tf.concat([shape[:-1], [1]], axis=0), tf.bool)
    return tf.concat([first, hit[..., :-1]], axis=-1), completed


def _unk_owner(matches, phrases, lengths, met, tokens):
    """Which phrases to include each of ``tokens`` [...] may advance, bool [..., P]: any
    phrase for a word, and for ``<unk>`` one phrase only, the first unmet one (in order)
    whose partial match it continues; none with ``matches`` None (a prefix's ``<unk>``
    stands for the prefix's word)."""
    unk = tf.equal(tokens, UNK_ID)[..., None]  # [..., 1]
    if matches is None:
        return tf.logical_not(unk)
    inside = tf.range(tf.shape(phrases)[-1]) < lengths[..., None]
    continues = tf.logical_not(met) & (tf.reduce_sum(tf.cast(
        matches & inside & tf.equal(phrases, UNK_ID), tf.int32), axis=-1) > 0)  # [..., P]
    earlier = tf.cumsum(tf.cast(continues, tf.int32), axis=-1, exclusive=True)
    return tf.logical_not(unk) | (continues & tf.equal(earlier, 0))


def advance(state: MatchState, constraints: Constraints, tokens,
            in_prefix: bool = False) -> MatchState:
    """The state of hypotheses ``state`` (constraints per row) after each appends one
    of ``tokens`` [rows].

    A hypothesis keeps, for every phrase, which of the phrase's beginnings its output ends
    with (position j is set when the last j tokens equal the phrase's first j; position 0
    always is). Appending token y sets position j + 1 where j was set and the phrase's
    token j is y: every partial match at once, overlapping ones included (the Shift-And
    string matcher), so no occurrence is ever missed, whatever the phrase repeats. A phrase
    to include is met when its last token completes a match; a phrase to avoid bans its
    last token wherever the rest of it was just matched (:func:`banned_tokens`).

    An ``<unk>`` in a phrase stands for one word outside the vocabulary, so an ``<unk>``
    of the output advances one phrase only (:func:`_unk_owner`), and none ``in_prefix``;
    :func:`keras_nmt.decoding.constraints.read_output` is this rule's Python twin."""
    lengths = phrase_lengths(constraints.include)
    owner = _unk_owner(None if in_prefix else state.include, constraints.include, lengths,
                       state.met, tokens)
    include, completed = _advance(state.include, constraints.include, lengths, tokens, owner)
    avoid, _ = _advance(state.avoid, constraints.avoid, phrase_lengths(constraints.avoid),
                        tokens)
    return MatchState(include, avoid, state.met | completed)


def _longest_partial(matches, lengths):
    """The longest match of each phrase shorter than the phrase: int32 [..., P]."""
    positions = tf.range(tf.shape(matches)[-1])
    usable = matches & (positions < lengths[..., None])
    return tf.reduce_max(tf.cast(usable, tf.int32) * positions, axis=-1)


def progress(state: MatchState, constraints: Constraints):
    """Constraint tokens a hypothesis covers (its bank): a met phrase counts whole, an
    unmet one its longest partial match. int32 [rows]."""
    lengths = phrase_lengths(constraints.include)
    partial = _longest_partial(state.include, lengths)
    return tf.reduce_sum(tf.where(state.met, lengths, partial), axis=-1)


def progress_after(state: MatchState, constraints: Constraints, columns):
    """:func:`progress` of each hypothesis after each of its candidate ``columns``
    (int32 [rows, W]): int32 [rows, W]."""
    lengths = phrase_lengths(constraints.include)[:, None]  # [rows, 1, P]
    owner = _unk_owner(state.include[:, None], constraints.include[:, None], lengths,
                       state.met[:, None], columns)  # [rows, W, P]
    matches, completed = _advance(state.include[:, None], constraints.include[:, None],
                                  lengths, columns, owner)
    partial = _longest_partial(matches, lengths)
    return tf.reduce_sum(tf.where(state.met[:, None] | completed, lengths, partial), axis=-1)


def unmet(state: MatchState):
    """Phrases to include a hypothesis has not met: int32 [rows]."""
    return tf.reduce_sum(tf.cast(tf.logical_not(state.met), tf.int32), axis=-1)


def next_tokens(state: MatchState, constraints: Constraints):
    """Per hypothesis and phrase to include, the token that continues its longest partial
    match, or -1 for a met phrase: int32 [rows, P]."""
    lengths = phrase_lengths(constraints.include)
    partial = _longest_partial(state.include, lengths)
    token = take_along_rows(
        tf.reshape(constraints.include, [-1, tf.shape(constraints.include)[2]]),
        tf.reshape(partial, [-1, 1]))
    return tf.where(state.met, -1, tf.reshape(token, tf.shape(partial)))


def banned_tokens(state: MatchState, constraints: Constraints):
    """Per hypothesis and phrase to avoid, the token that would complete it, or -1:
    int32 [rows, Q]."""
    lengths = phrase_lengths(constraints.avoid)
    width = tf.shape(constraints.avoid)[2]
    last = tf.maximum(lengths - 1, 0)
    at_last = tf.equal(tf.range(width), last[..., None])  # [rows, Q, M]
    primed = tf.reduce_sum(tf.cast(state.avoid & at_last, tf.int32), axis=-1) > 0
    token = tf.reduce_sum(tf.where(at_last, constraints.avoid, 0), axis=-1)
    return tf.where(primed & (lengths > 0), token, -1)


def _contains(values, sets):
    """Whether each of ``values`` [R, W] is in its row of ``sets`` [R, S]: bool [R, W]."""
    return tf.reduce_sum(tf.cast(tf.equal(values[:, :, None], sets[:, None, :]), tf.int32),
                         axis=2) > 0


def guided_candidates(logits, k, imposed, allow_eos, banned, offered, forbid_unk, count=None):
    """:func:`~keras_nmt.search.candidates.row_candidates` under constraints: (log-probs,
    columns), each [rows, R + P], R = min(K, C).

    The first R are the row's best columns by the model, without PAD, BOS, UNK when
    ``forbid_unk``, EOS where ``allow_eos`` (bool [rows]) is false, and the row's
    ``banned`` columns (int32 [rows, Q], -1: none). The next P are the ``offered`` columns
    (int32 [rows, P], -1: none; a constraint's next token, UNK included, whatever
    ``forbid_unk`` says), dead where banned or already among the first R. A row with a
    column ``imposed`` on it (int32 [rows], -1: none: EOS at the limit) gets
    it with its model log-probability and nothing else. Log-probabilities are normalised
    over every column, as in the unconstrained search."""
    lp, top_columns, peak, log_norm, count = normalised_best(
        logits, k + 4 + tf.shape(banned)[1], count)
    narrow = tf.minimum(k, count)

    def logprob_of(columns):
        return (take_along_rows(logits, tf.maximum(columns, 0)) - peak) - log_norm

    refused = (
        never_generated(top_columns, forbid_unk, count)
        | (tf.logical_not(allow_eos)[:, None] & tf.equal(top_columns, EOS_ID))
        | _contains(top_columns, banned)
    )
    lp, order = tf.math.top_k(tf.where(refused, DEAD, lp), k=narrow)
    columns = take_along_rows(top_columns, order)

    kept = tf.where(lp > ALIVE, columns, -1)
    width = tf.shape(offered)[1]
    earlier = tf.range(width)[None, :] < tf.range(width)[:, None]  # [P, P]: j before i
    repeated = tf.reduce_sum(tf.cast(
        tf.equal(offered[:, :, None], offered[:, None, :]) & earlier[None], tf.int32), axis=2) > 0
    dropped = ((offered < 0) | _contains(offered, kept) | _contains(offered, banned)
               | repeated)
    lp = tf.concat([lp, tf.where(dropped, DEAD, logprob_of(offered))], axis=1)
    columns = tf.concat([columns, tf.where(dropped, PAD_ID, offered)], axis=1)

    return only_first(lp, columns, imposed >= 0, logprob_of(imposed[:, None]), imposed[:, None],
                      tf.shape(lp)[1])


def bank_select(candidates, banks, k):
    """Dynamic beam allocation: K of each sentence's ``candidates`` (log-probs [A, W]),
    taken in turn from the banks (``banks`` int32 [A, W], constraint tokens covered),
    the fullest bank first, each bank's best first; dead candidates come last. Returns
    (log-probs [A, K], index [A, K]) as ``tf.math.top_k`` does.

    This is the vectorized form (Hu et al., 2019) of Post & Vilar (2018): besides the K
    best extensions of each hypothesis, every hypothesis is offered the next token of each
    phrase it has not met (:func:`guided_candidates`), so hypotheses that make progress
    on the constraints always keep a share of the beam, however unlikely the model finds
    them, and hypotheses that met them all compete on score."""
    width = tf.shape(candidates)[1]
    order_lp, order = tf.math.top_k(candidates, k=width)
    sorted_banks = take_along_rows(banks, order)
    depth = tf.reduce_max(banks) + 1
    # An equality, not tf.one_hot: tf2onnx converts one_hot of rank 1 only.
    one_hot = tf.cast(tf.equal(sorted_banks[:, :, None], tf.range(depth)[None, None, :]),
                      tf.int32)  # [A, W, banks]
    rank = tf.reduce_sum(tf.cumsum(one_hot, axis=1, exclusive=True) * one_hot, axis=2)
    turn = rank * depth + (depth - 1 - sorted_banks)
    turn = tf.where(order_lp > ALIVE, turn, depth * width + tf.range(width)[None, :])
    # Smallest turn first; turns are distinct integers, exact in float32 for any real beam.
    _, pick = tf.math.top_k(-tf.cast(turn, tf.float32), k=k)
    index = take_along_rows(order, pick)
    return take_along_rows(candidates, index), index
