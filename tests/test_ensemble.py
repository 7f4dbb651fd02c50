"""keras_nmt.decoding.ensemble: averaging models' probabilities, and which runs may be combined."""

import math
import shutil

import numpy as np
import pytest
import tensorflow as tf

from keras_nmt.decoding.ensemble import Ensemble, check_compatible
from keras_nmt.core.errors import EnsembleError, RunDirError
from keras_nmt.models.rnnsearch import TranslationModel
from keras_nmt.rundir.run_directory import RunDir
from keras_nmt.decoding.keras_translator import Translator

LINES = ["The man is here.", "", "The round red Italian knives are on the table.", "A dog."]


def peaked_run(source, target, seed):
    """A copy of run directory ``source`` whose best weights are redrawn with a fan-in
    scaled normal: peaked distributions, so beam search rankings have no near ties."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("tensorboard", "checkpoints", "best"))
    model = TranslationModel(RunDir(target).load_config())
    rng = np.random.default_rng(seed)
    for weight in model.weights:
        shape = tuple(weight.shape)
        std = 2.0 / np.sqrt(shape[0]) if len(shape) == 2 else 0.5
        weight.assign(rng.normal(0.0, std, shape).astype("float32"))
    tf.train.CheckpointManager(tf.train.Checkpoint(model=model), str(target / "best"), 1).save()
    return target


@pytest.fixture(scope="module")
def runs(tiny_run, tmp_path_factory):
    base = tmp_path_factory.mktemp("ensemble")
    return peaked_run(tiny_run, base / "a", seed=1), peaked_run(tiny_run, base / "b", seed=2)


@pytest.fixture(scope="module")
def single(runs):
    return Translator.from_run_dir(runs[0])


def test_step_is_the_log_of_the_mean_probability(single, runs):
    a = single.model
    b = Translator.from_run_dir(runs[1]).model
    source = tf.constant([[5, 6, 7, 3], [8, 3, 0, 0]])
    previous = tf.constant([2, 2])

    one = Ensemble([a])
    state, memory = one.encode(source)
    logits, new_state, attention = one.step(previous, state, memory)
    ref_state, ref_memory = a.encode(source)
    ref_logits, ref_new_state, ref_attention = a.step(previous, ref_state, ref_memory)
    np.testing.assert_allclose(logits, tf.nn.log_softmax(ref_logits), atol=1e-6)
    np.testing.assert_allclose(new_state[0], ref_new_state, atol=1e-6)
    np.testing.assert_allclose(attention, ref_attention, atol=1e-6)

    two = Ensemble([a, b])
    state, memory = two.encode(source)
    assert isinstance(state, tuple) and isinstance(memory, tuple) and len(state) == 2
    logits, new_state, attention = two.step(previous, state, memory)
    pa = tf.nn.softmax(a.step(previous, *a.encode(source))[0])
    pb = tf.nn.softmax(b.step(previous, *b.encode(source))[0])
    np.testing.assert_allclose(np.exp(logits), (pa + pb) / 2, rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(tf.reduce_logsumexp(logits, axis=-1), 0.0, atol=1e-5)
    attention_b = b.step(previous, *b.encode(source))[2]
    np.testing.assert_allclose(attention, (ref_attention + attention_b) / 2, atol=1e-6)
    assert two.config.tgt_vocab_size == a.config.tgt_vocab_size
    assert math.isclose(two.config.max_decode_ratio, a.config.max_decode_ratio)


def test_ensemble_of_one_translates_like_its_model(single):
    alone = single.translate(LINES, beam_size=3, nbest=2)
    one = Translator(Ensemble([single.model]), single.source_codec, single.target_codec)
    wrapped = one.translate(LINES, beam_size=3, nbest=2)
    for x, y in zip(alone, wrapped):
        assert [h.text for h in x.hypotheses] == [h.text for h in y.hypotheses]
        np.testing.assert_allclose([h.score for h in x.hypotheses], [h.score for h in y.hypotheses],
                                   atol=1e-5)


def test_two_copies_of_a_model_translate_like_one(single, runs):
    twice = Translator.from_run_dirs([runs[0], runs[0]])
    assert isinstance(twice.model, Ensemble) and len(twice.model) == 2
    assert twice.model.models[0] is not twice.model.models[1]
    alone = single.translate(LINES, beam_size=3, nbest=2, with_attention=True)
    doubled = twice.translate(LINES, beam_size=3, nbest=2, with_attention=True)
    for x, y in zip(alone, doubled):
        assert [h.text for h in x.hypotheses] == [h.text for h in y.hypotheses]
        np.testing.assert_allclose([h.score for h in x.hypotheses], [h.score for h in y.hypotheses],
                                   atol=1e-4)
        if x.attention is not None:
            np.testing.assert_allclose(x.attention, y.attention, atol=1e-5)
    assert isinstance(Translator.from_run_dirs([runs[0]]).model, TranslationModel)


def _copy_metadata(run, target):
    shutil.copytree(run, target, ignore=shutil.ignore_patterns("tensorboard"))
    return target


def test_mismatched_vocabularies_name_both_runs(runs, tmp_path):
    other = _copy_metadata(runs[0], tmp_path / "other")
    vocab = (other / "vocab.fr.txt").read_text(encoding="utf-8").split("\n")
    vocab[10], vocab[11] = vocab[11], vocab[10]
    (other / "vocab.fr.txt").write_text("\n".join(vocab), encoding="utf-8")
    with pytest.raises(EnsembleError) as info:
        Translator.from_run_dirs([runs[0], other])
    message = str(info.value)
    assert str(runs[0]) in message and str(other) in message
    assert "target vocabularies (vocab.fr.txt) differ" in message and "line 11" in message

    shorter = _copy_metadata(runs[0], tmp_path / "shorter")
    lines = (shorter / "vocab.en.txt").read_text(encoding="utf-8").splitlines()
    (shorter / "vocab.en.txt").write_text("\n".join(lines[:-1]) + "\n", encoding="utf-8")
    with pytest.raises(EnsembleError, match="source vocabularies"):
        check_compatible([RunDir(runs[0]).inspect(), RunDir(shorter).inspect()])

    swapped = _copy_metadata(runs[0], tmp_path / "swapped")
    data = (swapped / "data.json").read_text()
    (swapped / "data.json").write_text(data.replace('"src": "en"', '"src": "de"'))
    (swapped / "vocab.en.txt").rename(swapped / "vocab.de.txt")
    with pytest.raises(EnsembleError, match="en->fr and de->fr"):
        Translator.from_run_dirs([runs[0], swapped])


def test_unusable_run_directories(runs, tmp_path):
    with pytest.raises(RunDirError, match="run directory not found"):
        Translator.from_run_dirs([runs[0], tmp_path / "nowhere"])
    with pytest.raises(RunDirError, match="no config.json"):
        Translator.from_run_dir(tmp_path)
    bare = _copy_metadata(runs[0], tmp_path / "bare")
    shutil.rmtree(bare / "best")
    with pytest.raises(RunDirError, match="no trained weights"):
        Translator.from_run_dir(bare)
    with pytest.raises(ValueError, match="weights"):
        RunDir(runs[0]).inspect(weights="newest")
    with pytest.raises(RunDirError, match="no trained weights"):
        RunDir(runs[0]).inspect(weights="last")  # the copy has only best/
    with pytest.raises(EnsembleError):
        Ensemble([])
