"""--precision and --jit: each setting trains with a finite loss and resumes; the beam
search compiled with XLA finds the same tokens as without; and each precision works on
every path a user takes: train.py to its report, Translator (beam and greedy), the
SavedModel through both loaders (onnxruntime runs the same float32 model)."""

import json
import math

import keras
import numpy as np
import pytest
import tensorflow as tf
from support import fixed_batch_trainer as _trainer, fixed_batches as _batches

from keras_nmt import search
from keras_nmt.core.config import PRECISIONS, variant_config
from keras_nmt.models.rnnsearch import TranslationModel
from keras_nmt.training import TrainingBudget
from support import savedmodel_loaders


@pytest.mark.parametrize("precision, jit", [
    # XLA's compilations take seconds: float32 under jit trains in the default run's
    # test_jit_training_compiles_once_per_width, and resumes under jit in float16's case.
    pytest.param("float32", True, marks=pytest.mark.slow),
    ("mixed_bfloat16", False),
    ("mixed_float16", False),
    ("mixed_float16", True),  # a GPU's default: loss scaling's skipped update under XLA
])
@pytest.mark.end_to_end
def test_precision_trains_and_resumes(tmp_path, precision, jit):
    trainer = _trainer(tmp_path, optimizer="adam", learning_rate=0.01, precision=precision,
                       checkpoint_every=2)
    trainer.train_step = tf.function(trainer.step_functions.train_step, jit_compile=jit)
    assert trainer.model.decoder.compute_dtype == precision.replace("mixed_", "")
    outcome = trainer.fit(TrainingBudget(max_steps=2))
    assert math.isfinite(outcome.train_nll) and outcome.train_nll > 0
    # Variables stay float32 whatever the computation dtype.
    assert {w.dtype for w in trainer.model.weights} == {"float32"}
    # Only float16 scales the loss; the scale is part of the checkpoint.
    assert (trainer.loss_scale is not None) == (precision == "mixed_float16")
    latest = trainer.checkpoints.manager.latest_checkpoint
    saved = {name for name, _ in tf.train.list_variables(latest)}
    assert ("loss_scale/scale/.ATTRIBUTES/VARIABLE_VALUE" in saved) == (precision == "mixed_float16")
    weights = [w.numpy() for w in trainer.model.weights]
    again = _trainer(tmp_path, optimizer="adam", learning_rate=0.01, precision=precision,
                     checkpoint_every=2)
    assert again.restore(log=lambda text: None)
    assert int(again.step.numpy()) == 2
    for restored, saved in zip(again.model.weights, weights):
        np.testing.assert_array_equal(restored.numpy(), saved)
    outcome = again.fit(TrainingBudget(max_steps=3))
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


@pytest.mark.parametrize("precision", PRECISIONS)
def test_train_py_writes_the_summary(precision_runs, precision):
    summary = json.loads((precision_runs[precision] / "summary.json").read_text(encoding="utf-8"))
    assert summary["config"]["precision"] == precision
    assert summary["precision_reason"] == f"--precision {precision}"
    # --set, through the command line
    assert summary["config"]["label_smoothing"] == (0.0 if precision == "float32" else 0.1)
    assert summary["updates"] == 20
    assert math.isfinite(summary["held_out"]["bleu"]) and summary["held_out"]["sentences"] == 40
    assert math.isfinite(summary["dev_nll"]) and math.isfinite(summary["train_nll"])


@pytest.mark.parametrize("precision", PRECISIONS)
def test_translator_decodes_in_the_runs_precision(precision_runs, tiny_corpus, precision):
    from keras_nmt.decoding.keras_translator import Translator

    translator = Translator.from_run_dir(precision_runs[precision])
    assert translator.model.compute_dtype == precision.replace("mixed_", "")
    lines = (tiny_corpus / "valid.en").read_text(encoding="utf-8").splitlines()[:12] + [""]
    found = {}
    for beam in (1, 3):
        # With vocabulary selection too: the gathered output rows and their masked
        # padding columns are computed in the run's precision.
        for shortlist in (None, (5, 2)):
            results = translator.translate(lines, beam_size=beam, nbest=min(beam, 2),
                                           shortlist=shortlist)
            assert len(results) == len(lines) and results[-1].text == ""
            assert all(math.isfinite(h.score) for r in results for h in r.hypotheses)
            found[beam, shortlist] = any(r.text for r in results[:-1])
    # 20 updates: EOS is often the likeliest first word so early, and greedy may end every
    # sentence at once (the bfloat16 run did on an AMD EPYC with AVX512_BF16); a beam of
    # 3 keeps hypotheses that go on, so a decode that works finds words there.
    assert found[3, None] and found[3, (5, 2)]


def test_the_three_precisions_find_the_same_tokens(precision_runs, tiny_corpus):
    """The same float32 weights decoded in each precision: the same greedy output where
    the margins allow, so on most sentences of a trained model."""
    from keras_nmt.decoding.keras_translator import Translator

    lines = (tiny_corpus / "valid.en").read_text(encoding="utf-8").splitlines()
    outputs = {}
    for precision in PRECISIONS:
        translator = Translator.from_run_dir(precision_runs["float32"], precision=precision)
        outputs[precision] = [r.tokens for r in translator.translate(lines, beam_size=1)]
    for precision in PRECISIONS[1:]:
        same = sum(a == b for a, b in zip(outputs["float32"], outputs[precision]))
        print(f"{precision}: {same} of {len(lines)} greedy outputs equal to float32's")
        assert same >= 0.7 * len(lines), (precision, same, len(lines))


@pytest.mark.parametrize("precision", PRECISIONS[1:])
def test_a_mixed_precision_run_exports_and_serves(precision_runs, precision, tmp_path):
    """Exports compute in float32 (the weights are float32): the SavedModel through both
    loaders translates as the float32 Translator of the same weights. The export loads
    the run's model in float32 once, and both the SavedModel and the ONNX conversion are
    made of that model: tiny_export's ONNX covers the conversion (~20 s each)."""
    from keras_nmt.cli import export
    from keras_nmt.decoding.keras_translator import Translator

    run = precision_runs[precision]
    assert export.main([str(run), "--out", str(tmp_path)]) == 0
    lines = ["The queen is strange .", "", "an uncle draws the cars ."]
    expected = [t.text for t in Translator.from_run_dir(run, precision="float32")
                .translate(lines, beam_size=2)]
    for name, model in savedmodel_loaders(tmp_path).items():
        out = model.run("serving_default", sentences=lines)
        assert [t.decode("utf-8") for t in out["translations"]] == expected, name
        assert np.isfinite(out["scores"]).all()


def _tiny_pipeline(tiny_corpus, length_multiple, batch_size=8):
    from keras_nmt.data import pipelines as data
    from keras_nmt.corpus.readers import find_corpus
    from keras_nmt.corpus.scan import scan_training_split
    from keras_nmt.text.word_graph import WordEncoder
    from keras_nmt.text.vocab import Vocabulary

    files = find_corpus(tiny_corpus, "en", "fr")["train"]
    stats = scan_training_split(files, "en", "fr", 40)
    encoders = (WordEncoder(Vocabulary.from_counts(stats.source_counts, 60), "en"),
                WordEncoder(Vocabulary.from_counts(stats.target_counts, 60), "fr"))
    return data.training_batches(files, *encoders, data.Batching(
        max_len=40, batch_size=batch_size, sort_batches=4, seed=1, shuffle_buffer=100,
        length_multiple=length_multiple))


def test_bounded_shapes_pad_to_a_few_widths(tiny_corpus):
    exact = list(_tiny_pipeline(tiny_corpus, 0).take(60))
    bounded = list(_tiny_pipeline(tiny_corpus, 8).take(60))
    exact_shapes = {(s.shape, t.shape) for (s, t), _ in exact}
    bounded_shapes = {(s.shape, t.shape, o.shape) for (s, t), o in bounded}
    assert len(exact_shapes) > 10  # a corpus of many lengths: a new shape most batches
    assert {shape[0] for shape in bounded_shapes} <= {(8, w) for w in range(8, 48, 8)}
    assert all(a == b == c for a, b, c in bounded_shapes)
    for ((s0, t0), o0), ((s1, t1), o1) in zip(exact, bounded):  # same pairs, more padding
        for small, large in ((s0, s1), (t0, t1), (o0, o1)):
            width = small.shape[1]
            np.testing.assert_array_equal(large[:, :width].numpy(), small.numpy())
            assert not large[:, width:].numpy().any()


@pytest.mark.end_to_end
def test_jit_training_compiles_once_per_width(tmp_path, tiny_corpus):
    keras.utils.set_random_seed(0)
    config = variant_config("search50", {"embedding": 8, "hidden": 8, "attention": 8,
                                         "maxout": 4, "src_vocab_size": 60,
                                         "tgt_vocab_size": 60, "batch_size": 8,
                                         "length_multiple": 8, "eval_every": 1000})
    from keras_nmt.rundir.run_directory import RunDir
    from keras_nmt.training import Trainer

    batches = _tiny_pipeline(tiny_corpus, 8)
    trainer = Trainer(config, TranslationModel(config), RunDir(tmp_path), batches,
                      lambda: batches.take(1), train_pairs=400, jit_compile=True)
    # 4 batches of 2 widths (16, 40, 16, 40): a compilation for each new width, none for
    # a width seen before (each compilation takes seconds: two show the rule).
    outcome = trainer.fit(TrainingBudget(max_steps=4))
    assert outcome.steps == 4 and math.isfinite(outcome.train_nll)
    widths = [s.shape[1] for (s, _), _ in _tiny_pipeline(tiny_corpus, 8).take(4)]
    assert 1 < len(set(widths)) < len(widths)
    assert trainer.compilations() == len(set(widths)) <= 5


def test_translator_under_jit_decodes_whole_blocks_alike(tiny_run, tiny_corpus):
    from keras_nmt.decoding.keras_translator import Translator

    plain = Translator.from_run_dir(tiny_run)
    compiled = Translator(plain.model, plain.source_codec, plain.target_codec, jit_compile=True)
    lines = (tiny_corpus / "valid.en").read_text(encoding="utf-8").splitlines()[:10]
    for a, b in zip(plain.translate(lines, beam_size=2, batch_size=4),
                    compiled.translate(lines, beam_size=2, batch_size=4)):
        assert a.tokens == b.tokens and a.score == pytest.approx(b.score, abs=1e-4)
    assert compiled._search_fn(1, attention=False).experimental_get_tracing_count() == 1


def test_translator_under_jit_keeps_constraints_in_a_batch_that_is_not_full(tiny_run, tiny_corpus):
    """Under jit the source batch is padded to batch_size rows; the constraints' arrays
    are padded with it (a batch of 3 in 4 rows failed on a shape mismatch, and one row
    was broadcast to every row)."""
    from keras_nmt.decoding.constraints import LineConstraints
    from keras_nmt.decoding.keras_translator import Translator

    plain = Translator.from_run_dir(tiny_run)
    compiled = Translator(plain.model, plain.source_codec, plain.target_codec, jit_compile=True)
    lines = (tiny_corpus / "valid.en").read_text(encoding="utf-8").splitlines()[:3]
    word = plain.target_vocab.tokens[10]
    constraints = [LineConstraints((word,)), None, LineConstraints(avoid=(word,))]
    for size in (4, 1):
        expected = plain.translate(lines, beam_size=2, batch_size=size, constraints=constraints)
        got = compiled.translate(lines, beam_size=2, batch_size=size, constraints=constraints)
        assert [t.tokens for t in got] == [t.tokens for t in expected]
        assert [t.unmet for t in got] == [t.unmet for t in expected]
        assert word in got[0].tokens or got[0].unmet == (word,)
        assert word not in got[2].tokens
