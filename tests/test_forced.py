"""Force decoding (keras_nmt.evaluation.forced): its sums are the training NLL, its
attention rows are distributions, an ensemble mixes its members' probabilities."""

import dataclasses
import math

import numpy as np
import pytest

from keras_nmt.decoding.ensemble import Ensemble
from keras_nmt.evaluation import forced
from keras_nmt.models.rnnsearch import TranslationModel
from keras_nmt.decoding.keras_translator import Translator, default_max_source_len
from support import scored_pairs, training_nll


@pytest.mark.parametrize("run", ["tiny_run", "tiny_spm_run"])
def test_summed_scores_are_the_training_nll(run, tiny_run, tiny_spm_run, tiny_corpus, tmp_path):
    run_dir = {"tiny_run": tiny_run, "tiny_spm_run": tiny_spm_run}[run]
    translator = Translator.from_run_dir(run_dir)
    sources, targets = scored_pairs(tiny_corpus)
    assert len(translator.source_codec.tokenize(sources[-1])) > default_max_source_len(
        translator.model.config.max_len)
    pairs = forced.force_decode(translator, sources, targets, batch_size=4, attention=True)
    expected = training_nll(run_dir, translator.model, sources, targets, tmp_path)
    np.testing.assert_allclose([-p.logprob for p in pairs], expected, rtol=1e-5)
    for pair, source, target in zip(pairs, sources, targets):
        length = len(translator.target_codec.encode(target)) + 1
        assert pair.tokens == length == len(pair.target_tokens) + 1
        assert pair.logprob_per_token == pytest.approx(pair.logprob / length)
        assert pair.score(0.0) == pair.logprob and pair.score(1.0) == pair.logprob_per_token
        assert np.all(pair.token_logprobs <= 0.0)
        # One row per target token + EOS, one column per source token + EOS; each a
        # distribution over the source (padding gets no weight).
        assert pair.attention.shape == (length, len(translator.source_codec.encode(source)) + 1)
        np.testing.assert_allclose(pair.attention.sum(axis=1), 1.0, rtol=1e-5)
    assert pairs[-3].tokens == 1 and pairs[-2].source_tokens == ()


def test_ensemble_mixes_member_probabilities(tiny_run, tiny_corpus):
    trained = Translator.from_run_dir(tiny_run)
    untrained = TranslationModel(trained.model.config)  # other (initial) weights
    members = [Translator(model, trained.source_codec, trained.target_codec)
               for model in (trained.model, untrained)]
    ensemble = Translator(Ensemble([trained.model, untrained]), trained.source_codec,
                          trained.target_codec)
    sources, targets = scored_pairs(tiny_corpus, count=5)
    mixed = forced.force_decode(ensemble, sources, targets, batch_size=3, attention=True)
    alone = [forced.force_decode(m, sources, targets, attention=True) for m in members]
    for i, pair in enumerate(mixed):
        a, b = alone[0][i], alone[1][i]
        # log((p_a + p_b) / 2) token by token, and the mean attention.
        expected = np.logaddexp(a.token_logprobs, b.token_logprobs) - math.log(2)
        np.testing.assert_allclose(pair.token_logprobs, expected, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(pair.attention, (a.attention + b.attention) / 2, atol=1e-6)
        assert a.logprob != pytest.approx(b.logprob)


def test_batches_bound_rows_and_positions():
    sources = [3, 1, 9, 2, 50, 4]
    targets = [2, 8, 1, 2, 3, 4]
    chosen = forced.batches(sources, targets, batch_size=2, positions=16)
    assert sorted(i for batch in chosen for i in batch) == list(range(6))
    for batch in chosen:
        width = max(max(sources[i], targets[i]) for i in batch)
        assert len(batch) <= 2 and (len(batch) == 1 or len(batch) * width <= 16)
    assert [4] in chosen  # longer than the budget: alone
    # Sorted by source length: the shortest sources first.
    assert chosen[0] == [1, 3]


def test_unknown_target_words_are_counted_and_scored_as_unk(tiny_run):
    translator = Translator.from_run_dir(tiny_run)
    [pair, other, written, known] = forced.force_decode(
        translator, ["The man."] * 4,
        ["Zyxqwv l'homme.", "Qwvzyx l'homme.", "<unk> l'homme.", "l'homme."])
    assert (pair.unknown, other.unknown, written.unknown, known.unknown) == (1, 1, 1, 0)
    assert pair.target_tokens[0] == "Zyxqwv"  # the word itself, for the attention file
    # "<unk>", as translate writes the unknown word, is that word (not "<", "unk", ">").
    assert written.target_tokens == ("<unk>", "l'", "homme", ".")
    for same in (other, written):
        np.testing.assert_allclose(pair.token_logprobs, same.token_logprobs, rtol=1e-6)


def test_forced_fn_is_traced_once(tiny_run, tiny_corpus):
    translator = Translator.from_run_dir(tiny_run)
    sources, targets = scored_pairs(tiny_corpus, count=6)
    forced.force_decode(translator, sources, targets, batch_size=2)
    forced.force_decode(translator, sources[:3], targets[:3], batch_size=3)
    assert forced._forced_fn(translator.model).experimental_get_tracing_count() == 1
    assert set(forced._FNS[translator.model]) == {False}  # the mode with dropout: unused
    with pytest.raises(ValueError, match="2 sources for 1 targets"):
        forced.force_decode(translator, ["a", "b"], ["c"])


def test_the_pairs_of_a_lines_sentences_join_with_eos_between_them():
    first = forced.ForcedPair(("a", "b"), ("x",), np.array([-1.0, -2.0], np.float32),
                              np.full((2, 3), 0.5, np.float32), 0)
    second = forced.ForcedPair(("c",), ("y", "z"), np.array([-3.0, -4.0, -5.0], np.float32),
                               np.full((3, 2), 0.25, np.float32), 1)
    joined = forced.join_pairs([first, second])
    assert joined.source_tokens == ("a", "b", "</s>", "c")
    assert joined.target_tokens == ("x", "</s>", "y", "z")
    np.testing.assert_array_equal(joined.token_logprobs, [-1, -2, -3, -4, -5])
    assert joined.logprob == first.logprob + second.logprob and joined.unknown == 1
    # Still [target tokens + 1, source tokens + 1]: each sentence attends to its own source.
    assert joined.attention.shape == (len(joined.target_tokens) + 1,
                                      len(joined.source_tokens) + 1) == (5, 5)
    np.testing.assert_array_equal(joined.attention[:2, :3], first.attention)
    np.testing.assert_array_equal(joined.attention[2:, 3:], second.attention)
    assert joined.attention.sum() == pytest.approx(first.attention.sum() + second.attention.sum())
    assert forced.join_pairs([first]) is first
    assert forced.join_pairs([first, dataclasses.replace(second, attention=None)]).attention is None
