"""Batched beam search over :class:`~keras_nmt.models.TranslationModel` as one graph.

The whole search is a single ``tf.while_loop`` built from plain TensorFlow ops, so it
can be traced with autograph off (``keras.export.ExportArchive``) and converted to ONNX
by tf2onnx: the hypothesis history (token ids, attention weights) lives in loop
variables that grow by one column per step with ``tf.concat`` under declared
``shape_invariants``; no TensorArray, no Python control flow on tensors. The beam size,
length-normalisation exponent, UNK ban and maximum length may all be tensors fed at run
time.

The algorithm, per source sentence, with K = beam size:

- the source is encoded once; the decoder state is tiled K times, giving B*K rows, one
  per hypothesis. The encoder's memory keeps one row per sentence: the model's step
  reads each sentence's row for its K hypotheses (``Decoder.step``), so the memory is
  neither copied K times nor gathered K times when sentences stop;
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
  length counted without padding. At step ``limit`` only EOS is allowed, so every live
  hypothesis is forced to finish (EOS appended with its model probability).

Vocabulary selection (a :class:`Shortlist`) scores each batch on its candidate words only:
the output layer's rows for them are gathered once per batch (:func:`output_columns`), the
softmax normalises over them, and the chosen columns map back to word ids. Without one,
every step uses the model's whole output layer.

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

import dataclasses
import math
from typing import Any

import numpy as np
import tensorflow as tf

from keras_nmt.constants import BOS_ID, EOS_ID, PAD_ID, RESERVED, UNK_ID
from keras_nmt.layers.beam_rows import tile_rows

# Log-probability of a dead or empty hypothesis. Finite on purpose: tf2onnx lowers
# tf.where to arithmetic (cond * x + (1 - cond) * y), where -inf would give NaN.
_DEAD = -1e9
_ALIVE = -5e8  # anything above this is a real hypothesis

__all__ = [
    "Shortlist",
    "beam_search",
    "decode_limits",
    "greedy_search",
    "make_translate_fn",
    "output_columns",
]


def decode_limits(source_ids, max_length=None, max_decode_ratio: float = 2.0):
    """Maximum number of generated tokens (EOS included) per sentence: int32 [B], >= 1.

    ``max_length`` (a scalar, Python or tensor) overrides the ratio rule when it is
    positive; ``None`` or a value <= 0 means ``ceil(max_decode_ratio * source_length) + 1``.
    """
    source_ids = tf.convert_to_tensor(source_ids)
    source_length = tf.reduce_sum(tf.cast(tf.not_equal(source_ids, PAD_ID), tf.float32), axis=1)
    ratio = tf.cast(max_decode_ratio, tf.float32)
    limits = tf.cast(tf.math.ceil(ratio * source_length), tf.int32) + 1
    if max_length is not None:
        max_length = tf.cast(max_length, tf.int32)
        limits = tf.where(max_length > 0, tf.fill(tf.shape(limits), max_length), limits)
    return tf.maximum(limits, 1)


def _loose_shape(x, free_axes):
    """The static shape of ``x`` with the batch and growing axes left unknown."""
    dims = list(x.shape)
    for axis in free_axes:
        dims[axis] = None
    return tf.TensorShape(dims)


def _take_along_rows(x, index):
    """``x[r, index[r, j]]`` for every row r: [R, W] and int [R, J] -> [R, J]. One gather
    on the flattened tensor, the plain form the ONNX conversion is tested with."""
    rows, width = tf.shape(x)[0], tf.shape(x)[1]
    return tf.gather(tf.reshape(x, [-1]), index + tf.range(rows)[:, None] * width)


# Words per block of the two-stage top-k (_top_k_over_vocabulary). A shortlist's output
# columns come in whole blocks (output_columns), so its steps never pad their logits.
_BLOCK = 128


@dataclasses.dataclass(frozen=True)
class Shortlist:
    """Vocabulary selection (Jean et al., 2015; Marian's ``--shortlist``): each batch is
    scored on the ``frequent`` most frequent target words, the ``best`` most probable
    translations of every source word in the batch (rows of ``table``, a lexical table
    p(t | s) of :mod:`keras_nmt.lexicon`: int32 [source vocabulary, >= best], PAD-padded)
    and the reserved ids (EOS; UNK unless the search forbids it). ``frequent`` and
    ``best`` may be scalar tensors (signature inputs); both <= 0 turns selection off
    (every word). Vocabulary ids are sorted by training frequency, so the most frequent
    words are the ids right after the reserved ones."""

    table: Any
    frequent: Any
    best: Any


def output_columns(source_ids, vocab_size: int, shortlist: Shortlist | None = None):
    """The target words a batch is scored on: (``columns`` int32 [C], ``count`` int32 []).

    ``columns`` holds ``count`` word ids in ascending order (the reserved ids first, at
    their own positions: column i is word i for i < 4), then PAD up to a whole number of
    blocks of 128; the model masks those padding columns out
    (:meth:`~keras_nmt.models.TranslationModel.output_projection`). Without a shortlist,
    or with it turned off, every word of the vocabulary."""
    words = tf.range(vocab_size, dtype=tf.int32)
    if shortlist is None:
        chosen = words
    else:
        table = tf.convert_to_tensor(shortlist.table, tf.int32)
        frequent = tf.cast(shortlist.frequent, tf.int32)
        best = tf.clip_by_value(tf.cast(shortlist.best, tf.int32), 0, tf.shape(table)[1])
        translations = tf.reshape(tf.gather(table[:, :best], source_ids), [-1, 1])
        hits = tf.scatter_nd(translations, tf.ones(tf.shape(translations)[:1], tf.float32),
                             [vocab_size])
        off = (frequent <= 0) & (best <= 0)
        keep = (hits > 0) | (words < len(RESERVED) + frequent) | off
        chosen = tf.cast(tf.reshape(tf.where(keep), [-1]), tf.int32)
    count = tf.shape(chosen)[0]
    padded = (count + _BLOCK - 1) // _BLOCK * _BLOCK
    return tf.pad(chosen, [[0, padded - count]], constant_values=PAD_ID), count


def _top_k_over_vocabulary(logits, k, whole_blocks: bool = False):
    """tf.math.top_k(logits, k) for rows of many words, in two stages.

    TensorFlow's CPU top-k over a 30,000-word row costs about ten times a pass over it.
    So each row is cut into blocks of 128 words (the last one padded, unless the rows
    come in ``whole_blocks``, as a shortlist's do: :func:`output_columns`), the k blocks
    with the highest maxima are kept (a word among the k best is in one of them: k
    other blocks would otherwise each hold a larger word), and the top k of their
    k * 128 words is taken. The kept blocks are put back in word order first, so ties
    go to the lower word id, as tf.math.top_k breaks them.
    """
    if not whole_blocks:
        width = tf.shape(logits)[1]
        logits = tf.pad(logits, [[0, 0], [0, (_BLOCK - width % _BLOCK) % _BLOCK]],
                        constant_values=logits.dtype.min)
    rows, blocks = tf.shape(logits)[0], tf.shape(logits)[1] // _BLOCK
    maxima = tf.reduce_max(tf.reshape(logits, [rows, blocks, _BLOCK]), axis=2)
    _, kept = tf.math.top_k(maxima, k=tf.minimum(k, blocks))
    # Sorted as floats: block numbers are small integers, and ONNX's TopK takes floats.
    kept = tf.cast(-tf.math.top_k(-tf.cast(kept, tf.float32), k=tf.shape(kept)[1])[0], tf.int32)
    # The kept blocks are copied whole, as rows of 128 logits: gathering their words one
    # by one cost onnxruntime 13% of a selecting beam search's time.
    block_rows = tf.reshape(kept + tf.range(rows)[:, None] * blocks, [-1])
    gathered = tf.reshape(tf.gather(tf.reshape(logits, [rows * blocks, _BLOCK]), block_rows),
                          [rows, -1])
    values, position = tf.math.top_k(gathered, k=k)
    words = _take_along_rows(kept, position // _BLOCK) * _BLOCK + position % _BLOCK
    return values, words


def _row_candidates(logits, k, forced, forbid_unk, count=None):
    """The best extensions of every hypothesis: (log-probs, columns), each [B*K, R] with
    R = min(K, C), best first. ``logits`` [B*K, C] are over the whole vocabulary (column
    = word), or with ``count`` over the output columns of :func:`output_columns`, whole
    blocks of which the first ``count`` are words (column i < 4 is reserved word i).

    The K best extensions of a sentence are among the K best of each of its rows, and
    within a row log-softmax keeps the order of the logits. So the vocabulary-wide work
    is one top-k over the raw logits (its first value is the row's maximum) and the
    row's log-sum-exp; the log-softmax, the ban and the sum with the beam scores run on
    K + 3 columns, not on [B*K, V]. The normaliser covers every word, banned ones
    included, exactly as ``log_softmax`` followed by a ban would. Rows at their limit
    (``forced``) get EOS with its model log-probability and nothing else.
    """
    whole_blocks = count is not None
    if count is None:
        count = tf.shape(logits)[1]
    # Three more than K, so that K remain after dropping PAD, BOS and UNK.
    wide = tf.minimum(k + 3, count)
    narrow = tf.minimum(k, count)
    top_logits, top_tokens = _top_k_over_vocabulary(logits, wide, whole_blocks)
    peak = top_logits[:, :1]  # the row's maximum, log_softmax's shift, without another pass
    log_norm = tf.math.log(tf.reduce_sum(tf.exp(logits - peak), axis=1, keepdims=True))
    lp = (top_logits - peak) - log_norm
    banned = (
        tf.equal(top_tokens, PAD_ID)
        | tf.equal(top_tokens, BOS_ID)
        | (forbid_unk & tf.equal(top_tokens, UNK_ID))
        | (top_tokens >= count)  # a padding column
    )
    lp, order = tf.math.top_k(tf.where(banned, _DEAD, lp), k=narrow)
    tokens = _take_along_rows(top_tokens, order)
    eos_lp = (logits[:, EOS_ID : EOS_ID + 1] - peak) - log_norm  # [B*K, 1]
    first = tf.equal(tf.range(narrow), 0)[None, :]
    forced = forced[:, None]
    lp = tf.where(forced, tf.where(first, eos_lp, _DEAD), lp)
    tokens = tf.where(forced, tf.where(first, EOS_ID, PAD_ID), tokens)
    return lp, tokens


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
) -> dict[str, tf.Tensor]:
    """Translate a batch of source sentences with beam search.

    Args:
      model: a :class:`~keras_nmt.models.TranslationModel` (anything with ``encode``
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

    Returns a dict with N = min(nbest, beam_size), hypotheses sorted by ``scores``:
      ``ids`` int32 [B, N, T]: tokens, EOS included, 0 after it;
      ``lengths`` int32 [B, N]: generated tokens including EOS;
      ``scores`` float32 [B, N]: ``log_probs / lengths ** alpha``, the ranking score;
      ``log_probs`` float32 [B, N]: summed log-probabilities;
      ``attention`` float32 [B, N, T, Tx]: the step's attention weights for each token
      (zeros after EOS, and everywhere for an encdec model); only with ``attention``.
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
    max_steps = tf.reduce_max(limits)
    limit_penalty = tf.pow(tf.cast(limits, tf.float32), alpha)  # [B]
    dead = tf.constant(_DEAD, tf.float32)

    state, memory = model.encode(source_ids)
    columns = count = projection = None  # every word: the model's own output layer
    if shortlist is not None:
        # The output layer's rows of the batch's words, gathered once for every step. Not
        # without a shortlist: a batch of one sentence would copy the whole layer.
        columns, count = output_columns(source_ids, model.config.tgt_vocab_size, shortlist)
        projection = model.output_projection(columns, count)
    state = tf.nest.map_structure(lambda x: tile_rows(x, k), state)

    returned = tf.minimum(tf.constant(nbest, tf.int32), k)  # N: hypotheses returned
    first_live = tf.where(tf.equal(tf.range(k), 0), 0.0, dead)
    hypotheses = batch * k
    # Without ``attention`` the two histories are empty and pass through the loop unchanged.
    attention_time = source_time if attention else 0
    # The live part of the search covers the A sentences still decoded ("active", their
    # numbers in the batch): A = B at the start, fewer as sentences stop when ``compact``.
    # The pool of finished hypotheses always covers the whole batch.
    loop_vars = (
        tf.constant(0, tf.int32),  # t: tokens generated so far
        tf.range(batch),  # active: the batch rows of the decoded sentences [A]
        tf.zeros([batch], tf.bool),  # done [A]
        tf.fill([hypotheses], BOS_ID),  # previous ids [A*K]
        state,  # decoder state [A*K, n]
        memory,  # the encoder's memory for every sentence [A, ...]
        tf.tile(first_live[None, :], [batch, 1]),  # live log-probs [A, K]
        tf.zeros([hypotheses, 0], tf.int32),  # live ids [A*K, t]
        tf.zeros([hypotheses, 0, attention_time], tf.float32),  # live attention [A*K, t, Tx]
        tf.fill([batch, k], dead),  # pool scores [B, K], sorted
        tf.fill([batch, k], dead),  # pool log-probs [B, K]
        tf.zeros([batch, k], tf.int32),  # pool lengths [B, K]; 0 = empty slot
        tf.zeros([batch, k, 0], tf.int32),  # pool ids [B, K, t]
        tf.zeros([batch, k, 0, attention_time], tf.float32),  # pool attention [B, K, t, Tx]
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
    )

    def cond(t, active, done, *_):
        # A count, not reduce_all: with every sentence gone ``done`` is empty, and ONNX's
        # reductions of an empty tensor are not all defined.
        running = tf.reduce_sum(tf.cast(tf.logical_not(done), tf.int32))
        return tf.logical_and(t < max_steps, running > 0)

    def body(t, active, done, previous_ids, state, memory, live_lp, live_ids, live_attn,
             pool_scores, pool_lp, pool_lengths, pool_ids, pool_attn):
        sentences = tf.shape(active)[0]  # A
        row_offsets = tf.range(sentences)[:, None]  # [A, 1]
        logits, new_state, weights = model.step(previous_ids, state, memory, projection)
        logits = tf.cast(logits, tf.float32)  # [A*K, C]
        length = t + 1  # tokens of the hypotheses made by this step
        forced = length >= tf.gather(limits, active)  # [A]: only EOS allowed at the limit
        row_lp, row_columns = _row_candidates(
            logits, k, tile_rows(forced, k), forbid_unk, count
        )  # [A*K, R]
        row_tokens = row_columns if columns is None else tf.gather(columns, row_columns)
        width = tf.shape(row_lp)[1]

        candidates = tf.reshape(tf.reshape(live_lp, [-1, 1]) + row_lp, [sentences, k * width])
        top_lp, top_index = tf.math.top_k(candidates, k=k)  # [A, K]
        top_lp = tf.maximum(top_lp, dead)  # dead stays exactly dead, never drifts lower
        tokens = _take_along_rows(tf.reshape(row_tokens, [sentences, k * width]), top_index)
        parents = tf.reshape(top_index // width + row_offsets * k, [-1])  # [A*K]
        flat_tokens = tf.reshape(tokens, [-1])

        # One gather per tensor reorders the state and the history by parent.
        new_state = tf.nest.map_structure(lambda x: tf.gather(x, parents), new_state)
        seq_ids = tf.concat([tf.gather(live_ids, parents), flat_tokens[:, None]], axis=1)
        seq_attn = live_attn
        if attention:
            step_attn = tf.cast(weights, tf.float32)[:, None, :]
            seq_attn = tf.gather(tf.concat([live_attn, step_attn], axis=1), parents)

        ended = tf.equal(tokens, EOS_ID) & (top_lp > _ALIVE)  # [A, K]
        ended_lp = tf.where(ended, top_lp, dead)
        ended_scores = tf.where(
            ended, top_lp / tf.pow(tf.cast(length, tf.float32), alpha), dead
        )
        ended_lengths = tf.where(ended, length, 0)
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
        active_lp = tf.gather_nd(tf.concat([tf.gather(pool_lp, active), ended_lp], axis=1), pick)
        active_lengths = tf.gather_nd(
            tf.concat([tf.gather(pool_lengths, active), ended_lengths], axis=1), pick)
        rows = active[:, None]
        pool_scores = tf.tensor_scatter_nd_update(pool_scores, rows, active_scores)
        pool_lp = tf.tensor_scatter_nd_update(pool_lp, rows, active_lp)
        pool_lengths = tf.tensor_scatter_nd_update(pool_lengths, rows, active_lengths)
        pool_ids = tf.tensor_scatter_nd_update(pool_ids, rows, active_ids)
        if attention:
            pool_attn = tf.pad(pool_attn, [[0, 0], [0, 0], [0, 1], [0, 0]])
            active_attn = tf.gather_nd(tf.concat(
                [tf.gather(pool_attn, active),
                 tf.reshape(seq_attn, [sentences, k, seq_shape[1], source_time])], axis=1), pick)
            pool_attn = tf.tensor_scatter_nd_update(pool_attn, rows, active_attn)

        # Stop a sentence when no live hypothesis is left or, exactly, when none can
        # still enter the N best finished ones that are returned: log-probs only fall
        # and, with alpha >= 0, lp / L**alpha is largest at the longest length, the limit.
        best_live = tf.reduce_max(live_lp, axis=1)
        settled = best_live <= _ALIVE
        if early_stopping:
            # The pool is sorted and empty slots come last: slot N-1 is the N-th best.
            full = tf.gather(active_lengths, returned - 1, axis=1) > 0
            bound = best_live / tf.gather(limit_penalty, active)
            settled = settled | (full & (bound <= tf.gather(active_scores, returned - 1, axis=1)))
        done = done | forced | settled
        live_lp = tf.where(done[:, None], dead, live_lp)
        if compact:
            # Sentences that stopped leave: every later step costs what the ones still
            # decoded need, not what the batch's longest one does.
            keep = tf.cast(tf.reshape(tf.where(tf.logical_not(done)), [-1]), tf.int32)
            keep_rows = tf.reshape(keep[:, None] * k + tf.range(k)[None, :], [-1])
            active, done, live_lp = (tf.gather(x, keep) for x in (active, done, live_lp))
            flat_tokens, seq_ids = (tf.gather(x, keep_rows) for x in (flat_tokens, seq_ids))
            if attention:
                seq_attn = tf.gather(seq_attn, keep_rows)
            new_state = tf.nest.map_structure(lambda x: tf.gather(x, keep_rows), new_state)
            memory = tf.nest.map_structure(lambda x: tf.gather(x, keep), memory)
        return (length, active, done, flat_tokens, new_state, memory, live_lp, seq_ids,
                seq_attn, pool_scores, pool_lp, pool_lengths, pool_ids, pool_attn)

    final = tf.while_loop(cond, body, loop_vars, shape_invariants=shape_invariants)
    pool_scores, pool_lp, pool_lengths, pool_ids, pool_attn = final[9:]

    lengths = pool_lengths[:, :returned]
    valid = lengths > 0
    # Empty slots: -inf. Added, not selected: tf2onnx lowers a select to
    # cond * x + (1 - cond) * y, which would turn 0 * -inf into NaN.
    empty = tf.math.log(tf.cast(valid, tf.float32))  # 0 or -inf
    out_time = tf.maximum(tf.reduce_max(lengths), 0)
    ids = tf.where(valid[:, :, None], pool_ids[:, :returned, :out_time], 0)
    result = {
        "ids": ids,
        "lengths": lengths,
        "scores": tf.where(valid, pool_scores[:, :returned], 0.0) + empty,
        "log_probs": tf.where(valid, pool_lp[:, :returned], 0.0) + empty,
    }
    if attention:
        result["attention"] = tf.where(valid[:, :, None, None], pool_attn[:, :returned, :out_time, :],
                                       tf.constant(0.0, tf.float32))
    return result


def greedy_search(model, source_ids, **kwargs) -> dict[str, tf.Tensor]:
    """:func:`beam_search` with a beam of one: the most probable token at every step."""
    kwargs.pop("beam_size", None)
    kwargs["nbest"] = 1
    return beam_search(model, source_ids, 1, **kwargs)


def make_translate_fn(
    model, nbest: int = 1, max_decode_ratio: float | None = None, autograph: bool = True,
    jit_compile: bool = False, lexicon_table: np.ndarray | None = None, attention: bool = True,
):
    """A ``tf.function`` around :func:`beam_search` that traces once.

    Signature: ``translate(source_ids int32 [None, None], beam_size int32 [],
    alpha float32 [], forbid_unk bool [], max_length int32 [])`` -> the dict of
    :func:`beam_search`; ``max_length <= 0`` selects the ratio rule (the model's
    ``config.max_decode_ratio`` unless ``max_decode_ratio`` is given). ``nbest`` is
    fixed here, as a Python constant.

    ``lexicon_table`` (int32 [source vocabulary, best], a :class:`~keras_nmt.lexicon.Lexicon`'s
    ``targets``) becomes a constant of the graph and the signature gains two inputs,
    ``shortlist_frequent`` and ``shortlist_best`` (int32 []), the :class:`Shortlist` of
    every call: both <= 0 decodes over the whole vocabulary.

    ``attention``: the result holds the ``attention`` output (:func:`beam_search`);
    without it a step does less.

    ``jit_compile`` compiles the model's ``encode`` and ``step`` with XLA: the decoder
    step (GRU, attention, deep output over the vocabulary) is where decoding spends its
    time. The loop itself stays a TF while loop, since its history grows by one column
    a step and XLA needs loop variables of fixed shape. XLA compiles once per distinct
    input shape.
    """
    if jit_compile:
        model = _XlaSteps(model)
    ratio = float(model.config.max_decode_ratio if max_decode_ratio is None else max_decode_ratio)
    if math.isnan(ratio) or ratio < 0:
        raise ValueError(f"max_decode_ratio must be >= 0, got {ratio}")
    signature: list[Any] = [
        tf.TensorSpec([None, None], tf.int32, name="source_ids"),
        tf.TensorSpec([], tf.int32, name="beam_size"),
        tf.TensorSpec([], tf.float32, name="alpha"),
        tf.TensorSpec([], tf.bool, name="forbid_unk"),
        tf.TensorSpec([], tf.int32, name="max_length"),
    ]

    def translate(source_ids, beam_size, alpha, forbid_unk, max_length, *selection):
        shortlist = None
        if selection:
            # Built in the traced function, so the table is a constant of the graph
            # (a SavedModel and an ONNX model carry it) rather than a captured tensor.
            shortlist = Shortlist(tf.constant(lexicon_table, tf.int32), *selection)
        return beam_search(
            model,
            source_ids,
            beam_size,
            alpha=alpha,
            forbid_unk=forbid_unk,
            max_length=max_length,
            nbest=nbest,
            max_decode_ratio=ratio,
            shortlist=shortlist,
            compact=not jit_compile,  # XLA compiles once per shape: keep the batch whole
            attention=attention,
        )

    if lexicon_table is not None:
        lexicon_table = np.asarray(lexicon_table, np.int32)
        signature += [tf.TensorSpec([], tf.int32, name="shortlist_frequent"),
                      tf.TensorSpec([], tf.int32, name="shortlist_best")]
    return tf.function(translate, input_signature=signature, autograph=autograph)


class _XlaSteps:
    """A model whose ``encode`` and ``step`` run XLA-compiled (see make_translate_fn)."""

    def __init__(self, model):
        self.config = model.config
        self.encode = tf.function(model.encode, jit_compile=True, autograph=False)
        self.step = tf.function(model.step, jit_compile=True, autograph=False)
        self.output_projection = model.output_projection
