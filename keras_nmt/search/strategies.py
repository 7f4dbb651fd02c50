"""How each kind of search scores and chooses its candidates, over one
:class:`~keras_nmt.search.state.BeamState` and one loop (:mod:`keras_nmt.search.beam`).

- :class:`Plain`: each live hypothesis' best one-token extensions, the K best of a
  sentence's K * min(K, C) kept (C: the columns scored, the vocabulary or a shortlist);
- :class:`AfterPrefix`: the plain steps after a prefix decoded once per sentence
  (:mod:`keras_nmt.search.prefix`); lengths count the prefix, outputs start with it;
- :class:`Constrained`: after a prefix, with phrases to include and avoid
  (:mod:`keras_nmt.search.constrained`): P more candidates per hypothesis (a phrase's next
  token), drawn by banks, and per step O(A*K * (P*L + Q*M)) of phrase matching.

A strategy's ``initial`` completes the start state, ``made`` says how long the step's
hypotheses are, ``candidates`` and ``choose`` pick the K survivors, ``chosen`` ranks the
ended ones, ``finished`` and ``outputs`` turn the final pool into the search's result.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import tensorflow as tf

from keras_nmt.core.constants import EOS_ID
from keras_nmt.layers.row_layout import tile_rows
from keras_nmt.search import constrained
from keras_nmt.search.candidates import row_candidates
from keras_nmt.search.prefix import after_prefix
from keras_nmt.search.state import BeamState, History, Pool, Setup
from keras_nmt.search.top_k import take_along_rows


class Candidates(NamedTuple):
    """A step's candidate extensions of every live hypothesis: ``log_probs`` and
    ``columns`` [A*K, W]; with phrases, each one's ``banks`` [A*K, W] and the rows'
    ``rules`` (:class:`~keras_nmt.search.constrained.Constraints` [A*K, ...])."""

    log_probs: Any
    columns: Any
    banks: Any = None
    rules: Any = None


class Plain:
    """The plain search: a hypothesis is as long as the tokens generated, the K best
    extensions of a sentence survive, and its pool holds no unmet counts."""

    def __init__(self, setup: Setup):
        self.setup = setup

    def initial(self, state: BeamState) -> BeamState:
        return state

    def made(self, length, active):
        """Tokens of the hypotheses this step makes: a scalar, or int32 [A]."""
        return length

    def candidates(self, logits, at_limit, state: BeamState) -> Candidates:
        """Each row's best extensions; EOS alone where ``at_limit`` (bool [A])."""
        s = self.setup
        return Candidates(*row_candidates(logits, s.k, tile_rows(at_limit, s.k), s.forbid_unk,
                                          s.count))

    def choose(self, scores, found: Candidates):
        """(log-probs [A, K], index [A, K]) of the survivors among ``scores`` [A, K*W]."""
        return tf.math.top_k(scores, k=self.setup.k)

    def chosen(self, state: BeamState, found, index, parents, ended, ranking):
        """(ranking [A, K] of the hypotheses that ``ended``, their unmet phrases, the
        survivors' matches): nothing to add without phrases."""
        return ranking, (), ()

    def finished(self, pool: Pool) -> Pool:
        return pool

    def whole(self, history: History, lengths, out_time) -> History:
        """The returned hypotheses' histories [B, N, >= out_time, ...]."""
        return history

    def outputs(self, pool: Pool) -> dict[str, tf.Tensor]:
        """The search's result (see :func:`~keras_nmt.search.beam.beam_search`)."""
        returned = self.setup.returned
        lengths = pool.lengths[:, :returned]
        valid = lengths > 0
        # Empty slots: -inf. Added, not selected: tf2onnx lowers a select to
        # cond * x + (1 - cond) * y, which would turn 0 * -inf into NaN.
        empty = tf.math.log(tf.cast(valid, tf.float32))  # 0 or -inf
        out_time = tf.maximum(tf.reduce_max(lengths), 0)
        history = self.whole(tf.nest.map_structure(lambda h: h[:, :returned], pool.history),
                             lengths, out_time)
        result = {
            "ids": tf.where(valid[:, :, None], history.ids[:, :, :out_time], 0),
            "lengths": lengths,
            "scores": tf.where(valid, self.scores(pool, lengths), 0.0) + empty,
            "log_probs": tf.where(valid, pool.log_probs[:, :returned], 0.0) + empty,
        }
        if not isinstance(pool.unmet, tuple):
            result["unmet"] = tf.where(valid, pool.unmet[:, :returned], 0)
        zero = tf.constant(0.0, tf.float32)
        if self.setup.attention:
            result["attention"] = tf.where(valid[:, :, None, None],
                                           history.attention[:, :, :out_time, :], zero)
        if self.setup.token_logprobs:
            result["token_logprobs"] = tf.where(
                valid[:, :, None], history.token_logprobs[:, :, :out_time], zero)
        return result

    def scores(self, pool: Pool, lengths):
        """The returned hypotheses' ranking scores [B, N]."""
        return pool.scores[:, :self.setup.returned]


class AfterPrefix(Plain):
    """The plain steps after each sentence's ``prefix``
    (:class:`~keras_nmt.search.prefix.Prefix`): hypotheses are as long as their prefix
    and more, and the outputs hold the prefix."""

    def __init__(self, setup: Setup, prefix):
        super().__init__(setup)
        self.prefix = prefix

    def made(self, length, active):
        return length + tf.gather(self.prefix.length, active)

    def finished(self, pool: Pool) -> Pool:
        """The pool, with the unmet counts (none) that :class:`Constrained` keeps."""
        return pool._replace(unmet=tf.zeros([self.setup.batch, self.setup.k], tf.int32))

    def whole(self, history: History, lengths, out_time) -> History:
        """The prefix, then what the beam made after it."""
        prefix = self.prefix
        return History(*(
            h if isinstance(h, tuple)
            else after_prefix(p, h, prefix.length, lengths, out_time)
            for p, h in zip((prefix.ids, prefix.attention, prefix.token_logprobs), history)))

    def scores(self, pool: Pool, lengths):
        """The true ranking score, without the penalty that ordered the pool."""
        return pool.log_probs[:, :self.setup.returned] / tf.pow(
            tf.cast(tf.maximum(lengths, 1), tf.float32), self.setup.alpha)


class Constrained(AfterPrefix):
    """After the prefix, phrases to include and avoid (``constraints``, in the columns the
    search generates): each hypothesis is offered the next token of each phrase it has not
    met, the survivors are drawn by banks (:func:`~keras_nmt.search.constrained.bank_select`),
    and a finished hypothesis that lacks some phrase ranks after those that lack none."""

    def __init__(self, setup: Setup, prefix, constraints: constrained.Constraints):
        super().__init__(setup, prefix)
        self.constraints = constraints

    def initial(self, state: BeamState) -> BeamState:
        s = self.setup
        matches = constrained.MatchState(*(tile_rows(x, s.k) for x in self.prefix.matches))
        return state._replace(
            matches=matches,
            pool=state.pool._replace(unmet=tf.zeros([s.batch, s.k], tf.int32)))

    def candidates(self, logits, at_limit, state: BeamState) -> Candidates:
        s = self.setup
        matches = state.matches
        rules = self.constraints.gather(state.active).rows(s.k)  # [A*K, ...]
        imposed = tf.where(tile_rows(at_limit, s.k), EOS_ID, -1)  # EOS at the limit
        log_probs, columns = constrained.guided_candidates(
            logits, s.k, imposed, tf.equal(constrained.unmet(matches), 0),
            constrained.banned_tokens(matches, rules),
            constrained.next_tokens(matches, rules), s.forbid_unk, s.count)  # [A*K, R + P]
        return Candidates(log_probs, columns,
                          constrained.progress_after(matches, rules, columns), rules)

    def choose(self, scores, found: Candidates):
        """A share of the beam for each count of constraint tokens covered."""
        return constrained.bank_select(scores, tf.reshape(found.banks, tf.shape(scores)),
                                       self.setup.k)

    def chosen(self, state: BeamState, found, index, parents, ended, ranking):
        columns = take_along_rows(tf.reshape(found.columns, [tf.shape(index)[0], -1]), index)
        matches = constrained.advance(state.matches.gather(parents), found.rules,
                                      tf.reshape(columns, [-1]))
        unmet = tf.where(ended, tf.reshape(constrained.unmet(matches), tf.shape(ended)), 0)
        ranking -= constrained.UNMET_PENALTY * tf.cast(unmet, tf.float32)
        return ranking, unmet, matches

    def finished(self, pool: Pool) -> Pool:
        return pool
