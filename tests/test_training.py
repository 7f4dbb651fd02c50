"""Trainer logic on a tiny model: updates, early stopping, divergence, checkpoints."""

import math

import numpy as np

import keras
import pytest
import tensorflow as tf

from keras_nmt.core.config import variant_config
from keras_nmt.core.errors import ConfigError, TrainingDiverged
from keras_nmt.training.optimizers import FusedAdadelta
from keras_nmt.training import TrainingBudget, make_optimizer
from support import FIXED_BATCH_SETTINGS, fixed_batch_trainer as _trainer

def test_optimizers_follow_the_config():
    adadelta = make_optimizer(variant_config("search50"))
    assert isinstance(adadelta, keras.optimizers.Adadelta)
    assert adadelta.rho == 0.95 and adadelta.epsilon == 1e-6
    assert isinstance(make_optimizer(variant_config("search50", {"optimizer": "adam"})), keras.optimizers.Adam)
    # The fused kernels' classes (tests/test_optimizers.py checks their arithmetic).
    assert isinstance(adadelta, FusedAdadelta)


@pytest.mark.end_to_end
def test_training_lowers_the_loss_and_counts(tmp_path):
    trainer = _trainer(tmp_path, optimizer="adam", learning_rate=0.05, patience=100)
    before = trainer.dev_nll()
    outcome = trainer.fit(TrainingBudget(max_steps=30))
    assert outcome.steps == 30 and outcome.stop_reason == "max_steps"
    assert outcome.epochs == pytest.approx(30.0)
    assert outcome.target_tokens == 30 * 5
    assert trainer.dev_nll() < before / 2
    assert trainer.checkpoints.manager.latest_checkpoint.endswith("ckpt-30")


@pytest.mark.parametrize("patience, stop", [(1, 3), (2, 4), (3, 5), (4, None)])
def test_early_stopping_after_patience_evaluations_without_improvement(tmp_path, monkeypatch,
                                                                       patience, stop):
    """patience N: training stops at the Nth evaluation in a row that does not improve."""
    trainer = _trainer(tmp_path, patience=patience)
    scores = iter([5.0, 4.0, 4.5, 4.6, 4.7, 1.0])
    monkeypatch.setattr(trainer, "dev_nll", lambda: next(scores))
    outcome = trainer.fit(TrainingBudget(max_steps=5))
    # Evaluations at steps 1..5: the best at step 2, then none better.
    assert outcome.stop_reason == ("early_stopping" if stop else "max_steps")
    assert outcome.steps == (stop or 5)
    assert outcome.best_dev_nll == 4.0
    assert trainer.checkpoints.best_manager.latest_checkpoint.endswith("ckpt-2")


def test_divergence_stops_with_resume_advice(tmp_path, monkeypatch):
    trainer = _trainer(tmp_path)
    trainer.fit(TrainingBudget(max_steps=2))  # checkpoint at step 2
    real_step = trainer.train_step
    monkeypatch.setattr(
        trainer, "train_step",
        lambda *batch: (tf.constant(math.nan),) + tuple(real_step(*batch)[1:]),
    )
    with pytest.raises(TrainingDiverged, match=r"became nan at step 3; the last good checkpoint is step 2"):
        trainer.fit(TrainingBudget(max_steps=5))


def test_restore_continues_counters_and_data(tmp_path):
    trainer = _trainer(tmp_path, optimizer="adam", learning_rate=0.01)
    trainer.fit(TrainingBudget(max_steps=4))
    weights = [w.numpy() for w in trainer.model.weights]
    again = _trainer(tmp_path, optimizer="adam", learning_rate=0.01)
    assert again.restore()
    assert int(again.step.numpy()) == 4 and int(again.sentences.numpy()) == 8
    for restored, saved in zip(again.model.weights, weights):
        assert (restored.numpy() == saved).all()


def test_the_budget_schedule_by_hand():
    from keras_nmt.training import scheduled_learning_rate

    config = variant_config("search50", {**FIXED_BATCH_SETTINGS, "lr_schedule": "budget", "learning_rate": 1.0,
                                         "warmup_steps": 4, "final_lr_fraction": 0.1})
    assert scheduled_learning_rate(config, 0, 0.0) == pytest.approx(0.25)  # warming up
    assert scheduled_learning_rate(config, 3, 0.0) == pytest.approx(1.0)
    assert scheduled_learning_rate(config, 10, 0.5) == pytest.approx(0.55)  # half way down
    assert scheduled_learning_rate(config, 99, 1.0) == pytest.approx(0.1)
    constant = variant_config("search50", FIXED_BATCH_SETTINGS)
    assert scheduled_learning_rate(constant, 99, 1.0) == constant.learning_rate
    assert TrainingBudget(max_steps=10, max_minutes=1.0).progress(5, 45.0) == pytest.approx(0.75)
    assert TrainingBudget().progress(5, 45.0) == 0.0


def test_a_budget_schedule_without_a_budget_is_refused(tmp_path):
    from keras_nmt.training import check_budget

    config = variant_config("search50", {**FIXED_BATCH_SETTINGS, "lr_schedule": "budget"})
    check_budget(config, TrainingBudget(max_minutes=1.0))
    check_budget(config.replace(lr_schedule="constant"), TrainingBudget())
    with pytest.raises(ConfigError, match="give --max-minutes or --max-steps"):
        check_budget(config, TrainingBudget())
    # A Trainer built by hand checks the same, before its first update.
    trainer = _trainer(tmp_path, lr_schedule="budget")
    with pytest.raises(ConfigError, match="give --max-minutes or --max-steps"):
        trainer.fit(TrainingBudget())
    assert int(trainer.step.numpy()) == 0


@pytest.mark.end_to_end
def test_the_schedule_ends_at_its_final_rate_also_across_resume(tmp_path):
    settings = dict(optimizer="adam", learning_rate=0.02, lr_schedule="budget", warmup_steps=2,
                    final_lr_fraction=0.1, patience=100, eval_every=100, checkpoint_every=5)
    whole = _trainer(tmp_path / "whole", **settings)
    whole.fit(TrainingBudget(max_steps=10))
    assert float(whole.optimizer.learning_rate) == pytest.approx(0.002, rel=1e-5)

    first = _trainer(tmp_path / "resumed", **settings)
    step_fn, calls = first.train_step, []

    def crash_after_five(*batch):
        calls.append(1)
        if len(calls) > 5:
            raise KeyboardInterrupt
        return step_fn(*batch)

    first.train_step = crash_after_five
    with pytest.raises(KeyboardInterrupt):
        first.fit(TrainingBudget(max_steps=10))
    again = _trainer(tmp_path / "resumed", **settings)
    assert again.restore(log=lambda text: None) and int(again.step.numpy()) == 5
    again.fit(TrainingBudget(max_steps=10))
    assert float(again.optimizer.learning_rate) == pytest.approx(0.002, rel=1e-5)
    for mine, theirs in zip(again.model.weights, whole.model.weights):  # the same updates
        np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-6)


def test_a_budget_schedule_needs_a_budget(tmp_path):
    trainer = _trainer(tmp_path, lr_schedule="budget")
    with pytest.raises(ConfigError, match="give --max-minutes or --max-steps"):
        trainer.fit(TrainingBudget())


def test_loss_scale_halves_on_overflow_and_doubles_after_a_run_of_finite_updates():
    from keras_nmt.training.optimizers import DynamicLossScale

    scale = DynamicLossScale(initial_scale=8.0, growth_steps=3)
    scale.adjust(tf.constant(False))
    assert float(scale.scale.numpy()) == 4.0 and int(scale.finite_steps.numpy()) == 0
    for expected in (4.0, 4.0, 8.0, 8.0):
        scale.adjust(tf.constant(True))
        assert float(scale.scale.numpy()) == expected
    assert int(scale.finite_steps.numpy()) == 1  # the count starts again after growing
    assert float(scale.scale_loss(tf.constant(1.5, tf.float16)).numpy()) == 12.0
    grads = scale.unscale([tf.constant([8.0, 16.0]),
                           tf.IndexedSlices(tf.constant([[8.0]]), tf.constant([2]), tf.constant([4, 1]))])
    np.testing.assert_array_equal(grads[0].numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(grads[1].values.numpy(), [[1.0]])


def test_float16_skips_an_update_whose_gradients_overflowed(tmp_path):
    trainer = _trainer(tmp_path, precision="mixed_float16", optimizer="adam", learning_rate=0.01)
    variables = trainer.model.trainable_variables
    before = [v.numpy() for v in variables]
    overflowed = [tf.fill(v.shape, np.inf) for v in variables]
    trainer.step_functions.apply(overflowed, variables, trainer.step_functions.finite(overflowed))
    for variable, value in zip(variables, before):
        np.testing.assert_array_equal(variable.numpy(), value)
    assert int(trainer.optimizer.iterations.numpy()) == 0
    assert float(trainer.loss_scale.scale.numpy()) == 2.0**14
    finite = [tf.ones(v.shape) for v in variables]
    trainer.step_functions.apply(finite, variables, trainer.step_functions.finite(finite))
    assert int(trainer.optimizer.iterations.numpy()) == 1
    assert any(not np.array_equal(v.numpy(), b) for v, b in zip(variables, before))


def test_sparse_rows_are_summed_before_the_global_norm():
    from keras_nmt.training.optimizers import combine_rows

    # Two rows for word 1 (3 and 4) sum to 7: the true norm is sqrt(7^2 + 1) = sqrt(50);
    # the parts' norm would be sqrt(3^2 + 4^2 + 1) = sqrt(26).
    rows = tf.IndexedSlices(tf.constant([[3.0], [1.0], [4.0]]), tf.constant([1, 0, 1]),
                            tf.constant([3, 1]))
    combined = combine_rows([rows, tf.constant([0.0])])
    np.testing.assert_array_equal(tf.convert_to_tensor(combined[0]).numpy(), [[1.0], [7.0], [0.0]])
    assert sorted(combined[0].indices.numpy()) == [0, 1]
    assert float(tf.linalg.global_norm(combined)) == pytest.approx(math.sqrt(50.0))


def test_the_projects_deprecation_warnings_are_not_filtered():
    import warnings

    # The suite ignores third-party DeprecationWarnings (pyproject.toml), not the
    # project's own: those announce option spellings that are going away.
    with warnings.catch_warnings(record=True) as seen:
        for module in ("keras_nmt.cli.train", "some_library"):
            warnings.warn_explicit(f"from {module}", DeprecationWarning, "x.py", 1,
                                   module=module, registry={})
    assert [str(w.message) for w in seen] == ["from keras_nmt.cli.train"]


def test_the_epoch_estimate_of_a_run_without_a_budget():
    from keras_nmt.training import EpochEstimate

    now = [0.0]
    estimate = EpochEstimate(train_pairs=10_000, steps=4, seconds=60.0, clock=lambda: now[0])
    now[0] = 30.0  # the first update built the graph: not timed
    assert estimate.update(64) is None
    said = []
    for sentences in (128, 192, 256, 320, 384):
        now[0] += 0.5  # 64 pairs in 0.5 s: 10,000 pairs in 78 s
        said.append(estimate.update(sentences))
    assert said[:3] == [None] * 3 and said[4] is None  # once, after 4 timed updates
    assert said[3].startswith("no --max-steps or --max-minutes: an epoch (10,000 pairs) takes "
                              "about 01:18 at the rate of the first 4 updates")
    # A slow model: 2 updates past the time limit are enough.
    slow = EpochEstimate(train_pairs=1000, steps=20, seconds=60.0, clock=lambda: now[0])
    slow.update(10)
    now[0] += 70.0
    assert slow.update(20) is None  # one update is not a rate
    now[0] += 70.0
    # 20 pairs in 140 s: 1,000 in 7,000 s
    assert "takes about 1:56:40 at the rate of the first 2 updates" in slow.update(30)
