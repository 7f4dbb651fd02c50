"""Tests of keras_nmt.search: batched beam search as one tf.while_loop graph.

Models are tiny and random. Their initial weights (std 0.01) give near-uniform
next-word distributions, so every weight is redrawn with a fan-in scaled normal: the
distributions become peaked and depend on the context, which is what a search needs
to be tested against.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import tensorflow as tf

from keras_nmt import search
from keras_nmt.core.constants import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from keras_nmt.lexicon.table import RARE_MARK
from keras_nmt.search.candidates import ALIVE, DEAD, row_candidates
from keras_nmt.search.top_k import BLOCK, top_k_over_vocabulary

from support import SOURCES, build_model


@pytest.fixture(scope="module")
def search_model():
    return build_model("search50", seed=1)


@pytest.fixture(scope="module")
def encdec_model():
    return build_model("encdec50", seed=2, gain=1.5)


_FNS: dict = {}


def translate_fn(model, nbest: int = 3):
    """One traced translate function per (model, nbest), shared by the tests."""
    key = (id(model), nbest)
    if key not in _FNS:
        _FNS[key] = search.make_translate_fn(model, nbest=nbest)
    return _FNS[key]


def translate(model, source, beam, alpha=1.0, forbid_unk=False, max_length=0, nbest=3):
    out = translate_fn(model, nbest)(
        tf.constant(source, tf.int32),
        tf.constant(beam, tf.int32),
        tf.constant(alpha, tf.float32),
        tf.constant(forbid_unk),
        tf.constant(max_length, tf.int32),
    )
    return {key: value.numpy() for key, value in out.items()}


def hypothesis(out, b, n):
    return out["ids"][b, n, : out["lengths"][b, n]].tolist()


# 1. Beam 1 is greedy decoding.


def stepwise_greedy(
    model, source_ids, max_length=None, forbid_unk: bool = False, max_decode_ratio: float = 2.0
) -> list[list[int]]:
    """Reference greedy decoder: a plain eager Python loop over ``model.step``.

    At each step the argmax of the logits over the allowed tokens (never PAD or BOS,
    not UNK when ``forbid_unk``); EOS is forced at the sentence's limit, the same limit
    :func:`keras_nmt.search.beam_search` uses. Returns one list of ids per sentence, EOS
    included.
    The reference the compiled search is checked against, not for speed.
    """
    source_ids = tf.convert_to_tensor(source_ids, tf.int32)
    limits = search.decode_limits(source_ids, max_length, max_decode_ratio).numpy()
    state, memory = model.encode(source_ids)
    batch = int(source_ids.shape[0])
    previous = np.full([batch], BOS_ID, np.int32)
    outputs: list[list[int]] = [[] for _ in range(batch)]
    finished = np.zeros([batch], bool)
    banned = [PAD_ID, BOS_ID] + ([UNK_ID] if forbid_unk else [])
    for t in range(int(limits.max()) if batch else 0):
        logits, state, _ = model.step(tf.constant(previous), state, memory)
        logits = np.array(logits, np.float64)
        logits[:, banned] = -np.inf
        for b in range(batch):
            if finished[b]:
                continue
            token = EOS_ID if t + 1 >= limits[b] else int(np.argmax(logits[b]))
            outputs[b].append(token)
            previous[b] = token
            finished[b] = token == EOS_ID
        if finished.all():
            break
    return outputs


@pytest.mark.parametrize("arch", ["search", "encdec"])
def test_beam_one_is_stepwise_greedy(arch, search_model, encdec_model):
    model = search_model if arch == "search" else encdec_model
    for forbid_unk in (False, True):
        expected = stepwise_greedy(model, tf.constant(SOURCES), forbid_unk=forbid_unk)
        for alpha in (0.0, 1.0):
            out = translate(model, SOURCES, 1, alpha=alpha, forbid_unk=forbid_unk)
            assert out["ids"].shape[1] == 1
            assert [hypothesis(out, b, 0) for b in range(len(SOURCES))] == expected
    # The eager path (no tf.function) and greedy_search agree as well.
    eager = search.greedy_search(model, tf.constant(SOURCES))
    got = [eager["ids"][b, 0, : eager["lengths"][b, 0]].numpy().tolist() for b in range(len(SOURCES))]
    assert got == stepwise_greedy(model, tf.constant(SOURCES))


# 2. Brute force over every sequence a tiny vocabulary allows.
#
# tgt_vocab_size=8 (the smallest a Config allows): PAD, UNK, BOS, EOS and 4 words.
# With forbid_unk the search chooses among 5 tokens (EOS + 4 words), without it among
# 6. max_length=4 means at most 4 generated tokens, EOS included, the 4th forced to be
# EOS: the candidates are every sequence of 0..3 words followed by EOS.
MAX_LENGTH = 4


def brute_force(model, source, forbid_unk, alpha, candidates=None):
    """All candidate sequences with their (normalised score, log-prob), best first,
    each scored by an eager loop over model.step. ``candidates``: the words a
    vocabulary selection keeps (the softmax normalised over them and the reserved ids)."""
    words = ([UNK_ID] if not forbid_unk else []) + list(range(EOS_ID + 1, model.config.tgt_vocab_size))
    if candidates is not None:
        words = [w for w in words if w == UNK_ID or w in candidates]
        dropped = [w for w in range(model.config.tgt_vocab_size)
                   if w > EOS_ID and w not in candidates]
    seqs = [
        prefix + (EOS_ID,)
        for length in range(MAX_LENGTH)
        for prefix in itertools.product(words, repeat=length)
    ]
    n = len(seqs)
    ids = np.zeros([n, MAX_LENGTH], np.int32)
    lengths = np.array([len(s) for s in seqs])
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = s
    state, memory = model.encode(tf.constant([source] * n, tf.int32))
    previous = np.full([n], BOS_ID, np.int32)
    total = np.zeros([n])
    for t in range(MAX_LENGTH):
        logits, state, _ = model.step(tf.constant(previous), state, memory)
        logits = logits.numpy().astype(np.float64)
        if candidates is not None:
            logits[:, dropped] = -np.inf
        shifted = logits - logits.max(1, keepdims=True)
        log_probs = shifted - np.log(np.exp(shifted).sum(1, keepdims=True))
        active = t < lengths
        total += np.where(active, log_probs[np.arange(n), ids[:, t]], 0.0)
        previous = np.where(active, ids[:, t], EOS_ID).astype(np.int32)
    scores = total / lengths.astype(np.float64) ** alpha
    order = np.argsort(-scores, kind="stable")
    return [(seqs[i], scores[i], total[i]) for i in order], len(words)


@pytest.mark.parametrize("arch", ["search50", "encdec50"])
def test_beam_search_matches_brute_force(arch):
    model = build_model(arch, seed=3, tgt_vocab_size=8, gain=1.5)
    nbest = 20
    for forbid_unk in (True, False):
        for source in SOURCES[:3]:
            for alpha in (0.0, 1.0):
                ranked, words = brute_force(model, source, forbid_unk, alpha)
                # Widest step: words**2 live prefixes of 2 words, each with words + 1
                # extensions. A beam that wide never prunes anything, so it is exact.
                exact_beam = words ** (MAX_LENGTH - 2) * (words + 1)
                # A beam as wide as the choosable tokens may prune in general; for
                # these seeded models it still finds the best sequence.
                vocab_beam = words + 1
                for beam in (vocab_beam, exact_beam):
                    out = translate(model, [source], beam, alpha, forbid_unk, MAX_LENGTH, nbest)
                    best_seq, best_score, best_lp = ranked[0]
                    assert tuple(hypothesis(out, 0, 0)) == best_seq
                    np.testing.assert_allclose(out["scores"][0, 0], best_score, atol=1e-5)
                    np.testing.assert_allclose(out["log_probs"][0, 0], best_lp, atol=1e-5)
                    if beam == exact_beam:
                        assert out["ids"].shape[1] == nbest
                        got = [tuple(hypothesis(out, 0, n)) for n in range(nbest)]
                        assert got == [seq for seq, _, _ in ranked[:nbest]]
                        np.testing.assert_allclose(
                            out["scores"][0], [s for _, s, _ in ranked[:nbest]], atol=1e-5
                        )


# A lexical table for the tiny models: source word s translates to word 4 + s % 4, then
# 4 + (s + 1) % 4; the reserved source ids translate to nothing.
TINY_TABLE = np.array([[0, 0]] * 4 + [[4 + s % 4, 4 + (s + 1) % 4] for s in range(4, 12)],
                      np.int32)


def selecting_fn(model, nbest=3):
    """The translate function of ``model`` with TINY_TABLE's vocabulary selection: a test
    traces it once (a second each) and calls it for every case."""
    return search.make_translate_fn(model, nbest=nbest, lexicon_table=TINY_TABLE, autograph=False)


def selected(fn, source, beam, alpha, forbid_unk, frequent, best, max_length=0):
    out = fn(tf.constant(source, tf.int32), tf.constant(beam), tf.constant(alpha, tf.float32),
             tf.constant(forbid_unk), tf.constant(max_length), tf.constant(frequent),
             tf.constant(best))
    return {key: value.numpy() for key, value in out.items()}


def test_output_columns_are_the_shortlist_in_whole_blocks():
    source = tf.constant([[4, 5, 3, 0], [9, 3, 0, 0]])
    shortlist = search.Shortlist(TINY_TABLE, frequent=1, best=1)
    columns, count = search.output_columns(source, 300, shortlist)
    # Reserved 0-3, the most frequent word 4, translations 4, 5 (of 4, 5) and 5 (of 9).
    assert int(count) == 6
    np.testing.assert_array_equal(columns.numpy()[:6], [0, 1, 2, 3, 4, 5])
    assert columns.shape[0] == 128 and not columns.numpy()[6:].any()
    two = search.output_columns(source, 300, search.Shortlist(TINY_TABLE, 0, 2))
    np.testing.assert_array_equal(two[0].numpy()[: int(two[1])], [0, 1, 2, 3, 4, 5, 6])
    # Both sizes 0: selection off, every word, in 3 blocks.
    every, count = search.output_columns(source, 300, search.Shortlist(TINY_TABLE, 0, 0))
    assert int(count) == 300 and every.shape[0] == 384
    np.testing.assert_array_equal(every.numpy()[:300], np.arange(300))


def test_a_marked_source_word_selects_every_word_for_its_batch():
    table = TINY_TABLE.copy()
    table[9] = RARE_MARK  # word 9: seen too rarely to select by
    shortlist = search.Shortlist(table, frequent=1, best=1)
    columns, count = search.output_columns(tf.constant([[4, 5, 3, 0], [9, 3, 0, 0]]), 300,
                                           shortlist)
    assert int(count) == 300
    np.testing.assert_array_equal(columns.numpy()[:300], np.arange(300))
    # Without the marked word the batch keeps its candidates: reserved, 4 and 5.
    columns, count = search.output_columns(tf.constant([[4, 5, 3, 0]]), 300, shortlist)
    np.testing.assert_array_equal(columns.numpy()[: int(count)], [0, 1, 2, 3, 4, 5])


def test_rare_apart_decodes_the_marked_sentences_alone_over_every_word():
    # 12 target words: the table's translations (4-7) leave 8-11 out.
    model = build_model("search50", seed=3, tgt_vocab_size=12, gain=1.5)
    table = TINY_TABLE.copy()
    table[9] = RARE_MARK
    fn = search.make_translate_fn(model, nbest=2, lexicon_table=table, autograph=False)
    rare = np.zeros(len(table), bool)
    rare[9] = True
    apart = tf.function(search.rare_apart(fn.python_function, rare), autograph=False)

    def run(function, source):
        out = function(tf.constant(source, tf.int32), tf.constant(3), tf.constant(1.0),
                       tf.constant(False), tf.constant(0), tf.constant(0), tf.constant(1))
        return {key: value.numpy() for key, value in out.items()}

    exact = translate(model, SOURCES, 3, nbest=2)
    common = [source for source in SOURCES if 9 not in source]  # rows 0, 1 and 4
    alone = run(fn, common)
    for sources in (SOURCES, common, [SOURCES[2], SOURCES[3]]):  # mixed, none, all marked
        got = run(apart, sources)
        for row, source in enumerate(sources):
            want = alone if 9 not in source else exact
            at = (common if 9 not in source else SOURCES).index(source)
            length = int(got["lengths"][row].max())
            np.testing.assert_array_equal(got["ids"][row, :, :length], want["ids"][at, :, :length])
            assert not got["ids"][row, :, length:].any()
            np.testing.assert_allclose(got["scores"][row], want["scores"][at], atol=1e-6)
            np.testing.assert_allclose(got["attention"][row, :, :length],
                                       want["attention"][at, :, :length], atol=1e-6)
    # The unmarked sentences were selected: the common batch's candidates are fewer.
    assert not np.allclose(alone["scores"], exact["scores"][[0, 1, 4]])


@pytest.mark.parametrize("arch", ["search50", "encdec50"])
def test_selection_with_every_word_is_the_exact_search(arch):
    model = build_model(arch, seed=5, tgt_vocab_size=9)
    fn = selecting_fn(model)
    for beam, alpha, forbid in [(1, 1.0, False), (3, 0.0, True), (5, 1.0, False)]:
        exact = translate(model, SOURCES, beam, alpha, forbid)
        # Every word is a frequent one, or (off) the sizes are 0: the same search.
        for frequent, best in [(model.config.tgt_vocab_size, 1), (0, 0)]:
            got = selected(fn, SOURCES, beam, alpha, forbid, frequent, best)
            for key in ("ids", "lengths"):
                np.testing.assert_array_equal(got[key], exact[key])
            np.testing.assert_allclose(got["scores"], exact["scores"], atol=1e-6)
            np.testing.assert_allclose(got["attention"], exact["attention"], atol=1e-6)


@pytest.mark.parametrize("arch", ["search50", "encdec50"])
def test_selected_search_matches_brute_force_over_the_candidates(arch):
    model = build_model(arch, seed=3, tgt_vocab_size=8, gain=1.5)
    nbest = 6
    fn = selecting_fn(model, nbest)
    for source, (frequent, best) in [(SOURCES[0], (0, 1)), (SOURCES[1], (0, 2)),
                                     (SOURCES[4], (1, 1))]:
        words = set(range(EOS_ID + 1, EOS_ID + 1 + frequent))
        words |= {int(t) for s in source for t in TINY_TABLE[s, :best] if t}
        assert len(words) < 4  # the selection leaves words out
        for forbid_unk in (True, False):
            for alpha in (0.0, 1.0):
                ranked, count = brute_force(model, source, forbid_unk, alpha, candidates=words)
                beam = count ** (MAX_LENGTH - 2) * (count + 1)  # never prunes
                out = selected(fn, [source], beam, alpha, forbid_unk, frequent, best,
                               max_length=MAX_LENGTH)
                want = ranked[:nbest]
                got = [tuple(hypothesis(out, 0, n)) for n in range(len(want))]
                assert got == [seq for seq, _, _ in want]
                np.testing.assert_allclose(out["scores"][0, : len(want)],
                                           [score for _, score, _ in want], atol=1e-5)
                np.testing.assert_allclose(out["log_probs"][0, : len(want)],
                                           [lp for _, _, lp in want], atol=1e-5)


class RowCounter:
    """A model wrapper that records how many hypotheses each step is given (eager)."""

    def __init__(self, model):
        self.model, self.config, self.rows = model, model.config, []

    def encode(self, source_ids):
        return self.model.encode(source_ids)

    def output_projection(self, columns, count):
        return self.model.output_projection(columns, count)

    def step(self, previous_ids, state, memory, projection=None):
        self.rows.append(int(previous_ids.shape[0]))
        return self.model.step(previous_ids, state, memory, projection)


def test_a_search_without_attention_gives_the_same_hypotheses():
    """``attention=False`` drops the attention histories from the loop, nothing else."""
    model = build_model("search50", seed=1, gain=0.5, eos_bias=2.0)

    def make(attention, compact):
        def run(source, beam, alpha):
            return search.beam_search(model, source, beam, alpha=alpha, nbest=2,
                                      compact=compact, attention=attention)
        return tf.function(run, autograph=False)

    source = tf.constant(SOURCES)
    for compact in (True, False):
        with_it, without = make(True, compact), make(False, compact)
        for beam in (1, 3):
            args = (source, tf.constant(beam), tf.constant(1.0))
            a, b = with_it(*args), without(*args)
            assert "attention" in a and "attention" not in b
            for key in ("ids", "lengths", "scores", "log_probs"):
                np.testing.assert_array_equal(a[key].numpy(), b[key].numpy(), err_msg=key)


@pytest.mark.parametrize("compact", [True, False])
def test_token_logprobs_are_the_forced_ones_and_change_nothing_else(compact):
    """``token_logprobs=True`` adds each hypothesis' token log-probabilities: they sum to
    its ``log_probs`` and are what force decoding it gives; the hypotheses are the same."""
    from keras_nmt.evaluation.forced import force_ids

    model = build_model("search50", seed=1, gain=0.5, eos_bias=2.0)

    def make(token_logprobs):
        def run(source, beam):
            return search.beam_search(model, source, beam, nbest=3, compact=compact,
                                      token_logprobs=token_logprobs)
        return tf.function(run, autograph=False)

    source = tf.constant(SOURCES)
    with_them, without = make(True), make(False)
    out = {key: value.numpy() for key, value in with_them(source, tf.constant(3)).items()}
    plain = without(source, tf.constant(3))
    assert "token_logprobs" not in plain
    for key in ("ids", "lengths", "scores", "log_probs"):
        np.testing.assert_array_equal(out[key], plain[key].numpy(), err_msg=key)
    lengths, logprobs = out["lengths"], out["token_logprobs"]
    assert logprobs.shape == out["ids"].shape
    for b, n in itertools.product(range(len(SOURCES)), range(3)):
        assert np.all(logprobs[b, n, lengths[b, n]:] == 0.0)
        np.testing.assert_allclose(logprobs[b, n].sum(), out["log_probs"][b, n], rtol=1e-5)
    sources = [[i for i in row if i != PAD_ID] for row in SOURCES]
    targets = [hypothesis(out, b, 0) for b in range(len(SOURCES))]
    for b, (forced, _) in enumerate(force_ids(model, sources, targets)):
        np.testing.assert_allclose(logprobs[b, 0, :lengths[b, 0]], forced, atol=2e-5)


@pytest.mark.parametrize("arch", ["search50", "encdec50"])
def test_compact_batches_give_the_uncompacted_result(arch):
    # A likely EOS: sentences stop at different steps, so compaction has work to do.
    model = build_model(arch, seed=1, gain=0.5, eos_bias=2.0)

    def make(compact, nbest, shortlist):
        def run(source, beam, alpha):
            return search.beam_search(model, source, beam, alpha=alpha, nbest=nbest,
                                      compact=compact, shortlist=shortlist)
        return tf.function(run, autograph=False)

    source = tf.constant(SOURCES)
    for nbest in (1, 3):
        for shortlist in (None, search.Shortlist(TINY_TABLE, 1, 1)):
            compacted, whole = make(True, nbest, shortlist), make(False, nbest, shortlist)
            for beam in (1, 3):
                for alpha in (0.0, 1.0):
                    args = (source, tf.constant(beam), tf.constant(alpha))
                    a, b = compacted(*args), whole(*args)
                    for key in ("ids", "lengths"):
                        np.testing.assert_array_equal(a[key].numpy(), b[key].numpy(), err_msg=key)
                    for key in ("scores", "log_probs", "attention"):
                        np.testing.assert_allclose(a[key].numpy(), b[key].numpy(), atol=1e-6,
                                                   err_msg=key)
    # Eagerly, the steps see fewer and fewer rows as sentences stop; without compaction,
    # every step sees the whole batch.
    for compact in (True, False):
        counter = RowCounter(model)
        search.beam_search(counter, source, 3, alpha=1.0, compact=compact)
        assert counter.rows[0] == 3 * len(SOURCES)
        if compact:
            assert counter.rows == sorted(counter.rows, reverse=True) and counter.rows[-1] < counter.rows[0]
        else:
            assert set(counter.rows) == {3 * len(SOURCES)}


def test_early_stopping_is_exact():
    # Flat distributions and a likely EOS: the pool fills early and live hypotheses
    # fall behind it, so sentences stop well before their limit (2 to 8 steps instead
    # of 5 to 15 for alpha 0). Stopping must not change any returned result, whether
    # all K hypotheses are asked for or fewer (which may stop sooner).
    model = build_model("search50", seed=1, gain=0.5, eos_bias=2.0)

    def make(early, nbest):
        def run(source, beam, alpha):
            return search.beam_search(model, source, beam, alpha=alpha, nbest=nbest, early_stopping=early)
        return tf.function(run, autograph=False)

    source = tf.constant(SOURCES)
    for nbest in (1, 2, 5):
        early, full = make(True, nbest), make(False, nbest)
        for beam in (2, 5):
            for alpha in (0.0, 0.5, 1.0):
                args = (source, tf.constant(beam), tf.constant(alpha))
                a, b = early(*args), full(*args)
                time = a["ids"].shape[2]
                np.testing.assert_array_equal(a["ids"].numpy(), b["ids"].numpy()[:, :, :time])
                assert not b["ids"].numpy()[:, :, time:].any()
                np.testing.assert_allclose(a["scores"].numpy(), b["scores"].numpy(), atol=1e-6)
                np.testing.assert_array_equal(a["lengths"].numpy(), b["lengths"].numpy())


# 3. A sentence decodes the same alone or in a batch.


@pytest.mark.parametrize("beam", [1, 3])
def test_batch_equals_single(beam, search_model, encdec_model):
    for model in (search_model, encdec_model):
        batched = translate(model, SOURCES, beam, alpha=1.0)
        for b, source in enumerate(SOURCES):
            length = sum(1 for token in source if token)
            single = translate(model, [source[:length]], beam, alpha=1.0)
            n = single["ids"].shape[1]
            assert batched["ids"].shape[1] == n == min(3, beam)
            np.testing.assert_array_equal(batched["lengths"][b], single["lengths"][0])
            for k in range(n):
                assert hypothesis(batched, b, k) == hypothesis(single, 0, k)
            np.testing.assert_allclose(batched["scores"][b], single["scores"][0], atol=1e-5)
            np.testing.assert_allclose(batched["log_probs"][b], single["log_probs"][0], atol=1e-5)
            t = single["ids"].shape[2]
            np.testing.assert_allclose(
                batched["attention"][b, :, :t, :length], single["attention"][0], atol=1e-5
            )


# 4. Properties of the output.


def check_well_formed(out, alpha, limits):
    ids, lengths, scores = out["ids"], out["lengths"], out["scores"]
    batch, n, time = ids.shape
    assert lengths.max() == time
    for b in range(batch):
        for k in range(n):
            length = lengths[b, k]
            assert 1 <= length <= limits[b]
            row = ids[b, k]
            assert row[length - 1] == EOS_ID
            assert np.all(row[length:] == PAD_ID)
            body = row[: length - 1]
            assert not np.isin(body, [PAD_ID, BOS_ID, EOS_ID]).any()
    assert np.all(np.diff(scores, axis=1) <= 0)  # sorted, best first
    np.testing.assert_allclose(scores, out["log_probs"] / lengths.astype(np.float64) ** alpha, rtol=1e-5)


def test_output_properties(search_model, encdec_model):
    source = np.array(SOURCES)
    source_lengths = (source != 0).sum(1)
    ratio_limits = np.ceil(2.0 * source_lengths).astype(int) + 1
    for model in (search_model, encdec_model):
        for alpha in (0.0, 1.0):
            out = translate(model, SOURCES, 4, alpha=alpha)
            check_well_formed(out, alpha, ratio_limits)
            out = translate(model, SOURCES, 4, alpha=alpha, max_length=3)
            check_well_formed(out, alpha, [3] * len(SOURCES))

    # Attention rows of RNNsearch are distributions over the real source words.
    out = translate(search_model, SOURCES, 4)
    mask = source != 0
    for b in range(len(SOURCES)):
        for k in range(out["ids"].shape[1]):
            length = out["lengths"][b, k]
            weights = out["attention"][b, k]
            np.testing.assert_allclose(weights[:length].sum(-1), 1.0, atol=1e-5)
            assert np.all(weights[:length, ~mask[b]] == 0)
            assert np.all(weights[length:] == 0)
    # RNNencdec has no alignment: all zeros.
    assert not translate(encdec_model, SOURCES, 4)["attention"].any()


def test_forbid_unk(encdec_model):
    # This model likes UNK: it must appear without the ban, and never with it.
    assert (translate(encdec_model, SOURCES, 4)["ids"] == UNK_ID).any()
    for beam in (1, 4):
        out = translate(encdec_model, SOURCES, beam, forbid_unk=True)
        assert not (out["ids"] == UNK_ID).any()


def test_nbest_clipped_to_beam(search_model):
    out = translate(search_model, SOURCES, 2, nbest=3)
    assert out["ids"].shape[:2] == (len(SOURCES), 2)
    eager = search.beam_search(search_model, tf.constant(SOURCES), 2, nbest=5)
    assert eager["scores"].shape == (len(SOURCES), 2)
    np.testing.assert_allclose(eager["scores"].numpy(), out["scores"], atol=1e-5)
    with pytest.raises(ValueError):
        search.beam_search(search_model, tf.constant(SOURCES), 2, nbest=0)


def test_unfillable_slots(search_model):
    # At most one token: "EOS" is the only sequence, the other n-best slots stay empty.
    out = search.beam_search(search_model, tf.constant(SOURCES[:2]), 5, max_length=1, nbest=3)
    assert out["ids"].shape == (2, 3, 1)
    np.testing.assert_array_equal(out["ids"].numpy()[:, 0, 0], EOS_ID)
    np.testing.assert_array_equal(out["lengths"].numpy(), [[1, 0, 0]] * 2)
    assert np.isneginf(out["scores"].numpy()[:, 1:]).all()
    assert not out["ids"].numpy()[:, 1:].any()


# 5. The traced function.


def test_translate_fn_traces_once(search_model):
    fn = translate_fn(search_model, nbest=3)  # shared: other tests may have called it
    results = []
    for batch, beam, alpha, forbid in [(1, 1, 1.0, False), (3, 4, 0.0, True), (5, 2, 0.5, False)]:
        out = fn(
            tf.constant(SOURCES[:batch]), tf.constant(beam), tf.constant(alpha),
            tf.constant(forbid), tf.constant(0),
        )
        results.append(out)
        assert out["ids"].shape[:2] == (batch, min(3, beam))
    assert fn.experimental_get_tracing_count() == 1

    # With autograph off (as keras.export traces it) the graph is the same search.
    plain = search.make_translate_fn(search_model, nbest=3, autograph=False)
    out = plain(tf.constant(SOURCES[:3]), tf.constant(4), tf.constant(0.0), tf.constant(True), tf.constant(0))
    np.testing.assert_array_equal(out["ids"].numpy(), results[1]["ids"].numpy())
    np.testing.assert_allclose(out["scores"].numpy(), results[1]["scores"].numpy(), atol=1e-6)

    # The graph holds a while loop and no TensorArray (for tf2onnx).
    graph = plain.get_concrete_function().graph.as_graph_def()
    ops = {node.op for node in graph.node}
    for function in graph.library.function:
        ops |= {node.op for node in function.node_def}
    assert "StatelessWhile" in ops or "While" in ops
    assert not any(op.startswith("TensorArray") for op in ops)


@pytest.mark.slow  # the tf2onnx conversion takes ~20 s
def test_onnx_round_trip(search_model):
    tf2onnx = pytest.importorskip("tf2onnx")
    ort = pytest.importorskip("onnxruntime")
    fn = search.make_translate_fn(search_model, nbest=3, autograph=False)
    proto, _ = tf2onnx.convert.from_function(fn, input_signature=fn.input_signature, opset=17)
    session = ort.InferenceSession(proto.SerializeToString())
    names = [i.name for i in session.get_inputs()]
    for beam, alpha, forbid, max_length in [(1, 1.0, False, 0), (4, 0.0, True, 0), (5, 1.0, False, 1)]:
        args = [np.array(SOURCES, np.int32), np.array(beam, np.int32), np.array(alpha, np.float32),
                np.array(forbid), np.array(max_length, np.int32)]
        got = dict(zip([o.name for o in session.get_outputs()], session.run(None, dict(zip(names, args)))))
        want = fn(*[tf.constant(a) for a in args])
        for key, value in want.items():
            np.testing.assert_allclose(got[key], value.numpy(), atol=1e-5, err_msg=key)


# 6. The per-hypothesis candidates: top-k over raw logits, not a log-softmax over V.

@pytest.mark.parametrize("k,vocab,forbid_unk", [(1, 9, False), (3, 30, True), (5, 7, False), (10, 9, True)])
def test_row_candidates_match_log_softmax(k, vocab, forbid_unk):
    rng = np.random.default_rng(k * 100 + vocab)
    logits = rng.normal(0.0, 3.0, size=(6, vocab)).astype(np.float32)
    logits[1, [PAD_ID, BOS_ID, UNK_ID]] = 50.0  # banned words on top must not be picked
    forced = np.array([False, False, True, False, True, False])
    # Rows come over whole blocks of output columns, the padding ones masked by the model.
    padded = np.pad(logits, [[0, 0], [0, -vocab % BLOCK]], constant_values=-1e9)
    lp, tokens = row_candidates(tf.constant(padded), tf.constant(k), tf.constant(forced),
                                tf.constant(forbid_unk), tf.constant(vocab))
    lp, tokens = lp.numpy(), tokens.numpy()
    full = tf.nn.log_softmax(logits).numpy()  # normalised over every word, banned ones too
    banned = [PAD_ID, BOS_ID] + ([UNK_ID] if forbid_unk else [])
    width = min(k, vocab)
    assert lp.shape == tokens.shape == (6, width)
    for row in range(6):
        if forced[row]:
            assert tokens[row, 0] == EOS_ID
            np.testing.assert_allclose(lp[row, 0], full[row, EOS_ID], atol=1e-5)
            assert (lp[row, 1:] == DEAD).all()
            continue
        allowed = [v for v in np.argsort(-full[row], kind="stable") if v not in banned]
        expected = allowed[:width]
        real = lp[row] > ALIVE
        np.testing.assert_array_equal(tokens[row][real], expected[: real.sum()])
        np.testing.assert_allclose(lp[row][real], full[row, expected[: real.sum()]], atol=1e-5)
        # Slots left dead only when fewer than K words are allowed.
        assert real.sum() == min(width, len(allowed))


@pytest.mark.parametrize("vocab,k", [(8, 8), (130, 5), (27461, 8), (1000, 13)])
def test_two_stage_top_k_equals_top_k(vocab, k):
    rng = np.random.default_rng(vocab)
    logits = rng.normal(size=(7, vocab)).astype(np.float32)
    # Ties, including ties across blocks and with a block maximum: the lower id wins.
    logits[0, :] = 1.0
    logits[1, [3, 200 % vocab, vocab - 1]] = 9.0
    logits[2] = np.round(logits[2])
    padded = np.pad(logits, [[0, 0], [0, -vocab % BLOCK]], constant_values=-1e9)
    got = top_k_over_vocabulary(tf.constant(padded), tf.constant(k))
    want = tf.math.top_k(logits, k=k)
    np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())
    np.testing.assert_array_equal(got[0].numpy(), want[0].numpy())
