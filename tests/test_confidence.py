"""The model's confidence in a translation (keras_nmt.decoding.confidence): its formulas, the word
figures against the output's words for word and SentencePiece models, the Keras and
onnxruntime paths, ``--min-confidence`` and ``score --confidence``."""

import io
import json
import math
import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support import as_older_export, edit_json, onnx_files
from keras_nmt.cli.common import LOW_CONFIDENCE_MARK
from keras_nmt.cli.streaming import Output
from keras_nmt.decoding.confidence import Confidence, confidence_of, join_confidences, word_of_tokens
from keras_nmt.core.constants import EOS_ID
from keras_nmt.core.errors import ExportError
from keras_nmt.decoding.onnx_translator import OnnxTranslator
from keras_nmt.text.word import detokenize, token_words, tokenize
from keras_nmt.decoding.translation import Translation, join_translations

LINES = ["The man is here.", "", "She sees the small dog. The dog is big.",
         "The children eat bread in the house."]


def french(tokens):
    return detokenize(tokens, "fr")


def pieces(tokens):
    """SentencePiece's rule: a piece that starts with ▁ begins a word."""
    return "".join(tokens).replace("\u2581", " ").strip()


def test_a_word_tokens_belong_to_the_word_the_detokenizer_makes_of_them():
    tokens = tokenize("L'homme, dit-il, n'est pas là.", "fr")
    assert tokens == ["L'", "homme", ",", "dit-il", ",", "n'", "est", "pas", "là", "."]
    assert word_of_tokens(tokens, french)[1] == [(0,), (0,), (0,), (1,), (1,), (2,), (2,),
                                                 (3,), (4,), (4,)]
    found = confidence_of(np.log([0.9, 0.5, 0.8, 0.7, 0.6, 0.9, 0.4, 1.0, 0.3, 0.95, 0.5]),
                          tokens, french)
    assert found.words == ("L'homme,", "dit-il,", "n'est", "pas", "là.")
    # Each word: its least probable token; EOS (the last) counts for the sentence only.
    np.testing.assert_allclose(found.word_confidences, [0.5, 0.6, 0.4, 1.0, 0.3])
    assert found.tokens == 11
    assert found.sentence == pytest.approx(
        math.exp(np.mean(np.log([0.9, 0.5, 0.8, 0.7, 0.6, 0.9, 0.4, 1.0, 0.3, 0.95, 0.5]))))


# Tokens the word tokenizer makes, chosen for the rules that glue them: elisions and
# clitics, quotes (paired or not), punctuation that attaches left or right, and empty ones.
GLUED_TOKENS = ["a", "chat", "l'", "qu'", "'s", "n't", '"', ".", "...", ",", "!", "?", "(",
                ")", "[", "«", "»", "“", "”", "/", "’", "$", "%", "…", "C’est", "3.5", ":",
                "-", "'", "''", "€", "", "aujourd'hui", "km/h"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(GLUED_TOKENS), max_size=12),
       st.sampled_from(["fr", "en", "de", "zh"]))
def test_the_word_codecs_one_pass_gives_the_prefix_rules_words(tokens, lang):
    words, owners = token_words(tokens, lang)
    assert words == tuple(detokenize(tokens, lang).split())
    assert (words, owners) == word_of_tokens(tokens, lambda some: detokenize(some, lang))


@pytest.fixture(scope="module")
def glued_decoders():
    """Graph word decoders (keras_nmt.text.word_graph, what a SavedModel writes with) over
    a vocabulary of GLUED_TOKENS and a few that hold space-like characters."""
    from keras_nmt.text.word_graph import WordEncoder
    from keras_nmt.text.vocab import RESERVED, Vocabulary

    vocabulary = Vocabulary(list(RESERVED) + [t for t in GLUED_TOKENS if t] + SPACED_TOKENS)
    return vocabulary, {lang: WordEncoder(vocabulary, lang) for lang in ("fr", "en", "zh")}


# Tokens with characters str.split() splits on and TensorFlow's ASCII-only split does not.
SPACED_TOKENS = ["10\u00a0000", "a\u2009b", "x\u3000y"]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.sampled_from([t for t in GLUED_TOKENS if t] + SPACED_TOKENS),
                         max_size=9), min_size=1, max_size=4),
       st.sampled_from(["fr", "en", "zh"]))
def test_the_savedmodels_word_figures_are_the_prefix_rules(glued_decoders, outputs, lang):
    """keras_nmt.decoding.confidence_graph gives each output the words and figures
    keras_nmt.decoding.confidence gives it from the same log-probabilities (a batch of outputs of
    different lengths, space-like characters and glued tokens included)."""
    import tensorflow as tf

    from keras_nmt.decoding.confidence_graph import word_confidences

    vocabulary, decoders = glued_decoders
    decoder = decoders[lang]
    longest = max(len(tokens) for tokens in outputs) + 1
    ids = np.zeros([len(outputs), longest], np.int32)
    logprobs = np.zeros([len(outputs), longest], np.float32)
    rng = np.random.default_rng(len(outputs) * 100 + longest)
    for row, tokens in enumerate(outputs):
        ids[row, :len(tokens) + 1] = vocabulary.encode(tokens) + [EOS_ID]
        logprobs[row, :len(tokens) + 1] = np.log(rng.uniform(0.05, 1.0, len(tokens) + 1))

    def decode_text(some):
        shape = tf.shape(some)
        return tf.reshape(decoder.decode(tf.reshape(some, [-1, shape[2]])), shape[:2])

    texts = decode_text(tf.constant(ids)[:, None, :])[:, 0]
    words, figures = word_confidences(tf.constant(ids), tf.constant(logprobs),
                                      tf.constant([len(t) for t in outputs], tf.int32),
                                      texts, decode_text)
    for row, tokens in enumerate(outputs):
        expected = confidence_of(logprobs[row, :len(tokens) + 1], tokens,
                                 lambda some: detokenize(some, lang))
        assert tuple(w.decode("utf-8") for w in words[row].numpy()) == expected.words
        np.testing.assert_allclose(figures[row].numpy(), expected.word_confidences, rtol=1e-5)


def test_the_savedmodel_s_word_figures_follow_the_words_as_unk_replacement_wrote_them():
    """A replacement of two words (a dictionary target with a space) and a copied comma:
    each later word keeps its own token's figure, as in Python (issue: the prefixes were
    decoded with <unk> in place, so every later figure landed one word off)."""
    import tensorflow as tf

    from keras_nmt.core.constants import UNK, UNK_ID
    from keras_nmt.decoding.confidence_graph import word_confidences
    from keras_nmt.decoding.unk_replace_graph import UnknownWords
    from keras_nmt.text.vocab import RESERVED, Vocabulary

    vocabulary = Vocabulary(list(RESERVED) + ["le", "chat", "dort", "."])
    replacer = UnknownWords(vocabulary, "fr", {"Wroclaw": "New York"})
    source = tf.ragged.constant([["le", "Wroclaw", "cat", ",", "sleeps"]])
    output = ["le", UNK, "chat", UNK, "dort", "."]
    ids = tf.constant([[vocabulary.encode(output) + [EOS_ID]]], tf.int32)  # [1, 1, 7]
    attended = [0, 1, 2, 3, 4, 4, 5]  # the source position each step looks at most
    attention = tf.one_hot([[attended]], 6)  # [1, 1, 7, 6]
    logprobs = np.log(np.array([[0.9, 0.4, 0.8, 0.3, 0.7, 0.6, 0.95]], np.float32))
    written = replacer.written(source, ids, attention)
    texts = replacer.join(written, ids)[:, 0]
    assert texts.numpy()[0].decode() == "le New York chat, dort."
    words, figures = word_confidences(ids[:, 0], tf.constant(logprobs), tf.constant([6]),
                                      texts, replacer.prefix_decoder(written[:, 0]))
    replaced = ("le", "New York", "chat", ",", "dort", ".")
    expected = confidence_of(logprobs[0], replaced, lambda some: detokenize(some, "fr"))
    assert tuple(w.decode() for w in words[0].numpy()) == expected.words
    np.testing.assert_allclose(figures[0].numpy(), expected.word_confidences, rtol=1e-6)
    assert expected.words == ("le", "New", "York", "chat,", "dort.")
    # The prefixes decoded with <unk> in place (the SavedModel before) land a word off.
    from keras_nmt.text.word_graph import WordEncoder

    plain = WordEncoder(vocabulary, "fr")

    def unreplaced(some):
        shape = tf.shape(some)
        return tf.reshape(plain.decode(tf.reshape(some, [-1, shape[2]])), shape[:2])

    _, off = word_confidences(ids[:, 0], tf.constant(logprobs), tf.constant([6]), texts,
                              unreplaced)
    assert not np.allclose(off[0].numpy(), expected.word_confidences)


def test_a_token_holding_a_space_like_character_belongs_to_each_of_its_words():
    """NBSP splits a word for str.split: the one-pass rule gives the token both words its
    characters are in; the prefix rule gives only the one it added."""
    from keras_nmt.text.word import token_words

    tokens = ["“", "10\u00a0000", "km"]
    assert detokenize(tokens, "fr").split() == ["“10", "000", "km"]
    assert token_words(tokens, "fr") == (("“10", "000", "km"), [(0,), (0, 1), (2,)])
    assert word_of_tokens(tokens, french)[1] == [(0,), (1,), (2,)]


def test_pieces_belong_to_the_word_their_first_piece_begins():
    tokens = ["\u2581Le", "\u2581ch", "at", "\u2581noir", "."]
    found = confidence_of(np.log([0.8, 0.3, 0.9, 0.6, 0.7, 0.5]), tokens, pieces)
    assert found.words == ("Le", "chat", "noir.")
    np.testing.assert_allclose(found.word_confidences, [0.8, 0.3, 0.6])
    with pytest.raises(ValueError, match="5 log-probabilities for 5 tokens"):
        confidence_of(np.zeros(5), tokens, pieces)


def test_a_line_joins_its_sentences_weighted_by_their_tokens():
    first = Confidence(math.log(0.5), 3, ("a", "b"), (0.4, 0.6))
    second = Confidence(math.log(0.8), 1, ("c",), (0.9,))
    line = join_confidences([first, None, second])
    assert line.tokens == 4
    assert line.sentence == pytest.approx(0.5 ** 0.75 * 0.8 ** 0.25)
    assert line.words == ("a", "b", "c") and line.word_confidences == (0.4, 0.6, 0.9)
    assert join_confidences([None]) is None
    joined = join_translations([Translation("a b", ("a", "b"), -1.0, ("x",), confidence=first),
                                Translation("c", ("c",), -0.5, ("y",), confidence=second)])
    assert joined.confidence == line
    assert [part.confidence for part in joined.sentences] == [first, second]


def outputs(translations, **options):
    stream = io.StringIO()
    Output(stream, **options).write_all(translations)
    return stream.getvalue().splitlines()


def test_min_confidence_marks_or_withholds_the_lines_below_it():
    sure = Translation("sure", ("sure",), confidence=Confidence(math.log(0.9), 2, ("sure",),
                                                                  (0.9,)))
    unsure = Translation("unsure", ("unsure",), confidence=Confidence(math.log(0.2), 2,
                                                                      ("unsure",), (0.1,)))
    empty = Translation("")
    lines = [sure, unsure, empty]
    assert outputs(lines) == ["sure", "unsure", ""]
    assert outputs(lines, min_confidence=0.5) == ["sure", LOW_CONFIDENCE_MARK + "unsure", ""]
    assert outputs(lines, min_confidence=0.1) == ["sure", "unsure", ""]
    assert outputs(lines, min_confidence=0.5, drop_below=True) == ["sure", "", ""]
    records = [json.loads(line) for line in outputs(lines, confidence=True, min_confidence=0.5,
                                                    drop_below=True)]
    assert records[0] == {"index": 0, "text": "sure", "confidence": 0.9, "sentences": [0.9],
                          "words": [["sure", 0.9]], "low": False, "withheld": False}
    assert records[1] == {"index": 1, "text": "", "confidence": 0.2, "sentences": [0.2],
                          "words": [], "low": True, "withheld": True}
    assert records[2] == {"index": 2, "text": "", "confidence": None, "sentences": [],
                          "words": [], "low": False, "withheld": False}


@pytest.fixture(scope="module")
def keras_translator(tiny_run):
    from keras_nmt.decoding.keras_translator import Translator

    return Translator.from_run_dir(tiny_run)


@pytest.fixture(scope="module")
def spm_translator(tiny_spm_run):
    from keras_nmt.decoding.keras_translator import Translator

    return Translator.from_run_dir(tiny_spm_run)


def check_words_line_up(translations):
    for t in translations:
        if not t.text:
            assert t.confidence is None
            continue
        assert t.confidence.words == tuple(t.text.split())
        assert len(t.confidence.word_confidences) == len(t.text.split())
        assert all(0 < value <= 1 for value in t.confidence.word_confidences)
        assert 0 < t.confidence.sentence <= 1
        for part in t.sentences:
            assert part.confidence.words == tuple(part.text.split())


def test_keras_confidence_is_score_formula_and_lines_up_with_words(keras_translator):
    from keras_nmt.evaluation.forced import force_decode

    plain = keras_translator.translate(LINES)
    assert all(t.confidence is None for t in plain)  # not asked: not computed
    found = keras_translator.translate(LINES, confidence=True)
    assert [t.text for t in found] == [t.text for t in plain]
    check_words_line_up(found)
    assert len(found[2].sentences) == 2  # the split line: its sentences' figures joined
    assert found[2].confidence == join_confidences([s.confidence for s in found[2].sentences])
    # A translation's confidence is exp(logprob_per_token) of force decoding its tokens,
    # as score computes it (the tokens written one space apart: the barely trained model
    # writes runs of "." that its detokenized text would join).
    decoded = [t for t in found if t.text and not t.sentences]
    pairs = force_decode(keras_translator, [LINES[found.index(t)] for t in decoded],
                         [" ".join(t.tokens) for t in decoded])
    assert len(pairs) == 2
    for t, pair in zip(decoded, pairs):
        assert pair.target_tokens == t.tokens
        assert t.confidence.sentence == pytest.approx(math.exp(pair.logprob_per_token),
                                                      rel=1e-5)


def test_spm_word_confidences_line_up_with_the_words(spm_translator):
    found = spm_translator.translate(LINES, confidence=True, nbest=2)
    check_words_line_up(found)
    assert found[0].alternatives  # the n-best list is kept; the best is the one scored


def test_onnx_confidence_agrees_with_keras(tiny_export, tiny_spm_export, keras_translator,
                                          spm_translator):
    for export, translator in ((tiny_export, keras_translator),
                               (tiny_spm_export, spm_translator)):
        served = OnnxTranslator.from_export_dir(export)
        onnx = served.translate(LINES, confidence=True)
        keras = translator.translate(LINES, beam_size=served.beam_size, alpha=served.alpha,
                                     confidence=True)
        check_words_line_up(onnx)
        assert served.translate(LINES)[0].confidence is None
        same = [(a, b) for a, b in zip(onnx, keras) if a.text == b.text and a.text]
        assert len(same) >= 2
        for a, b in same:
            assert a.confidence.sentence == pytest.approx(b.confidence.sentence, abs=1e-4)
            np.testing.assert_allclose(a.confidence.word_confidences,
                                       b.confidence.word_confidences, atol=1e-4)


def _older_export(tiny_export, copy):
    """A copy of ``tiny_export``'s ONNX files as an older keras-nmt wrote them."""
    shutil.copytree(onnx_files(tiny_export), copy)
    as_older_export(copy)
    return copy


def test_an_older_export_gives_the_confidence_by_force_decoding(tiny_export, tmp_path):
    """Before the search returned its tokens' log-probabilities, a confidence came from
    NAME.forced.onnx: such an export still gives the same figures."""
    older = OnnxTranslator.from_export_dir(_older_export(tiny_export, tmp_path / "onnx"))
    current = OnnxTranslator.from_export_dir(tiny_export)
    assert current.scores_tokens and not older.scores_tokens and older.gives_confidence
    for a, b in zip(older.translate(LINES, confidence=True, align=True),
                    current.translate(LINES, confidence=True, align=True)):
        assert a.text == b.text and (a.confidence is None) == (b.confidence is None)
        if a.confidence is not None:
            assert a.confidence.sentence == pytest.approx(b.confidence.sentence, abs=1e-4)
            assert b.alignment is not None  # an alignment keeps the search's confidence
            np.testing.assert_allclose(a.confidence.word_confidences,
                                       b.confidence.word_confidences, atol=1e-4)


def test_an_export_that_cannot_give_a_confidence_refuses_it(tiny_export, tmp_path, cli_runner):
    copy = _older_export(tiny_export, tmp_path / "onnx")
    meta = json.loads((copy / "nmt.onnx.json").read_text(encoding="utf-8"))
    del meta["forced"]
    (copy / "nmt.onnx.json").write_text(json.dumps(meta), encoding="utf-8")
    with pytest.raises(ExportError, match="can compute no confidence"):
        OnnxTranslator.from_export_dir(copy).translate(["a"], confidence=True)
    ran = cli_runner("onnx-translate", copy, "--min-confidence", "0.5", stdin="a\n")
    assert ran.returncode == 2 and ran.stdout == ""
    assert ran.stderr.count("\n") == 1 and "can compute no confidence" in ran.stderr


def test_translate_and_score_cli_agree_and_mark_the_lines_below(cli_runner, tiny_run, tmp_path):
    ran = cli_runner("translate", tiny_run, "--confidence", "--no-split-sentences", "--quiet",
                     stdin="\n".join(LINES) + "\n")
    assert ran.returncode == 0, ran.stderr
    records = [json.loads(line) for line in ran.stdout.splitlines()]
    assert [r["index"] for r in records] == [0, 1, 2, 3]
    assert records[1]["confidence"] is None
    for record in records:
        assert [word for word, _ in record["words"]] == record["text"].split()
    decoded = [r for r in records if r["text"]]
    # score --confidence of the translations' tokens: exp(mean token log-probability), and
    # the Python API's figures for them.
    from keras_nmt.decoding.keras_translator import Translator

    made = Translator.from_run_dir(tiny_run).translate(LINES, confidence=True,
                                                       split_sentences=False)
    made = [(line, t) for line, t in zip(LINES, made) if t.text]
    (tmp_path / "src").write_text("".join(line + "\n" for line, _ in made), encoding="utf-8")
    (tmp_path / "tgt").write_text("".join(" ".join(t.tokens) + "\n" for _, t in made),
                                  encoding="utf-8")
    scored = cli_runner("score", tiny_run, "--src", tmp_path / "src", "--tgt", tmp_path / "tgt",
                        "--format", "json", "--confidence", "--quiet")
    assert scored.returncode == 0, scored.stderr
    lines = scored.stdout.splitlines()
    assert len(lines) == len(made) == 3
    for (_, t), line in zip(made, lines):
        score = json.loads(line)
        assert score["tokens"] == len(t.tokens) + 1
        assert score["confidence"] == pytest.approx(
            math.exp(np.mean(score["token_logprobs"])), abs=2e-6)
        assert score["confidence"] == pytest.approx(t.confidence.sentence, abs=1e-5)
        assert [word for word, _ in score["words"]] == list(t.confidence.words)
        np.testing.assert_allclose([value for _, value in score["words"]],
                                   t.confidence.word_confidences, atol=1e-5)
    # --min-confidence: just above a line's figure marks it, just below does not (the
    # barely trained model writes the same line for every input; test_min_confidence_marks_
    # or_withholds_the_lines_below_it mixes figures); --drop-below empties the marked lines.
    figures = [r["confidence"] for r in decoded]
    for threshold, drop, expected in (
            (max(figures) + 1e-4, False, [LOW_CONFIDENCE_MARK + r["text"] if r["text"] else ""
                                         for r in records]),
            (min(figures) - 1e-4, False, [r["text"] for r in records]),
            (max(figures) + 1e-4, True, ["" for r in records])):
        marked = cli_runner("translate", tiny_run, "--min-confidence", threshold,
                            *(["--drop-below"] if drop else []), "--no-split-sentences",
                            "--quiet", stdin="\n".join(LINES) + "\n")
        assert marked.returncode == 0, marked.stderr
        assert marked.stdout.splitlines() == expected
    refused = cli_runner("translate", tiny_run, "--drop-below", stdin="a\n")
    assert refused.returncode == 2 and "--drop-below needs --min-confidence" in refused.stderr


def dropout_translator(run_copy, rate):
    """The tiny run with ``rate`` as its dropout (a layer without weights: the same
    weights load)."""
    from keras_nmt.decoding.keras_translator import Translator

    edit_json(run_copy / "config.json", dropout=rate)
    return Translator.from_run_dir(run_copy)


def test_dropout_samples_average_passes_with_the_models_dropout_on(run_copy, keras_translator):
    from keras_nmt.evaluation.forced import dropout_logprobs, force_ids

    searched = keras_translator.translate(LINES, confidence=True, nbest=2, beam_size=2)
    # A rate so small that no unit is dropped: the samples' mean is the search's own
    # log-probabilities, hypothesis by hypothesis (each alternative of the n-best too).
    faint = dropout_translator(run_copy, 1e-9).translate(LINES, confidence=True, nbest=2,
                                                          beam_size=2, dropout_samples=3)
    assert [t.text for t in faint] == [t.text for t in searched]
    for got, want in zip(faint, searched):
        pairs = list(zip([got, *got.alternatives], [want, *want.alternatives]))
        for a, b in pairs + list(zip(got.sentences, want.sentences)):
            if b.confidence is None:
                assert a.confidence is None
                continue
            assert a.confidence.words == b.confidence.words
            assert a.confidence.sentence == pytest.approx(b.confidence.sentence, abs=2e-5)
            np.testing.assert_allclose(a.confidence.word_confidences,
                                       b.confidence.word_confidences, atol=2e-5)
    # At 0.5 the passes differ from one another, and their mean is what the figures are.
    strong = dropout_translator(run_copy, 0.5)
    found = strong.translate(LINES, confidence=True, dropout_samples=4)
    assert [t.text for t in found] == [t.text for t in searched]  # the search is the same
    check_words_line_up(found)
    # (The barely trained model is near uniform: a pass moves a log-probability ~1e-3.)
    assert all(abs(math.log(t.confidence.sentence) - math.log(s.confidence.sentence)) > 1e-6
               for t, s in zip(found, searched) if t.text)
    source = [strong.source_codec.encode(LINES[0]) + [EOS_ID]]
    target = [strong.target_codec.encode(found[0].text) + [EOS_ID]]
    one, two = (force_ids(strong.model, source, target, dropout=True)[0][0] for _ in range(2))
    assert np.abs(one - two).max() > 2e-4
    plain = force_ids(strong.model, source, target)[0][0]
    np.testing.assert_array_equal(plain, force_ids(strong.model, source, target)[0][0])
    mean = dropout_logprobs(strong.model, source, target, samples=64)[0]
    assert mean.shape == plain.shape and np.all(mean < 0)
    # 64 samples: their mean is near the mean of 64 others, further from the plain pass.
    again = dropout_logprobs(strong.model, source, target, samples=64)[0]
    assert np.abs(mean - again).mean() < np.abs(one - two).mean()


def test_dropout_samples_bad_requests_get_one_line(run_copy, keras_translator, cli_runner):
    with pytest.raises(ValueError, match="ask for confidence=True too"):
        keras_translator.translate(["a"], dropout_samples=2)
    with pytest.raises(ValueError, match="trained without dropout"):
        keras_translator.translate(["a"], confidence=True, dropout_samples=2)
    with pytest.raises(ValueError, match="dropout_samples must be a positive integer"):
        keras_translator.translate(["a"], confidence=True, dropout_samples=-1)
    ran = cli_runner("translate", run_copy, "--dropout-samples", 2, stdin="a\n")
    assert ran.returncode == 2 and "needs --confidence or --min-confidence" in ran.stderr
    ran = cli_runner("translate", run_copy, "--confidence", "--dropout-samples", 2,
                     stdin="a\n")
    assert ran.returncode == 2 and len(ran.stderr.strip().splitlines()) == 1
    assert "trained without dropout: --dropout-samples has nothing to sample" in ran.stderr
    edit_json(run_copy / "config.json", dropout=0.3)
    ran = cli_runner("translate", run_copy, "--confidence", "--dropout-samples", 2, "--quiet",
                     stdin="\n".join(LINES) + "\n")
    assert ran.returncode == 0, ran.stderr
    records = [json.loads(line) for line in ran.stdout.splitlines()]
    assert len(records) == len(LINES) and records[1]["confidence"] is None
    assert all(0 < r["confidence"] <= 1 for r in records if r["text"])


def test_sentence_signals_by_hand():
    from keras_nmt.decoding.confidence import sentence_signals

    attention = np.array([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]])  # source sums 1.5, 0.5, 0
    found = sentence_signals(np.log([0.5, 0.25]), np.array([1.0, 2.0]), attention)
    assert found == pytest.approx({"mean_logprob": math.log(0.5 * 0.25) / 2,
                                   "min_logprob": math.log(0.25), "neg_mean_entropy": -1.5,
                                   "neg_coverage_gap": -(0.5 + 0.5 + 1.0) / 3})
    assert set(sentence_signals(np.log([0.5]))) == {"mean_logprob", "min_logprob"}


def test_force_signals_is_force_ids_with_each_tokens_entropy(keras_translator):
    from keras_nmt.core.constants import EOS_ID
    from keras_nmt.evaluation.forced import force_ids, force_signals

    sources = [keras_translator.source(line).ids for line in LINES if line]
    targets = [[5, 6, EOS_ID], [EOS_ID], [7, 5, 8, 9, EOS_ID]]
    plain = force_ids(keras_translator.model, sources, targets, batch_size=2, attention=True)
    found = force_signals(keras_translator.model, sources, targets, batch_size=2)
    vocabulary = len(keras_translator.target_vocab)
    for (logprobs, attention), signals, target in zip(plain, found, targets):
        np.testing.assert_allclose(signals.token_logprobs, logprobs, atol=1e-5)
        np.testing.assert_allclose(signals.attention, attention, atol=1e-6)
        assert signals.token_entropies.shape == (len(target),)
        # Between a sure distribution's 0 and the uniform one's log V, and at least what
        # the token's own probability says: -p log p <= H.
        assert np.all(signals.token_entropies > 0)
        assert np.all(signals.token_entropies <= math.log(vocabulary) + 1e-4)
        p = np.exp(signals.token_logprobs)
        assert np.all(-p * np.log(p) <= signals.token_entropies + 1e-5)
