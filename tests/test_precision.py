"""--precision and --jit: each setting trains with a finite loss and resumes; the beam
search compiled with XLA finds the same tokens as without."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf
from test_training import _batches, _trainer

from keras_nmt import search
from keras_nmt.config import variant_config
from keras_nmt.models import TranslationModel
from keras_nmt.training import Limits


@pytest.fixture
def policy():
    def use(name):
        keras.mixed_precision.set_global_policy(name)

    yield use
    keras.mixed_precision.set_global_policy("float32")


@pytest.mark.parametrize("precision, jit", [
    ("float32", True),
    ("mixed_bfloat16", False),
    ("mixed_float16", False),
])
def test_precision_trains_and_resumes(tmp_path, policy, precision, jit):
    policy(precision)
    trainer = _trainer(tmp_path, optimizer="adam", learning_rate=0.01, precision=precision,
                       checkpoint_every=2)
    trainer.train_step = tf.function(trainer._train_step, jit_compile=jit)
    assert trainer.model.decoder.compute_dtype == precision.replace("mixed_", "")
    outcome = trainer.fit(Limits(max_steps=2))
    assert math.isfinite(outcome.train_nll) and outcome.train_nll > 0
    # Variables stay float32 whatever the computation dtype.
    assert {w.dtype for w in trainer.model.weights} == {"float32"}
    if precision == "mixed_float16":
        assert isinstance(trainer.optimizer, keras.optimizers.LossScaleOptimizer)
    weights = [w.numpy() for w in trainer.model.weights]
    again = _trainer(tmp_path, optimizer="adam", learning_rate=0.01, precision=precision,
                     checkpoint_every=2)
    assert again.restore(log=lambda text: None)
    assert int(again.step.numpy()) == 2
    for restored, saved in zip(again.model.weights, weights):
        np.testing.assert_array_equal(restored.numpy(), saved)
    outcome = again.fit(Limits(max_steps=3))
    assert outcome.steps == 3 and math.isfinite(outcome.train_nll)


def test_beam_search_under_jit_finds_the_same_tokens():
    keras.utils.set_random_seed(3)
    config = variant_config("search50", {"embedding": 8, "hidden": 8, "attention": 8,
                                         "maxout": 4, "src_vocab_size": 12, "tgt_vocab_size": 12})
    model = TranslationModel(config)
    rng = np.random.default_rng(0)
    for weight in model.weights:  # peaked distributions: few ties between hypotheses
        weight.assign(rng.normal(0, 1.5 / np.sqrt(weight.shape[0]), weight.shape).astype("float32"))
    (source, _), _ = next(iter(_batches()))
    source = tf.concat([source, tf.constant([[7, 8, 9], [3, 0, 0]])], axis=0)
    arguments = (source, tf.constant(3), tf.constant(1.0), tf.constant(False), tf.constant(0))
    plain = search.make_translate_fn(model, nbest=2)(*arguments)
    compiled = search.make_translate_fn(model, nbest=2, jit_compile=True)(*arguments)
    np.testing.assert_array_equal(compiled["ids"].numpy(), plain["ids"].numpy())
    np.testing.assert_array_equal(compiled["lengths"].numpy(), plain["lengths"].numpy())
    np.testing.assert_allclose(compiled["scores"].numpy(), plain["scores"].numpy(), rtol=1e-4, atol=1e-5)
