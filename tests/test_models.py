"""The model's losses: the sampled softmax against the full one, and by hand."""

import math

import numpy as np
import pytest
import tensorflow as tf

from keras_nmt.core.config import variant_config
from keras_nmt.core.errors import ConfigError
from keras_nmt.models.rnnsearch import sampled_candidates, sampled_sentence_nll, sentence_nll


def _random(seed, batch=3, time=4, units=6, vocab=11):
    rng = np.random.default_rng(seed)
    hidden = tf.constant(rng.normal(size=(batch, time, units)).astype("float32"))
    kernel = tf.Variable(rng.normal(size=(units, vocab)).astype("float32"))
    bias = tf.Variable(rng.normal(size=(vocab,)).astype("float32"))
    targets = tf.constant(rng.integers(1, vocab, size=(batch, time)).astype("int32"))
    targets = tf.tensor_scatter_nd_update(targets, [[0, time - 1]], [0])  # one padded slot
    return hidden, kernel, bias, targets


def test_every_word_a_candidate_is_the_full_softmax_with_its_gradients():
    hidden, kernel, bias, targets = _random(0)
    with tf.GradientTape(persistent=True) as tape:
        full = sentence_nll(tf.einsum("btl,lv->btv", hidden, kernel) + bias, targets)
        sampled = sampled_sentence_nll(hidden, targets, kernel, bias, 11, tf.constant([1, 2]))
    np.testing.assert_allclose(sampled.numpy(), full.numpy(), rtol=1e-5)
    for a, b in zip(tape.gradient(full, [kernel, bias]), tape.gradient(sampled, [kernel, bias])):
        np.testing.assert_allclose(tf.convert_to_tensor(b).numpy(), tf.convert_to_tensor(a).numpy(),
                                   rtol=1e-5, atol=1e-6)


def test_the_correction_on_five_words_by_hand():
    # One sentence of one token, word 1; logits z_w = w + 1 (hidden 1, kernel [1..5]).
    hidden = tf.ones([1, 1, 1])
    kernel = tf.constant([[1.0, 2.0, 3.0, 4.0, 5.0]])
    bias = tf.zeros([5])
    targets = tf.constant([[1]])
    seed = tf.constant([7, 3])
    ids, log_q = sampled_candidates(targets, 5, 3, seed)
    ids, log_q = ids.numpy().tolist(), log_q.numpy()
    assert ids[0] == 1 and len(set(ids)) == 3  # the batch's word first, two drawn
    # Drawn words: 2 of the 4 others, so q = 2/4 each.
    np.testing.assert_allclose(log_q, [0.0, math.log(0.5), math.log(0.5)], rtol=1e-6)
    z = {w: w + 1.0 for w in range(5)}
    by_hand = -z[1] + math.log(math.exp(z[1]) + sum(math.exp(z[w]) / 0.5 for w in ids[1:]))
    loss = sampled_sentence_nll(hidden, targets, kernel, bias, 3, seed)
    assert loss.numpy()[0] == pytest.approx(by_hand, rel=1e-6)


def test_the_drawn_words_estimate_the_missing_mass_without_bias():
    z = np.linspace(-2.0, 3.0, 40).astype("float32")
    kernel, bias = tf.constant(z[None, :]), tf.zeros([40])
    targets = tf.constant([[5, 9]])
    partition = []
    for draw in range(1500):
        ids, log_q = sampled_candidates(targets, 40, 12, tf.constant([draw, 0]))
        partition.append(np.sum(np.exp(z[ids.numpy()] - log_q.numpy())))
    assert np.mean(partition) == pytest.approx(np.exp(z).sum(), rel=0.03)


def test_label_smoothing_by_hand_and_through_every_candidate():
    # One token, word 1, of a 5-word vocabulary; logits z_w = w + 1.
    z = np.arange(1.0, 6.0)
    log_z = math.log(np.exp(z).sum())
    smoothed = sentence_nll(tf.constant(z[None, None, :], tf.float32), tf.constant([[1]]), 0.1)
    by_hand = 0.9 * (log_z - z[1]) + 0.1 * np.mean(log_z - z)
    assert smoothed.numpy()[0] == pytest.approx(by_hand, rel=1e-6)
    assert sentence_nll(tf.constant(z[None, None, :], tf.float32), tf.constant([[0]]), 0.1).numpy()[0] == 0
    # Every word a candidate: the sampled loss is the full one, gradients included.
    hidden, kernel, bias, targets = _random(3)
    with tf.GradientTape(persistent=True) as tape:
        full = sentence_nll(tf.einsum("btl,lv->btv", hidden, kernel) + bias, targets, 0.2)
        sampled = sampled_sentence_nll(hidden, targets, kernel, bias, 11, tf.constant([1, 2]),
                                       label_smoothing=0.2)
    plain = sentence_nll(tf.einsum("btl,lv->btv", hidden, kernel) + bias, targets)
    assert np.all(full.numpy() != plain.numpy())
    np.testing.assert_allclose(sampled.numpy(), full.numpy(), rtol=1e-5)
    for a, b in zip(tape.gradient(full, [kernel, bias]), tape.gradient(sampled, [kernel, bias])):
        np.testing.assert_allclose(tf.convert_to_tensor(b).numpy(), tf.convert_to_tensor(a).numpy(),
                                   rtol=1e-5, atol=1e-6)


def test_the_candidates_estimate_the_uniform_part_without_bias():
    # The uniform part is log Z - mean(z); with z linear in the hidden unit, the sampled
    # loss's smoothing term (its difference from the plain sampled loss, over e) estimates
    # log Z_sampled - mean(z): its mean over draws minus the plain term's is -mean(z).
    z = np.linspace(-2.0, 3.0, 40).astype("float32")
    kernel, bias = tf.constant(z[None, :]), tf.zeros([40])
    hidden, targets = tf.ones([1, 1, 1]), tf.constant([[5]])
    estimates = []
    for draw in range(800):
        seed = tf.constant([draw, 1])
        plain = sampled_sentence_nll(hidden, targets, kernel, bias, 12, seed).numpy()[0]
        smooth = sampled_sentence_nll(hidden, targets, kernel, bias, 12, seed,
                                      label_smoothing=0.5).numpy()[0]
        # smooth = 0.5 plain + 0.5 (log Z_hat - mean_hat); plain = log Z_hat - z_5.
        estimates.append(2 * smooth - plain - (plain + z[5]))
    assert np.mean(estimates) == pytest.approx(-z.mean(), abs=0.05)


def test_label_smoothing_is_a_weight_below_one():
    with pytest.raises(ConfigError, match=r"label_smoothing must be in \[0, 1\), got 1.0"):
        variant_config("search50", {"label_smoothing": 1.0})
    assert variant_config("search50").label_smoothing == 0.0


def test_sampled_softmax_must_hold_a_batch():
    with pytest.raises(ConfigError, match="cannot hold the 4081 distinct target words"):
        variant_config("search50", {"sampled_softmax": 100})
    assert variant_config("search50", {"sampled_softmax": 4081}).sampled_softmax == 4081


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.end_to_end
def test_training_with_a_sampled_softmax_lowers_the_full_nll(tmp_path, smoothing):
    from support import fixed_batch_trainer as _trainer

    from keras_nmt.training import TrainingBudget

    trainer = _trainer(tmp_path, optimizer="adam", learning_rate=0.05, patience=100,
                       tgt_vocab_size=300, max_len=5, sampled_softmax=20,
                       label_smoothing=smoothing)
    before = trainer.dev_nll()  # full softmax
    outcome = trainer.fit(TrainingBudget(max_steps=30))
    assert math.isfinite(outcome.train_nll)
    assert trainer.dev_nll() < before / 2


def test_dropout_acts_in_training_only_and_is_off_in_the_paper_variants():
    import keras

    from keras_nmt.models.rnnsearch import TranslationModel

    tiny = {"embedding": 8, "hidden": 8, "attention": 8, "maxout": 4, "src_vocab_size": 12,
            "tgt_vocab_size": 12}
    for variant in ("search30", "search50", "encdec30", "encdec50"):
        assert variant_config(variant).dropout == 0.0
    keras.utils.set_random_seed(1)
    plain = TranslationModel(variant_config("search50", tiny))
    dropped = TranslationModel(variant_config("search50", {**tiny, "dropout": 0.3}))
    rng = np.random.default_rng(2)
    for mine, theirs in zip(dropped.trainable_weights, plain.trainable_weights):
        # The same large weights in both: dropout then shows in every logit.
        value = rng.normal(0, 0.5, mine.shape).astype("float32")
        mine.assign(value)
        theirs.assign(value)
    batch = (tf.constant([[4, 5, 6, 3]]), tf.constant([[2, 7, 8, 9]]))
    np.testing.assert_allclose(dropped(batch, training=False).numpy(), plain(batch).numpy(),
                               rtol=1e-6)
    first, second = dropped(batch, training=True).numpy(), dropped(batch, training=True).numpy()
    assert not np.allclose(first, second) and not np.allclose(first, plain(batch).numpy())
    with pytest.raises(ConfigError, match="dropout must be in"):
        variant_config("search50", {"dropout": 1.0})
