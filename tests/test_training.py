"""Trainer logic on a tiny model: updates, early stopping, divergence, checkpoints."""

import math

import keras
import pytest
import tensorflow as tf

from keras_nmt.config import variant_config
from keras_nmt.optimizers import FusedAdadelta
from keras_nmt.models import TranslationModel
from keras_nmt.rundir import RunDir
from keras_nmt.training import Limits, Trainer, TrainingDiverged, make_optimizer

TINY = {"embedding": 8, "hidden": 8, "attention": 8, "maxout": 4, "src_vocab_size": 10,
        "tgt_vocab_size": 10, "batch_size": 2, "eval_every": 1, "checkpoint_every": 2}


def _batches():
    source = tf.constant([[4, 5, 3], [6, 3, 0]])
    target_in = tf.constant([[2, 7, 8], [2, 9, 0]])
    target_out = tf.constant([[7, 8, 3], [9, 3, 0]])
    return tf.data.Dataset.from_tensors(((source, target_in), target_out)).repeat()


def _trainer(tmp_path, **overrides):
    keras.utils.set_random_seed(0)
    config = variant_config("search50", {**TINY, **overrides})
    model = TranslationModel(config)
    return Trainer(config, model, RunDir(tmp_path), _batches(), lambda: _batches().take(1), train_pairs=2)


def test_optimizers_follow_the_config():
    adadelta = make_optimizer(variant_config("search50"))
    assert isinstance(adadelta, keras.optimizers.Adadelta)
    assert adadelta.rho == 0.95 and adadelta.epsilon == 1e-6
    assert isinstance(make_optimizer(variant_config("search50", {"optimizer": "adam"})), keras.optimizers.Adam)
    # The fused kernels' classes (tests/test_optimizers.py checks their arithmetic).
    assert isinstance(adadelta, FusedAdadelta)


def test_training_lowers_the_loss_and_counts(tmp_path):
    trainer = _trainer(tmp_path, optimizer="adam", learning_rate=0.05, patience=100)
    before = trainer.dev_nll()
    outcome = trainer.fit(Limits(max_steps=30))
    assert outcome.steps == 30 and outcome.stop_reason == "max_steps"
    assert outcome.epochs == pytest.approx(30.0)
    assert outcome.target_tokens == 30 * 5
    assert trainer.dev_nll() < before / 2
    assert trainer.manager.latest_checkpoint.endswith("ckpt-30")


def test_early_stopping_after_patience(tmp_path, monkeypatch):
    trainer = _trainer(tmp_path, patience=1)
    scores = iter([5.0, 4.0, 4.5, 4.6, 1.0])
    monkeypatch.setattr(trainer, "dev_nll", lambda: next(scores))
    outcome = trainer.fit(Limits(max_steps=10))
    # Evaluations at steps 1..4: best at step 2, then two evaluations without improvement.
    assert outcome.stop_reason == "early_stopping"
    assert outcome.steps == 4
    assert outcome.best_dev_nll == 4.0
    assert trainer.best_manager.latest_checkpoint.endswith("ckpt-2")


def test_divergence_stops_with_resume_advice(tmp_path, monkeypatch):
    trainer = _trainer(tmp_path)
    trainer.fit(Limits(max_steps=2))  # checkpoint at step 2
    real_step = trainer.train_step
    monkeypatch.setattr(
        trainer, "train_step",
        lambda *batch: (tf.constant(math.nan),) + tuple(real_step(*batch)[1:]),
    )
    with pytest.raises(TrainingDiverged, match=r"became nan at step 3; the last good checkpoint is step 2"):
        trainer.fit(Limits(max_steps=5))


def test_restore_continues_counters_and_data(tmp_path):
    trainer = _trainer(tmp_path, optimizer="adam", learning_rate=0.01)
    trainer.fit(Limits(max_steps=4))
    weights = [w.numpy() for w in trainer.model.weights]
    again = _trainer(tmp_path, optimizer="adam", learning_rate=0.01)
    assert again.restore()
    assert int(again.step.numpy()) == 4 and int(again.sentences.numpy()) == 8
    for restored, saved in zip(again.model.weights, weights):
        assert (restored.numpy() == saved).all()
