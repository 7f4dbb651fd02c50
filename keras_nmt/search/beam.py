"""Batched beam search over :class:`~keras_nmt.models.rnnsearch.TranslationModel` as one graph.

The whole search is a single ``tf.while_loop`` built from plain TensorFlow ops, so it
can be traced with autograph off (``keras.export.ExportArchive``) and converted to ONNX
by tf2onnx: the hypothesis history (token ids, attention weights) lives in loop
variables that grow by one column per step with ``tf.concat`` under declared
``shape_invariants``; no TensorArray, no Python control flow on tensors. The beam size,
length-normalisation exponent, UNK ban and maximum length may all be tensors fed at run
time.

The algorithm, per source sentence, with K = beam size:

- the source is encoded once; the decoder state is tiled K times, giving B*K rows, one
  per hypothesis, in the layout of :mod:`keras_nmt.layers.row_layout`. The encoder's
  memory keeps one row per sentence: the model's step reads each sentence's row for its
  K hypotheses (``Decoder.step``), so the memory is neither copied K times nor gathered
  K times when sentences stop;
- a hypothesis' score is the sum of the log-softmax of the step logits of its tokens.
  The search starts with one live hypothesis (the K-1 others dead, so copies of the
  same prefix never fill the beam). Dead and empty entries carry a large finite
  negative score rather than -inf: tf2onnx lowers ``tf.where`` to arithmetic, where
  ``0 * -inf`` would be NaN;
- each step keeps the K best one-token extensions of the live hypotheses. Extensions
  ending with EOS leave the beam (their slot is dead until the next step refills it)
  and join a pool of finished hypotheses that keeps the K best by the ranking score
  ``log_prob / length ** alpha`` (length counts the generated tokens, EOS included;
  ``alpha >= 0``, and ``alpha = 0`` ranks by raw log-probability). With K = 1 this is exactly greedy
  decoding;
- PAD and BOS are never generated; UNK neither when ``forbid_unk``;
- a sentence may generate at most ``limit`` tokens, EOS included: ``max_length`` when
  given (> 0), otherwise ``ceil(max_decode_ratio * source_length) + 1`` with the source
  length counted without padding (:func:`~keras_nmt.search.lengths.decode_limits`). At step ``limit`` only EOS is allowed, so every live
  hypothesis is forced to finish (EOS appended with its model probability).

Stopping is exact for what is returned: with N = min(nbest, K) hypotheses asked for, a
sentence stops when its pool holds N finished hypotheses and no live hypothesis can
still enter those N. A live hypothesis with log-probability ``lp <= 0`` ends with some
length ``L <= limit`` and a log-probability of at most ``lp`` (log-probabilities only
decrease), so with ``alpha >= 0`` its final ranking score is at most
``lp / limit ** alpha``. Once the best live bound is no larger than the N-th best score
in the pool, running on to ``limit`` could not change the N best (up to exact ties);
for a 1-best translation that is usually a few steps after the first good hypothesis
ends, rather than after K have. A sentence with no live hypothesis left, or at its
limit, stops too. The loop ends when every sentence of the batch has stopped; stopped
sentences are frozen (their live hypotheses are dead) while the others go on.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from keras_nmt.core.constants import BOS_ID, EOS_ID, PAD_ID
from keras_nmt.layers.row_layout import rows_of, tile_rows
from keras_nmt.search import constrained
from keras_nmt.search.prefix import after_prefix, forced_prefix
from keras_nmt.search.candidates import ALIVE, DEAD, row_candidates
from keras_nmt.search.lengths import decode_limits
from keras_nmt.search.shortlist import Shortlist, output_columns
from keras_nmt.search.top_k import take_along_rows


def _loose_shape(x, free_axes):
    """The static shape of ``x`` with the batch and growing axes left unknown."""
    dims = list(x.shape)
    for axis in free_axes:
        dims[axis] = None
    return tf.TensorShape(dims)


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
      model: a :class:`~keras_nmt.models.rnnsearch.TranslationModel` (anything with ``encode``
        and ``step``).
      source_ids: int [B, Tx], 0 = padding.
      beam_size: K >= 1, a Python int or a scalar int32 tensor.
      alpha: length-normalisation exponent >= 0 (scalar, may be a tensor; a negative
        tensor is clamped to 0); 0 = raw log-prob.
      forbid_unk: never generate UNK (Python or scalar bool tensor).
      max_length: generated tokens per sentence, EOS included (scalar; None or <= 0:
        the ``max_decode_ratio`` rule, see :func:`decode_limits`).
      nbest: hypotheses returned per sentence (a Python int), clipped to ``beam_size``.
      max_decode_ratio: see :func:`decode_limits` (scalar, may be a tensor).
      early_stopping: stop a sentence as soon as its result is settled (see the module
        docstring). False runs every sentence until no live hypothesis is left, which
        gives the same result more slowly; it exists to test that claim.
      shortlist: vocabulary selection (:class:`Shortlist`): every step scores only the
        batch's candidate words, and the softmax normalises over them. None: every word.
      compact: sentences that have stopped leave the batch (their rows are gathered out of
        the state, the history and the encoder's memory), so a step costs what the
        sentences still decoded need. False keeps them (frozen) to the end: the same
        result, and every step the same shapes, which XLA wants.
      attention: keep every hypothesis' attention weights, for the ``attention`` output.
        False leaves them out of the loop (a step then moves no [hypotheses, t, Tx]
        history around) and out of the result.
      constraints: phrases to include and avoid and a prefix per sentence, word ids
        (:class:`~keras_nmt.search.constrained.Constraints`; its module says how they
        are decoded). The ratio rule's limit then grows to fit each sentence's prefix
        and phrases; a ``max_length`` given is kept. None: the plain search, whose graph
        holds none of it.
      token_logprobs: keep each hypothesis' token log-probabilities, for the
        ``token_logprobs`` output (what a translation's confidence is computed from).
        False leaves them out of the loop and out of the result.

    Returns a dict with N = min(nbest, beam_size), hypotheses sorted by ``scores``:
      ``ids`` int32 [B, N, T]: tokens, EOS included, 0 after it;
      ``lengths`` int32 [B, N]: generated tokens including EOS;
      ``scores`` float32 [B, N]: ``log_probs / lengths ** alpha``, the ranking score;
      ``log_probs`` float32 [B, N]: summed log-probabilities;
      ``attention`` float32 [B, N, T, Tx]: the step's attention weights for each token
      (zeros after EOS, and everywhere for an encdec model); only with ``attention``;
      ``token_logprobs`` float32 [B, N, T]: each token's log-probability as the search
      scored it (EOS's last, zeros after it; they sum to ``log_probs``); only with
      ``token_logprobs``.
    With ``constraints``, also ``unmet`` int32 [B, N]: the phrases to include that the
    hypothesis lacks (0 unless its length limit came first); hypotheses that lack some
    rank after those that lack none.
    A slot that no hypothesis could fill (only possible when fewer than N sequences
    exist) has score -inf, length 0 and zero ids.
    """
    if isinstance(nbest, bool) or not isinstance(nbest, (int, np.integer)) or nbest < 1:
        raise ValueError(f"nbest must be a positive Python int, got {nbest!r}")
    if isinstance(beam_size, (int, np.integer)) and beam_size < 1:
        raise ValueError(f"beam_size must be >= 1, got {beam_size}")
    if isinstance(alpha, (int, float, np.number)) and not alpha >= 0:
        raise ValueError(f"alpha must be >= 0, got {alpha}")
    source_ids = tf.convert_to_tensor(source_ids)
    if source_ids.dtype != tf.int32:
        source_ids = tf.cast(source_ids, tf.int32)
    k = tf.maximum(tf.cast(beam_size, tf.int32), 1)
    alpha = tf.maximum(tf.cast(alpha, tf.float32), 0.0)
    forbid_unk = tf.cast(forbid_unk, tf.bool)
    batch = tf.shape(source_ids)[0]
    source_time = tf.shape(source_ids)[1]
    limits = decode_limits(source_ids, max_length, max_decode_ratio)  # [B]
    guided = constraints is not None
    if guided:
        constraints = constrained.Constraints.of(constraints.include, constraints.avoid,
                                           constraints.prefix)
        prefix_lengths = constrained.phrase_lengths(constraints.prefix)  # [B]
        # Counts, not reduce_any: ONNX's reductions of an empty tensor are not all defined.
        has_phrases = sum(tf.reduce_sum(tf.cast(tf.not_equal(x, PAD_ID), tf.int32))
                          for x in (constraints.include, constraints.avoid)) > 0
        needed = (prefix_lengths + tf.reduce_sum(constrained.phrase_lengths(constraints.include), 1)
                  + 1)
        ratio_rule = (tf.constant(True) if max_length is None
                      else tf.logical_not(tf.cast(max_length, tf.int32) > 0))
        limits = tf.where(ratio_rule, tf.maximum(limits, needed), limits)
    max_steps = tf.reduce_max(limits)
    limit_penalty = tf.pow(tf.cast(limits, tf.float32), alpha)  # [B]
    dead = tf.constant(DEAD, tf.float32)

    state, memory = model.encode(source_ids)
    columns = count = projection = None  # every word: the model's own output layer
    prefix_words = constraints.prefix if guided else None
    if shortlist is not None:
        # The output layer's rows of the batch's words, gathered once for every step. Not
        # without a shortlist: a batch of one sentence would copy the whole layer.
        columns, count = output_columns(source_ids, model.config.tgt_vocab_size, shortlist,
                                        constraints.words() if guided else None)
        projection = model.output_projection(columns, count)
        if guided:  # the search matches phrases on the columns it generates
            constraints = constrained.phrase_columns(constraints, columns)
    # Without ``attention`` the two histories are empty and pass through the loop unchanged.
    attention_time = source_time if attention else 0
    first_token = tf.fill([batch], BOS_ID)
    first_lp = tf.zeros([batch], tf.float32)
    if guided:  # the beam starts where the prefix, decoded once per sentence, ends
        prefix = forced_prefix(model, state, memory, projection, count, prefix_words,
                               constraints.prefix, limits, constraints, attention,
                               source_time)
        state, first_token, first_lp = prefix.state, prefix.last, prefix.log_prob
    state = tf.nest.map_structure(lambda x: tile_rows(x, k), state)

    returned = tf.minimum(tf.constant(nbest, tf.int32), k)  # N: hypotheses returned
    first_live = tf.where(tf.equal(tf.range(k), 0)[None, :], first_lp[:, None], dead)
    hypotheses = batch * k
    def search_loop(phrases: bool):
        """The beam's loop; with ``phrases``, the constrained search's candidates, banks
        and matches (module ``constrained``), else the plain search's steps (after a
        prefix, when ``guided``)."""
        # The live part of the search covers the A sentences still decoded ("active", their
        # numbers in the batch): A = B at the start, fewer as sentences stop when ``compact``.
        # The pool of finished hypotheses always covers the whole batch.
        loop_vars = (
            tf.constant(0, tf.int32),  # t: tokens generated so far
            tf.range(batch),  # active: the batch rows of the decoded sentences [A]
            tf.zeros([batch], tf.bool),  # done [A]
            tile_rows(first_token, k),  # previous ids [A*K]
            state,  # decoder state [A*K, n]
            memory,  # the encoder's memory for every sentence [A, ...]
            first_live,  # live log-probs [A, K]
            tf.zeros([hypotheses, 0], tf.int32),  # live ids [A*K, t]
            tf.zeros([hypotheses, 0, attention_time], tf.float32),  # live attention [A*K, t, Tx]
            tf.fill([batch, k], dead),  # pool scores [B, K], sorted
            tf.fill([batch, k], dead),  # pool log-probs [B, K]
            tf.zeros([batch, k], tf.int32),  # pool lengths [B, K]; 0 = empty slot
            tf.zeros([batch, k, 0], tf.int32),  # pool ids [B, K, t]
            tf.zeros([batch, k, 0, attention_time], tf.float32),  # pool attention [B, K, t, Tx]
            # With constraints: each live hypothesis' matches (MatchState) [A*K, ...] and the
            # pool's unmet phrases [B, K]; nothing otherwise.
            (tuple(tile_rows(x, k) for x in prefix.matches.as_tuple()),
             tf.zeros([batch, k], tf.int32)) if phrases else (),
            # With ``token_logprobs``: live [A*K, t] and pool [B, K, t] histories of the
            # tokens' log-probabilities; empty and passed through unchanged otherwise.
            tf.zeros([hypotheses, 0], tf.float32),
            tf.zeros([batch, k, 0], tf.float32),
        )
        shape_invariants = (
            tf.TensorShape([]),
            tf.TensorShape([None]),
            tf.TensorShape([None]),
            tf.TensorShape([None]),
            tf.nest.map_structure(lambda x: _loose_shape(x, [0]), state),
            tf.nest.map_structure(lambda x: _loose_shape(x, [0]), memory),
            tf.TensorShape([None, None]),
            tf.TensorShape([None, None]),
            tf.TensorShape([None, None, None]),
            tf.TensorShape([None, None]),
            tf.TensorShape([None, None]),
            tf.TensorShape([None, None]),
            tf.TensorShape([None, None, None]),
            tf.TensorShape([None, None, None, None]),
            ((tf.TensorShape([None, None, None]), tf.TensorShape([None, None, None]),
              tf.TensorShape([None, None])), tf.TensorShape([None, None])) if phrases else (),
            tf.TensorShape([None, None]),
            tf.TensorShape([None, None, None]),
        )

        def cond(t, active, done, *_):
            # A count, not reduce_all: with every sentence gone ``done`` is empty, and ONNX's
            # reductions of an empty tensor are not all defined.
            running = tf.reduce_sum(tf.cast(tf.logical_not(done), tf.int32))
            return tf.logical_and(t < max_steps, running > 0)

        def body(t, active, done, previous_ids, state, memory, live_lp, live_ids, live_attn,
                 pool_scores, pool_lp, pool_lengths, pool_ids, pool_attn, guided_vars,
                 live_tlp, pool_tlp):
            sentences = tf.shape(active)[0]  # A
            row_offsets = tf.range(sentences)[:, None]  # [A, 1]
            logits, new_state, weights = model.step(previous_ids, state, memory, projection)
            logits = tf.cast(logits, tf.float32)  # [A*K, C]
            length = t + 1  # tokens of the hypotheses made by this step
            # With a prefix, a sentence's hypotheses are as long as their prefix and more.
            made = length + tf.gather(prefix.length, active) if guided else length  # [A] or scalar
            forced = made >= tf.gather(limits, active)  # [A]: only EOS allowed at the limit
            made = made[:, None] if guided else made
            if phrases:
                matches, pool_unmet = guided_vars
                matches = constrained.MatchState(*matches)
                rules = constraints.gather(active).rows(k)  # [A*K, ...]
                forced_column = tf.where(tile_rows(forced, k), EOS_ID, -1)  # EOS at the limit
                row_lp, row_columns = constrained.guided_candidates(
                    logits, k, forced_column, tf.equal(constrained.unmet(matches), 0),
                    constrained.banned_tokens(matches, rules),
                    constrained.next_tokens(matches, rules), forbid_unk, count)  # [A*K, R + P]
                banks = constrained.progress_after(matches, rules, row_columns)
            else:
                row_lp, row_columns = row_candidates(
                    logits, k, tile_rows(forced, k), forbid_unk, count
                )  # [A*K, R]
            row_tokens = row_columns if columns is None else tf.gather(columns, row_columns)
            width = tf.shape(row_lp)[1]

            candidates = tf.reshape(tf.reshape(live_lp, [-1, 1]) + row_lp, [sentences, k * width])
            if phrases:  # a share of the beam for each count of constraint tokens covered
                top_lp, top_index = constrained.bank_select(
                    candidates, tf.reshape(banks, [sentences, k * width]), k)
            else:
                top_lp, top_index = tf.math.top_k(candidates, k=k)  # [A, K]
            top_lp = tf.maximum(top_lp, dead)  # dead stays exactly dead, never drifts lower
            tokens = take_along_rows(tf.reshape(row_tokens, [sentences, k * width]), top_index)
            parents = rows_of(row_offsets, top_index // width, k)  # [A*K]
            flat_tokens = tf.reshape(tokens, [-1])

            # One gather per tensor reorders the state and the history by parent.
            new_state = tf.nest.map_structure(lambda x: tf.gather(x, parents), new_state)
            seq_ids = tf.concat([tf.gather(live_ids, parents), flat_tokens[:, None]], axis=1)
            seq_attn = live_attn
            if attention:
                step_attn = tf.cast(weights, tf.float32)[:, None, :]
                seq_attn = tf.gather(tf.concat([live_attn, step_attn], axis=1), parents)
            seq_tlp = live_tlp
            if token_logprobs:  # the chosen candidates' own log-probabilities, not differences
                step_lp = take_along_rows(tf.reshape(row_lp, [sentences, k * width]), top_index)
                seq_tlp = tf.concat([tf.gather(live_tlp, parents), tf.reshape(step_lp, [-1, 1])],
                                    axis=1)

            ended = tf.equal(tokens, EOS_ID) & (top_lp > ALIVE)  # [A, K]
            ended_lp = tf.where(ended, top_lp, dead)
            ranking = top_lp / tf.pow(tf.cast(made, tf.float32), alpha)
            if phrases:
                chosen = take_along_rows(tf.reshape(row_columns, [sentences, k * width]),
                                         top_index)
                matches = constrained.advance(matches.gather(parents), rules,
                                              tf.reshape(chosen, [-1]))
                ended_unmet = tf.where(
                    ended, tf.reshape(constrained.unmet(matches), [sentences, k]), 0)
                ranking -= constrained.UNMET_PENALTY * tf.cast(ended_unmet, tf.float32)
            ended_scores = tf.where(ended, ranking, dead)
            ended_lengths = tf.where(ended, made, 0)
            live_lp = tf.where(tf.equal(tokens, EOS_ID), dead, top_lp)

            # Merge the new finished hypotheses into the active sentences' pools (pool first:
            # top_k keeps the lower index on ties, so a stopped sentence's pool stays as it
            # is), then write those pools back into the batch's.
            pool_ids = tf.pad(pool_ids, [[0, 0], [0, 0], [0, 1]])
            merged_scores = tf.concat([tf.gather(pool_scores, active), ended_scores], axis=1)
            active_scores, pick = tf.math.top_k(merged_scores, k=k)  # [A, K]
            pick = tf.stack([tf.broadcast_to(row_offsets, tf.shape(pick)), pick], axis=-1)
            seq_shape = tf.shape(seq_ids)
            active_ids = tf.gather_nd(tf.concat(
                [tf.gather(pool_ids, active), tf.reshape(seq_ids, [sentences, k, seq_shape[1]])],
                axis=1), pick)
            active_lp = tf.gather_nd(
                tf.concat([tf.gather(pool_lp, active), ended_lp], axis=1), pick)
            active_lengths = tf.gather_nd(
                tf.concat([tf.gather(pool_lengths, active), ended_lengths], axis=1), pick)
            rows = active[:, None]
            pool_scores = tf.tensor_scatter_nd_update(pool_scores, rows, active_scores)
            pool_lp = tf.tensor_scatter_nd_update(pool_lp, rows, active_lp)
            pool_lengths = tf.tensor_scatter_nd_update(pool_lengths, rows, active_lengths)
            pool_ids = tf.tensor_scatter_nd_update(pool_ids, rows, active_ids)
            if phrases:
                active_unmet = tf.gather_nd(
                    tf.concat([tf.gather(pool_unmet, active), ended_unmet], axis=1), pick)
                pool_unmet = tf.tensor_scatter_nd_update(pool_unmet, rows, active_unmet)
            if attention:
                pool_attn = tf.pad(pool_attn, [[0, 0], [0, 0], [0, 1], [0, 0]])
                active_attn = tf.gather_nd(tf.concat(
                    [tf.gather(pool_attn, active),
                     tf.reshape(seq_attn, [sentences, k, seq_shape[1], source_time])],
                    axis=1), pick)
                pool_attn = tf.tensor_scatter_nd_update(pool_attn, rows, active_attn)
            if token_logprobs:
                pool_tlp = tf.pad(pool_tlp, [[0, 0], [0, 0], [0, 1]])
                active_tlp = tf.gather_nd(tf.concat(
                    [tf.gather(pool_tlp, active),
                     tf.reshape(seq_tlp, [sentences, k, seq_shape[1]])],
                    axis=1), pick)
                pool_tlp = tf.tensor_scatter_nd_update(pool_tlp, rows, active_tlp)

            # Stop a sentence when no live hypothesis is left or, exactly, when none can
            # still enter the N best finished ones that are returned: log-probs only fall
            # and, with alpha >= 0, lp / L**alpha is largest at the longest length, the limit.
            best_live = tf.reduce_max(live_lp, axis=1)
            settled = best_live <= ALIVE
            if early_stopping:
                # The pool is sorted and empty slots come last: slot N-1 is the N-th best.
                full = tf.gather(active_lengths, returned - 1, axis=1) > 0
                bound = best_live / tf.gather(limit_penalty, active)
                nth = tf.gather(active_scores, returned - 1, axis=1)
                settled = settled | (full & (bound <= nth))
            done = done | forced | settled
            live_lp = tf.where(done[:, None], dead, live_lp)
            if compact:
                # Sentences that stopped leave: every later step costs what the ones still
                # decoded need, not what the batch's longest one does.
                keep = tf.cast(tf.reshape(tf.where(tf.logical_not(done)), [-1]), tf.int32)
                keep_rows = rows_of(keep[:, None], tf.range(k)[None, :], k)
                active, done, live_lp = (tf.gather(x, keep) for x in (active, done, live_lp))
                flat_tokens, seq_ids = (tf.gather(x, keep_rows) for x in (flat_tokens, seq_ids))
                if attention:
                    seq_attn = tf.gather(seq_attn, keep_rows)
                if token_logprobs:
                    seq_tlp = tf.gather(seq_tlp, keep_rows)
                new_state = tf.nest.map_structure(lambda x: tf.gather(x, keep_rows), new_state)
                memory = tf.nest.map_structure(lambda x: tf.gather(x, keep), memory)
                if phrases:
                    matches = matches.gather(keep_rows)
            if phrases:
                guided_vars = (matches.as_tuple(), pool_unmet)
            return (length, active, done, flat_tokens, new_state, memory, live_lp, seq_ids,
                    seq_attn, pool_scores, pool_lp, pool_lengths, pool_ids, pool_attn,
                    guided_vars, seq_tlp, pool_tlp)

        final = tf.while_loop(cond, body, loop_vars, shape_invariants=shape_invariants)
        # The pool's unmet phrases [B, K] (zeros without phrases) in place of the guided vars.
        unmet = final[14][1] if phrases else tf.zeros([batch, k], tf.int32)
        return final[:14] + (unmet,) + final[15:]


    if guided:
        # A batch with a prefix but no phrase to include or avoid (what a user typing on
        # the page asks) takes the plain search's steps after its prefix: the same
        # hypotheses, without the banks' and matches' work at every step.
        final = tf.cond(has_phrases, lambda: search_loop(True), lambda: search_loop(False))
    else:
        final = search_loop(False)
    pool_scores, pool_lp, pool_lengths, pool_ids, pool_attn = final[9:14]

    lengths = pool_lengths[:, :returned]
    valid = lengths > 0
    # Empty slots: -inf. Added, not selected: tf2onnx lowers a select to
    # cond * x + (1 - cond) * y, which would turn 0 * -inf into NaN.
    empty = tf.math.log(tf.cast(valid, tf.float32))  # 0 or -inf
    out_time = tf.maximum(tf.reduce_max(lengths), 0)
    histories = [pool_ids[:, :returned], final[16][:, :returned],
                 pool_attn[:, :returned] if attention else None]
    if guided:  # the prefix, then what the beam made after it
        histories = [None if h is None else after_prefix(p, h, prefix.length, lengths, out_time)
                     for p, h in zip((prefix.ids, prefix.token_logprobs, prefix.attention),
                                     histories)]
    ids = tf.where(valid[:, :, None], histories[0][:, :, :out_time], 0)
    result = {
        "ids": ids,
        "lengths": lengths,
        "scores": tf.where(valid, pool_scores[:, :returned], 0.0) + empty,
        "log_probs": tf.where(valid, pool_lp[:, :returned], 0.0) + empty,
    }
    if guided:
        # The true ranking score, without the penalty that ordered the pool.
        true_scores = pool_lp[:, :returned] / tf.pow(
            tf.cast(tf.maximum(lengths, 1), tf.float32), alpha)
        result["scores"] = tf.where(valid, true_scores, 0.0) + empty
        result["unmet"] = tf.where(valid, final[14][:, :returned], 0)
    if attention:
        result["attention"] = tf.where(valid[:, :, None, None], histories[2][:, :, :out_time, :],
                                       tf.constant(0.0, tf.float32))
    if token_logprobs:
        result["token_logprobs"] = tf.where(
            valid[:, :, None], histories[1][:, :, :out_time], tf.constant(0.0, tf.float32))
    return result


def greedy_search(model, source_ids, **kwargs) -> dict[str, tf.Tensor]:
    """:func:`beam_search` with a beam of one: the most probable token at every step."""
    kwargs.pop("beam_size", None)
    kwargs["nbest"] = 1
    return beam_search(model, source_ids, 1, **kwargs)
