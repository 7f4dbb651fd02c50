"""Batched beam search over :class:`~keras_nmt.models.rnnsearch.TranslationModel` as one graph.

:func:`beam_search` owns the loop: one ``tf.while_loop`` of plain TensorFlow ops over a
:class:`~keras_nmt.search.state.BeamState`, written once for every kind of search; how
candidates are scored and chosen is the strategy's (:mod:`keras_nmt.search.strategies`).
It traces with autograph off (``keras.export.ExportArchive``) and converts to ONNX: the
history grows in loop variables under loose shape invariants, no TensorArray, no Python
control flow on tensors. Beam size, length-normalisation exponent, UNK ban and maximum
length may be tensors fed at run time. With a beam of one it is greedy decoding.

Cost per step, A sentences still decoded: a decoder step over A*K rows (its [A*K, C]
output layer dominates; C: the vocabulary, or a shortlist's columns), a top-k over each
row's C logits and one over a sentence's K * min(K, C) candidates, and gathers of the
[A*K, t, Tx] history (none without ``attention``). A sentence runs at most its length
limit, and usually stops a few steps after its best hypothesis ends.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from keras_nmt.core.constants import BOS_ID, EOS_ID, PAD_ID
from keras_nmt.layers.row_layout import rows_of
from keras_nmt.search import constrained
from keras_nmt.search.candidates import ALIVE, DEAD
from keras_nmt.search.lengths import decode_limits
from keras_nmt.search.prefix import feed_prefix
from keras_nmt.search.shortlist import Shortlist, output_columns
from keras_nmt.search.state import (
    BeamState, History, Live, Pool, Setup, shape_invariants, start,
)
from keras_nmt.search.strategies import AfterPrefix, Constrained, Plain
from keras_nmt.search.top_k import take_along_rows


def beam_search(
    model,
    source_ids,
    beam_size,
    alpha=1.0,
    forbid_unk=False,
    max_length=None,
    nbest: int = 1,
    max_decode_ratio=2.0,
    early_stopping: bool = True,
    shortlist: Shortlist | None = None,
    compact: bool = True,
    attention: bool = True,
    constraints: "constrained.Constraints | None" = None,
    token_logprobs: bool = False,
) -> dict[str, tf.Tensor]:
    """Translate a batch of source sentences with beam search.

    Args:
      model: a :class:`~keras_nmt.models.rnnsearch.TranslationModel` (anything with
        ``encode`` and ``step``).
      source_ids: int [B, Tx], 0 = padding.
      beam_size: K >= 1, a Python int or a scalar int32 tensor.
      alpha: length-normalisation exponent >= 0 (scalar, may be a tensor; a negative
        tensor is clamped to 0); 0 = raw log-prob.
      forbid_unk: never generate UNK (Python or scalar bool tensor).
      max_length: generated tokens per sentence, EOS included (scalar; None or <= 0:
        the ``max_decode_ratio`` rule, see :func:`decode_limits`).
      nbest: hypotheses returned per sentence (a Python int), clipped to ``beam_size``.
      max_decode_ratio: see :func:`decode_limits` (scalar, may be a tensor).
      early_stopping: stop a sentence once its result is settled (:func:`_settled`);
        False runs it until no live hypothesis is left: the same result, to test that.
      shortlist: vocabulary selection (:class:`Shortlist`): every step scores only the
        batch's candidate words, and the softmax normalises over them. None: every word.
      compact: stopped sentences leave the batch (their rows are gathered out of the
        state, the history and the encoder's memory). False keeps them (frozen) to the
        end: the same result, and every step the same shapes, which XLA wants.
      attention: keep every hypothesis' attention weights, for the ``attention`` output;
        False leaves them out of the loop and of the result.
      constraints: phrases to include and avoid and a prefix per sentence, word ids
        (:class:`~keras_nmt.search.constrained.Constraints`). The ratio rule's limit then
        grows to fit each sentence's prefix and phrases; a ``max_length`` given is kept.
        None: the plain search, whose graph holds none of it.
      token_logprobs: keep each hypothesis' token log-probabilities, for the
        ``token_logprobs`` output (what a translation's confidence is computed from).

    Returns a dict with N = min(nbest, beam_size), hypotheses sorted by ``scores``:
      ``ids`` int32 [B, N, T]: tokens, EOS included, 0 after it;
      ``lengths`` int32 [B, N]: generated tokens including EOS;
      ``scores`` float32 [B, N]: ``log_probs / lengths ** alpha``, the ranking score;
      ``log_probs`` float32 [B, N]: summed log-probabilities;
      ``attention`` float32 [B, N, T, Tx]: the step's attention weights for each token
      (zeros after EOS, and everywhere for an encdec model); only with ``attention``;
      ``token_logprobs`` float32 [B, N, T]: each token's log-probability as the search
      scored it (zeros after EOS; they sum to ``log_probs``); only with ``token_logprobs``;
      ``unmet`` int32 [B, N], only with ``constraints``: the phrases to include that the
      hypothesis lacks (0 unless its length limit came first); those that lack some rank
      after those that lack none.
    A slot that no hypothesis could fill (only possible when fewer than N sequences
    exist) has score -inf, length 0 and zero ids.
    """
    _check(nbest, beam_size, alpha)
    source_ids = tf.convert_to_tensor(source_ids)
    if source_ids.dtype != tf.int32:
        source_ids = tf.cast(source_ids, tf.int32)
    if constraints is not None:
        constraints = constrained.Constraints.of(constraints.include, constraints.avoid,
                                                 constraints.prefix)
    state, memory = model.encode(source_ids)
    setup = _setup(model, source_ids, beam_size, alpha, forbid_unk, max_length, nbest,
                   max_decode_ratio, shortlist, constraints, attention=attention,
                   token_logprobs=token_logprobs, early_stopping=early_stopping,
                   compact=compact)
    if constraints is not None:
        return _guided(setup, state, memory, constraints)
    plain = Plain(setup)
    first = start(setup, state, memory, tf.fill([setup.batch], BOS_ID),
                  tf.zeros([setup.batch], tf.float32))
    return plain.outputs(_search(setup, plain, first))


def greedy_search(model, source_ids, **kwargs) -> dict[str, tf.Tensor]:
    """:func:`beam_search` with a beam of one: the most probable token at every step."""
    kwargs.pop("beam_size", None)
    kwargs["nbest"] = 1
    return beam_search(model, source_ids, 1, **kwargs)


def _check(nbest, beam_size, alpha) -> None:
    """Refuse what a Python argument makes plainly wrong (tensors are clamped instead)."""
    if isinstance(nbest, bool) or not isinstance(nbest, (int, np.integer)) or nbest < 1:
        raise ValueError(f"nbest must be a positive Python int, got {nbest!r}")
    if isinstance(beam_size, (int, np.integer)) and beam_size < 1:
        raise ValueError(f"beam_size must be >= 1, got {beam_size}")
    if isinstance(alpha, (int, float, np.number)) and not alpha >= 0:
        raise ValueError(f"alpha must be >= 0, got {alpha}")


def _limits(source_ids, max_length, max_decode_ratio, constraints):
    """Each sentence's length limit [B] (:func:`decode_limits`); under the ratio rule, at
    least what its prefix and phrases to include need, with the limit's EOS."""
    limits = decode_limits(source_ids, max_length, max_decode_ratio)  # [B]
    if constraints is None:
        return limits
    needed = (constrained.phrase_lengths(constraints.prefix)
              + tf.reduce_sum(constrained.phrase_lengths(constraints.include), 1) + 1)
    ratio_rule = (tf.constant(True) if max_length is None
                  else tf.logical_not(tf.cast(max_length, tf.int32) > 0))
    return tf.where(ratio_rule, tf.maximum(limits, needed), limits)


def _setup(model, source_ids, beam_size, alpha, forbid_unk, max_length, nbest,
           max_decode_ratio, shortlist, constraints, **options) -> Setup:
    """The search's fixed parts; with a ``shortlist``, the output layer's rows of the
    batch's words (and the constraints' words), gathered once for every step. Not without
    one: a batch of one sentence would copy the whole layer."""
    k = tf.maximum(tf.cast(beam_size, tf.int32), 1)
    alpha = tf.maximum(tf.cast(alpha, tf.float32), 0.0)
    limits = _limits(source_ids, max_length, max_decode_ratio, constraints)
    columns = count = projection = None  # every word: the model's own output layer
    if shortlist is not None:
        columns, count = output_columns(source_ids, model.config.tgt_vocab_size, shortlist,
                                        None if constraints is None else constraints.words())
        projection = model.output_projection(columns, count)
    return Setup(
        model=model, k=k, batch=tf.shape(source_ids)[0],
        forbid_unk=tf.cast(forbid_unk, tf.bool), alpha=alpha, limits=limits,
        limit_penalty=tf.pow(tf.cast(limits, tf.float32), alpha),
        max_steps=tf.reduce_max(limits), returned=tf.minimum(tf.constant(nbest, tf.int32), k),
        dead=tf.constant(DEAD, tf.float32), columns=columns, count=count,
        projection=projection, source_time=tf.shape(source_ids)[1], **options)


def _guided(setup: Setup, state, memory, constraints) -> dict[str, tf.Tensor]:
    """The constrained search: the prefix decoded once per sentence, then the beam with
    :class:`Constrained` steps, or the plain ones (:class:`AfterPrefix`) for a batch with a
    prefix but no phrase to include or avoid (what a user typing on the page asks): the
    same hypotheses, without the banks' and matches' work at every step."""
    # Counts, not reduce_any: ONNX's reductions of an empty tensor are not all defined.
    has_phrases = sum(tf.reduce_sum(tf.cast(tf.not_equal(x, PAD_ID), tf.int32))
                      for x in (constraints.include, constraints.avoid)) > 0
    words = constraints.prefix
    if setup.columns is not None:  # the search matches phrases on the columns it generates
        constraints = constrained.phrase_columns(constraints, setup.columns)
    prefix = feed_prefix(setup.model, state, memory, setup.projection, setup.count, words,
                           constraints.prefix, setup.limits, constraints, setup.attention,
                           setup.source_time)
    first = start(setup, prefix.state, memory, prefix.last, prefix.log_prob)
    plain, banked = AfterPrefix(setup, prefix), Constrained(setup, prefix, constraints)
    pool = tf.cond(has_phrases, lambda: _search(setup, banked, first),
                   lambda: _search(setup, plain, first))
    return plain.outputs(pool)


def _search(setup: Setup, strategy: Plain, first: BeamState) -> Pool:
    """The loop, from ``first`` (completed by the strategy) until every sentence has
    stopped; the final pool of finished hypotheses."""
    first = strategy.initial(first)

    def running(state: BeamState):
        # A count, not reduce_all: with every sentence gone ``done`` is empty, and ONNX's
        # reductions of an empty tensor are not all defined.
        left = tf.reduce_sum(tf.cast(tf.logical_not(state.done), tf.int32))
        return tf.logical_and(state.t < setup.max_steps, left > 0)

    (final,) = tf.while_loop(running, lambda state: (_step(setup, strategy, state),),
                             (first,), shape_invariants=(shape_invariants(first),))
    return strategy.finished(final.pool)


def _step(setup: Setup, strategy: Plain, state: BeamState) -> BeamState:
    """One token more for every live hypothesis: the strategy's candidates, the K best of
    each sentence by summed log-probability; those ending with EOS leave the beam (their
    slot is dead until the next step refills it) for the pool. At its length limit a row
    may only end: EOS with its model probability."""
    k, dead = setup.k, setup.dead
    sentences = tf.shape(state.active)[0]  # A
    logits, decoder, weights = setup.model.step(state.previous_ids, state.decoder,
                                                state.memory, setup.projection)
    logits = tf.cast(logits, tf.float32)  # [A*K, C]
    length = state.t + 1  # tokens of the hypotheses made by this step
    made = strategy.made(length, state.active)  # scalar or [A]
    at_limit = made >= tf.gather(setup.limits, state.active)  # [A]: only EOS at the limit
    made = made if made.shape.rank == 0 else made[:, None]
    found = strategy.candidates(logits, at_limit, state)  # [A*K, W]
    width = tf.shape(found.log_probs)[1]
    scores = tf.reshape(tf.reshape(state.live.log_probs, [-1, 1]) + found.log_probs,
                        [sentences, k * width])
    top_lp, top_index = strategy.choose(scores, found)  # [A, K]
    top_lp = tf.maximum(top_lp, dead)  # dead stays exactly dead, never drifts lower
    row_tokens = found.columns if setup.columns is None else tf.gather(setup.columns,
                                                                       found.columns)
    tokens = take_along_rows(tf.reshape(row_tokens, [sentences, k * width]), top_index)
    parents = rows_of(tf.range(sentences)[:, None], top_index // width, k)  # [A*K]
    flat_tokens = tf.reshape(tokens, [-1])
    # One gather per tensor reorders the state and the history by parent.
    decoder = tf.nest.map_structure(lambda x: tf.gather(x, parents), decoder)
    history = _extended(setup, state.live.history, parents, flat_tokens, weights,
                        found.log_probs, top_index)

    ended = tf.equal(tokens, EOS_ID) & (top_lp > ALIVE)  # [A, K]
    ranking = top_lp / tf.pow(tf.cast(made, tf.float32), setup.alpha)
    ranking, ended_unmet, matches = strategy.chosen(state, found, top_index, parents, ended,
                                                    ranking)
    by_sentence = tf.nest.map_structure(
        lambda x: tf.reshape(x, tf.concat([[sentences, k], tf.shape(x)[1:]], axis=0)), history)
    finished = Pool(tf.where(ended, ranking, dead), tf.where(ended, top_lp, dead),
                    tf.where(ended, made, 0), by_sentence, ended_unmet)
    live_lp = tf.where(tf.equal(tokens, EOS_ID), dead, top_lp)
    pool, merged = _merged(state.pool, finished, state.active, k)
    done = state.done | at_limit | _settled(setup, live_lp, merged, state.active)
    live_lp = tf.where(done[:, None], dead, live_lp)
    after = BeamState(length, state.active, done, flat_tokens, decoder, state.memory,
                      Live(live_lp, history), pool, matches)
    return _compacted(after, k) if setup.compact else after


def _extended(setup: Setup, history: History, parents, tokens, weights, row_lp, index):
    """The live histories [A*K, t + 1, ...] of the chosen hypotheses: each ``parents``
    row's, then its chosen token (``tokens`` [A*K]), the step's attention ``weights``
    [A*K, Tx] (the parents' rows) and the chosen candidates' own log-probabilities
    (``index`` [A, K] into the sentence's ``row_lp`` [A*K, W])."""
    ids = tf.concat([tf.gather(history.ids, parents), tokens[:, None]], axis=1)
    attention, token_logprobs = history.attention, history.token_logprobs
    if setup.attention:
        step_attention = tf.cast(weights, tf.float32)[:, None, :]
        attention = tf.gather(tf.concat([attention, step_attention], axis=1), parents)
    if setup.token_logprobs:  # the candidates' own log-probabilities, not differences
        step_lp = take_along_rows(tf.reshape(row_lp, [tf.shape(index)[0], -1]), index)
        token_logprobs = tf.concat([tf.gather(token_logprobs, parents),
                                    tf.reshape(step_lp, [-1, 1])], axis=1)
    return History(ids, attention, token_logprobs)


def _merged(pool: Pool, finished: Pool, active, k):
    """(the batch's pool with the active sentences' K best of their pool and ``finished``
    [A, K, ...], those merged pools [A, K, ...]). The pool comes first: top_k keeps the
    lower index on ties, so a stopped sentence's pool stays as it is."""
    def grown(history):  # one more column, for the finished ones' last token
        return tf.pad(history, [[0, 0], [0, 0], [0, 1]] + [[0, 0]] * (history.shape.rank - 3))

    pool = pool._replace(history=tf.nest.map_structure(grown, pool.history))
    scores, pick = tf.math.top_k(tf.concat([tf.gather(pool.scores, active), finished.scores],
                                           axis=1), k=k)  # [A, K]
    rows = tf.range(tf.shape(active)[0])[:, None]
    pick = tf.stack([tf.broadcast_to(rows, tf.shape(pick)), pick], axis=-1)
    merged = tf.nest.map_structure(
        lambda whole, new: tf.gather_nd(tf.concat([tf.gather(whole, active), new], axis=1),
                                        pick),
        pool._replace(scores=()), finished._replace(scores=()))._replace(scores=scores)
    pool = tf.nest.map_structure(
        lambda whole, part: tf.tensor_scatter_nd_update(whole, active[:, None], part),
        pool, merged)
    return pool, merged


def _settled(setup: Setup, live_lp, merged: Pool, active):
    """Which active sentences need no more step: no live hypothesis left or, with
    ``early_stopping``, none that can still enter the N best finished ones returned.

    A live hypothesis with log-probability ``lp <= 0`` ends with some length
    ``L <= limit`` and a log-probability of at most ``lp`` (log-probabilities only
    decrease), so with ``alpha >= 0`` its final ranking score is at most
    ``lp / limit ** alpha``. Once the best live bound is no larger than the N-th best
    score in the pool, running on to the limit could not change the N best (up to exact
    ties); for a 1-best translation, usually a few steps after the first good hypothesis
    ends rather than after K have."""
    best_live = tf.reduce_max(live_lp, axis=1)
    settled = best_live <= ALIVE
    if setup.early_stopping:
        # The pool is sorted and empty slots come last: slot N-1 is the N-th best.
        full = tf.gather(merged.lengths, setup.returned - 1, axis=1) > 0
        bound = best_live / tf.gather(setup.limit_penalty, active)
        nth = tf.gather(merged.scores, setup.returned - 1, axis=1)
        settled = settled | (full & (bound <= nth))
    return settled


def _compacted(state: BeamState, k) -> BeamState:
    """``state`` without the sentences that stopped (their live hypotheses are dead): every
    later step costs what the ones still decoded need. The pool keeps the whole batch."""
    keep = tf.cast(tf.reshape(tf.where(tf.logical_not(state.done)), [-1]), tf.int32)
    keep_rows = rows_of(keep[:, None], tf.range(k)[None, :], k)

    def sentences(x):
        return tf.nest.map_structure(lambda y: tf.gather(y, keep), x)

    def rows(x):
        return tf.nest.map_structure(lambda y: tf.gather(y, keep_rows), x)

    return state._replace(
        active=sentences(state.active), done=sentences(state.done),
        previous_ids=rows(state.previous_ids), decoder=rows(state.decoder),
        memory=sentences(state.memory),
        live=Live(sentences(state.live.log_probs), rows(state.live.history)),
        matches=rows(state.matches))
