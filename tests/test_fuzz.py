"""Hostile and odd input, property-based: any Unicode text (every category, control
characters, emoji, very long lines; no surrogates, which UTF-8 cannot hold) through
the tokenizer, its graph twin, Translator.translate and ``keras-nmt translate``.

KERAS_NMT_FUZZ_EXAMPLES sets how many examples (batches of 1-8 lines) the tokenizer and
Translator properties draw (default 50, for CI; a closing-note run uses 2000 or more);
the command-line property, which loads the model for each example, draws one batch of
up to 50 lines per 50 examples. The examples are the same on every run (tests/conftest.py);
``pytest --hypothesis-profile explore`` draws new ones.
"""

import io
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from keras_nmt.cli import translate
from keras_nmt.text import sentences_graph, word as tokenizer, word_graph as text
from keras_nmt.text.sentences import split_sentences
from keras_nmt.translator import Translator

EXAMPLES = int(os.environ.get("KERAS_NMT_FUZZ_EXAMPLES", "50"))
LINES_PER_BATCH = 8

# Surrogates (Cs) are excluded: they cannot be encoded in UTF-8.
ANY_CHAR = st.characters(exclude_categories=("Cs",))
# The two regex engines carry different Unicode versions (the regex package is newer
# than TensorFlow's RE2): a code point assigned in between, say a letter of a new CJK
# extension, is a letter to one and not to the other. Agreement is checked on code
# points assigned as of Python's unicodedata (Unicode 14) plus all the rest
# (control, format, private use...); the other properties take any code point.
ASSIGNED_CHAR = st.characters(exclude_categories=("Cs", "Cn"))
EMOJI = st.sampled_from(["😀", "👍🏽", "👨\u200d👩\u200d👧", "🇫🇷", "\u2764\ufe0f", "🏳️\u200d🌈"])
WORDS = st.sampled_from(["the", "man", "is", "here", ".", ",", "l'", "homme", "'s", "3.5", "..."])


def line_strategy(chars):
    return st.one_of(
        st.text(chars, max_size=60),
        st.text(chars, min_size=500, max_size=3000),  # very long, every category
        st.lists(st.one_of(WORDS, EMOJI, st.text(chars, max_size=3)), max_size=400).map(" ".join),
        st.text(st.sampled_from(" \t\r\x00\x0b\x0c\x1c\x85\u00a0\u2028\u2029\u202f\u3000\ufeff"),
                max_size=20),  # nothing but spaces and separators
    )


LINE = line_strategy(ANY_CHAR)


def fuzz(examples: int):
    return settings(max_examples=max(1, examples), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


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
