"""Hostile and odd input, property-based: any Unicode text (every category, control
characters, emoji, very long lines; no surrogates, which UTF-8 cannot hold) through
the tokenizer, its graph twin, Translator.translate and ``keras-nmt translate``.

The strategies and how many examples are drawn: tests/fuzzing.py. The command-line
property, which loads the model for each example, draws one batch of up to 50 lines per
50 examples.
"""

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from keras_nmt.cli import translate
from keras_nmt.text import sentences_graph, word as tokenizer, word_graph as text
from keras_nmt.text.sentences import split_sentences
from keras_nmt.decoding.keras_translator import Translator
from fuzzing import ASSIGNED_CHAR, EXAMPLES, LINE, LINES_PER_BATCH, fuzz, line_strategy

def test_fuzzing_is_repeatable(request):
    """The examples are the same on every run (conftest's profile), unless asked otherwise."""
    assert settings.get_profile("repeatable").derandomize
    if request.config.getoption("--hypothesis-profile", None) in (None, "repeatable"):
        assert settings.default.derandomize and settings.default.database is None
        assert fuzz(EXAMPLES).derandomize


@pytest.mark.parametrize("lang", ["en", "fr"])
@fuzz(EXAMPLES)
@given(lines=st.lists(line_strategy(ASSIGNED_CHAR), min_size=1, max_size=LINES_PER_BATCH))
def test_graph_tokenizer_agrees_with_python_on_any_text(lang, lines):
    expected = [tokenizer.tokenize(line, lang) for line in lines]
    for tokens in expected:
        assert all(token and not any(c.isspace() for c in token) for token in tokens)
    graph = [[t.decode("utf-8") for t in row] for row in text.tokenize(lines, lang).to_list()]
    assert graph == expected


@pytest.mark.parametrize("lang", ["en", "fr"])
@fuzz(EXAMPLES)
@given(lines=st.lists(line_strategy(ASSIGNED_CHAR), min_size=1, max_size=LINES_PER_BATCH))
def test_graph_sentence_splitter_agrees_with_python_on_any_text(lang, lines):
    expected = [split_sentences(line, lang) for line in lines]
    for line, found in zip(lines, expected):
        assert found == [line] or all(sentence.strip() for sentence in found)
    graph = [[s.decode("utf-8") for s in row]
             for row in sentences_graph.split(lines, lang).to_list()]
    assert graph == expected


@pytest.fixture(scope="module")
def translator(tiny_run):
    return Translator.from_run_dir(tiny_run)


@fuzz(EXAMPLES)
@given(lines=st.lists(LINE, min_size=1, max_size=LINES_PER_BATCH))
def test_translator_returns_one_translation_per_line(translator, lines):
    # With vocabulary selection: a batch's candidate words come from its input.
    translations = translator.translate(lines, beam_size=2, shortlist=(5, 2))
    assert len(translations) == len(lines)
    for line, translation in zip(lines, translations):
        assert isinstance(translation.text, str) and "\n" not in translation.text
        tokens = tokenizer.tokenize(line, "en")
        assert translation.truncated == sum(  # each sentence is cut on its own
            max(0, len(tokenizer.tokenize(sentence, "en")) - translator.max_source_len)
            for sentence in split_sentences(line, "en"))
        if not tokens:
            assert translation.text == "" and translation.score == 0.0


# The command line reads lines split on "\n" only, so a drawn line must not hold one.
CLI_LINE = LINE.map(lambda line: line.replace("\n", " "))
CLI_BATCH = 50  # lines per command run (each run loads the model)


@fuzz(max(1, EXAMPLES // CLI_BATCH))
@given(lines=st.lists(CLI_LINE, min_size=1, max_size=CLI_BATCH))
def test_translate_command_writes_one_line_per_input_line(tiny_run, lines):
    stdin = io.BytesIO("".join(line + "\n" for line in lines).encode("utf-8"))
    stdout, stderr = io.StringIO(), io.StringIO()
    status = translate.main([str(tiny_run), "--beam", "2", "--quiet"], stdin=stdin,
                            stdout=stdout, stderr=stderr)
    assert status == 0, stderr.getvalue()
    output = stdout.getvalue()
    assert output.endswith("\n") and output.count("\n") == len(lines)
