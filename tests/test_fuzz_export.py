"""Hostile and odd input through the exported model (the contract: docs/export-serving.md):
the SavedModel's ``serving_default`` signature and the onnxruntime path never fail and
return one output per input line, for any Unicode text (see tests/fuzzing.py for the
strategies and KERAS_NMT_FUZZ_EXAMPLES). The export decodes with vocabulary selection
(``--shortlist``), the harder path: a batch's candidate words depend on its input.

The onnxruntime path is :class:`keras_nmt.decoding.onnx_translator.OnnxTranslator`.
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402,F401  (registers the text ops the SavedModel uses)
from fuzzing import EXAMPLES, LINE, LINES_PER_BATCH, fuzz  # noqa: E402

from keras_nmt.text import word as tokenizer  # noqa: E402
from keras_nmt.text.sentences import split_sentences  # noqa: E402
from keras_nmt.decoding import onnx_translator  # noqa: E402
from keras_nmt.decoding.keras_translator import default_max_source_len  # noqa: E402

NAME = "nmt"


@pytest.fixture(scope="module")
def export_dir(tiny_selecting_export):
    """tiny_run exported once (conftest) with --onnx --shortlist 5,2 --int8."""
    return tiny_selecting_export


@pytest.fixture(scope="module")
def serving_default(export_dir):
    return tf.saved_model.load(str(export_dir / NAME / "1")).signatures["serving_default"]


@pytest.fixture(scope="module")
def max_source_len(tiny_run):
    import json

    config = json.loads((tiny_run / "config.json").read_text())
    return default_max_source_len(config["max_len"])


@fuzz(EXAMPLES)
@given(lines=st.lists(LINE, min_size=1, max_size=LINES_PER_BATCH))
def test_savedmodel_signature_answers_every_line(serving_default, max_source_len, lines):
    outputs = serving_default(sentences=tf.constant(lines, tf.string))
    translations = [t.decode("utf-8") for t in outputs["translations"].numpy()]
    scores = outputs["scores"].numpy()
    truncated = outputs["truncated"].numpy()
    assert len(translations) == len(scores) == len(truncated) == len(lines)
    for line, translation, score, cut in zip(lines, translations, scores, truncated):
        tokens = tokenizer.tokenize(line, "en")
        if not tokens:
            assert translation == "" and score == 0.0
        # The graph tokenizer may split a code point newer than Unicode 14 differently
        # (see test_fuzz.py): compare the truncation only when nothing is cut.
        if len(tokens) <= max_source_len // 2:
            assert cut == 0


@fuzz(EXAMPLES)
@given(lines=st.lists(LINE, min_size=1, max_size=LINES_PER_BATCH))
def test_onnx_translator_answers_every_line(export_dir, max_source_len, lines):
    translator = _onnx_translator(export_dir)
    translations = translator.translate(lines, beam_size=2)
    assert len(translations) == len(lines)
    for line, translation in zip(lines, translations):
        tokens = tokenizer.tokenize(line, "en")
        assert translation.truncated == sum(  # each sentence is cut on its own
            max(0, len(tokenizer.tokenize(sentence, "en")) - max_source_len)
            for sentence in split_sentences(line, "en"))
        assert "\n" not in translation.text
        if not tokens:
            assert translation.text == "" and translation.score == 0.0


_LOADED = {}


def _onnx_translator(export_dir):
    if export_dir not in _LOADED:
        _LOADED[export_dir] = onnx_translator.OnnxTranslator.from_export_dir(export_dir, name=NAME)
    return _LOADED[export_dir]
