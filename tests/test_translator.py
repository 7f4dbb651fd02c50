"""keras_nmt.decoding.keras_translator: the Translator API on the tiny trained run (``tiny_run``).

The tiny run's model is barely trained, so its next-word distributions are almost flat
and many hypotheses tie; tests that compare rankings redraw its weights with a fan-in
scaled normal so the distributions become peaked (``peaked_model``).
"""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from keras_nmt.models.rnnsearch import TranslationModel
from keras_nmt.core.constants import UNK, UNK_ID
from keras_nmt.decoding.translation import Source, Translation
from keras_nmt.decoding.keras_translator import Translator, default_max_source_len

LINES = [
    "The man is here.",
    "",
    "The round red Italian knives of the woman are on the table.",
    "   ",
    "\t\u00a0",
    "A dog.",
    "The man is here.",
]


def test_sentences_with_a_rare_word_are_batched_apart_and_answered_in_order():
    from keras_nmt.decoding.translation import rare_source, translate_lines

    rare = np.zeros(10, bool)
    rare[7] = True  # a source word training saw too rarely to select by ("g")
    ids = {"A b.": (4, 5), "C.": (6,), "D g.": (8, 7), "G.": (7,), "A.": (4,), "B c d.": (5, 6, 8)}
    batches = []

    def decode(sources):
        batches.append([" ".join(s.tokens) for s in sources])
        return [Translation(" ".join(s.tokens).upper()) for s in sources]

    def read(sentence):
        return Source(tuple(sentence.split()), ids[sentence] + (3,), 0)

    lines = ["A b. G.", "C.", "D g.", "A.", "B c d."]
    out = translate_lines(lines, decode, 2, read=read, lang="en", split_sentences=True,
                          apart=rare_source(rare))
    assert [t.text for t in out] == ["A B. G.", "C.", "D G.", "A.", "B C D."]
    # The others first, shortest first, two a batch; then the rare ones, apart.
    assert batches == [["C.", "A."], ["A b.", "B c d."], ["G.", "D g."]]
    # Without ``apart``: by length only.
    batches.clear()
    translate_lines(lines, decode, 2, read=read, lang="en", split_sentences=True)
    assert batches == [["G.", "C."], ["A.", "A b."], ["D g.", "B c d."]]


def peaked_model(config, seed=0, gain=2.0, unk_bias=0.0):
    model = TranslationModel(config)
    rng = np.random.default_rng(seed)
    for weight in model.weights:
        shape = tuple(weight.shape)
        std = gain / np.sqrt(shape[0]) if len(shape) == 2 else 0.5
        values = rng.normal(0.0, std, shape).astype("float32")
        if weight.path.endswith("readout/output_bias"):
            values[UNK_ID] += unk_bias
        weight.assign(values)
    return model


class UnkLovingModel:
    """Any object with encode / step / config can be translated: this one prefers UNK."""

    def __init__(self, model, bias=50.0):
        self.model, self.config, self.bias = model, model.config, bias

    def encode(self, source_ids):
        return self.model.encode(source_ids)

    def output_projection(self, columns, count):
        return self.model.output_projection(columns, count)

    def step(self, previous_ids, state, memory, projection=None):
        # Column UNK_ID is UNK whether the logits cover every word or a shortlist.
        logits, state, attention = self.model.step(previous_ids, state, memory, projection)
        return logits + self.bias * tf.one_hot(UNK_ID, tf.shape(logits)[-1]), state, attention


@pytest.fixture(scope="module")
def translator(tiny_run):
    return Translator.from_run_dir(tiny_run)


@pytest.fixture(scope="module")
def peaked(translator):
    t = translator
    return Translator(peaked_model(t.model.config), t.source_codec, t.target_codec)


def test_one_translation_per_line_in_order_empty_lines_stay_empty(translator):
    out = translator.translate(LINES, beam_size=2, batch_size=2)
    assert len(out) == len(LINES)
    for line, t in zip(LINES, out):
        assert isinstance(t, Translation)
        if not line.strip():
            assert t == Translation("", (), 0.0, ())
        else:
            assert t.tokens and t.source_tokens and t.score < 0 and t.truncated == 0
    assert out[0].text == out[6].text and out[0].score == pytest.approx(out[6].score)
    assert translator.translate([]) == []
    assert translator.translate(["", " "]) == [Translation("", (), 0.0, ())] * 2


def test_batching_does_not_change_translations(peaked):
    one = peaked.translate(LINES, beam_size=3, batch_size=1)
    many = peaked.translate(LINES, beam_size=3, batch_size=32)
    assert [t.text for t in one] == [t.text for t in many]
    np.testing.assert_allclose([t.score for t in one], [t.score for t in many], atol=1e-4)


def test_attention_matrix_covers_output_and_source_with_eos(peaked):
    out = peaked.translate(LINES, beam_size=2, with_attention=True)
    for t in out:
        if not t.source_tokens:
            assert t.attention is None
            continue
        assert t.attention.shape == (len(t.tokens) + 1, len(t.source_tokens) + 1)
        np.testing.assert_allclose(t.attention.sum(axis=1), 1.0, atol=1e-4)
    assert all(t.attention is None for t in peaked.translate(LINES[:1], beam_size=2))


def test_nbest_gives_sorted_alternatives_led_by_the_best(peaked):
    best = peaked.translate(LINES, beam_size=4)
    out = peaked.translate(LINES, beam_size=4, nbest=3)
    for single, t in zip(best, out):
        assert single.alternatives == () and single.hypotheses == (single,)
        if not t.source_tokens:
            assert t.hypotheses == (Translation("", (), 0.0, ()),)
            continue
        assert 1 <= len(t.alternatives) <= 3 and t.hypotheses == t.alternatives
        scores = [h.score for h in t.alternatives]
        assert scores == sorted(scores, reverse=True)
        assert t.alternatives[0].text == t.text == single.text
        assert t.alternatives[0].score == pytest.approx(single.score, abs=1e-5)
        assert len({h.tokens for h in t.alternatives}) == len(t.alternatives)
        assert all(h.alternatives == () for h in t.alternatives)
    assert sum(len(t.alternatives) == 3 for t in out) >= 3
    with pytest.raises(ValueError, match="nbest"):
        peaked.translate(LINES, beam_size=2, nbest=3)
    with pytest.raises(ValueError, match="beam_size"):
        peaked.translate(LINES, beam_size=0)


def test_long_sentences_are_truncated_to_max_source_len(translator):
    assert translator.max_source_len == default_max_source_len(30) == 100
    assert default_max_source_len(80) == 160
    words = [f"w{i}" for i in range(12)]
    saved = translator.max_source_len
    translator.max_source_len = 5
    try:
        out = translator.translate([" ".join(words), "The man .", ""], beam_size=1, with_attention=True)
        assert translator.encode([" ".join(words)]) == [[1, 1, 1, 1, 1, 3]]  # 5 UNK + EOS
    finally:
        translator.max_source_len = saved
    assert out[0].source_tokens == tuple(words[:5]) and out[0].truncated == 7
    assert out[0].attention.shape[1] == 6
    assert out[1].truncated == 0 and out[2].truncated == 0
    long_line = " ".join(["the"] * 101)
    assert translator.translate([long_line], beam_size=1)[0].truncated == 1
    with pytest.raises(ValueError, match="max_source_len"):
        Translator(translator.model, translator.source_codec, translator.target_codec,
                   max_source_len=0)


def test_forbid_unk_and_unk_replacement(peaked):
    t = peaked
    loving = Translator(UnkLovingModel(t.model), t.source_codec, t.target_codec)
    lines = ["Mr Smith sees Jones .", "", "The man is here ."]
    plain = loving.translate(lines, beam_size=2, with_attention=True)
    assert set(plain[0].tokens) == {UNK} and set(plain[2].tokens) == {UNK}
    assert all(UNK not in tok.tokens for tok in loving.translate(lines, beam_size=2, forbid_unk=True))

    dictionary = {"Smith": "Schmidt", "man": "homme"}
    out = loving.translate(lines, beam_size=2, unk_replace=True, dictionary=dictionary, nbest=2)
    assert out[1].text == ""
    for before, after in zip(plain, out):
        assert after.attention is None  # kept only when asked for
        assert after.tokens and UNK not in after.tokens or not before.tokens
        for step, token in enumerate(after.tokens):
            row = before.attention[step, :-1]
            chosen = before.source_tokens[int(np.argmax(row))]
            assert token == dictionary.get(chosen, chosen)
        for alternative in after.alternatives:
            assert UNK not in alternative.tokens
    assert any(token in ("Schmidt", "homme") for t in out for token in t.tokens)
    # In a line of two sentences each is replaced from its own attention.
    alone = loving.translate(lines[::2], beam_size=2, unk_replace=True, dictionary=dictionary)
    [joined] = loving.translate(["Mr Smith sees Jones. The man is here."], beam_size=2,
                                unk_replace=True, dictionary=dictionary)
    assert joined.tokens == alone[0].tokens + alone[1].tokens and len(joined.sentences) == 2


def test_unk_replacement_needs_a_model_with_attention(translator):
    from keras_nmt.core.errors import ConfigError
    from keras_nmt.decoding.ensemble import Ensemble

    config = translator.model.config.replace(architecture="encdec", variant="encdec30")
    encdec = TranslationModel(config)
    plain = Translator(encdec, translator.source_codec, translator.target_codec)
    with pytest.raises(ConfigError, match=r"^unk_replace reads the attention weights, and an "
                                          r"RNNencdec model \(encdec30\) has none$"):
        plain.translate(["The man."], beam_size=1, unk_replace=True)
    assert len(plain.translate(["The man."], beam_size=1)) == 1  # without, it translates
    mixed = Translator(Ensemble([encdec, translator.model]), translator.source_codec,
                       translator.target_codec)
    assert len(mixed.translate(["The man."], beam_size=1, unk_replace=True)) == 1


TWO_SENTENCES = "The man is here. A dog sleeps on the table."


def test_a_line_of_two_sentences_joins_their_translations(peaked):
    first, second = "The man is here.", "A dog sleeps on the table."
    alone = peaked.translate([first, second], beam_size=3)
    [joined] = peaked.translate([TWO_SENTENCES], beam_size=3)
    assert joined.text == f"{alone[0].text} {alone[1].text}"
    assert joined.tokens == alone[0].tokens + alone[1].tokens
    assert joined.source_tokens == alone[0].source_tokens + alone[1].source_tokens
    # The score: the sentences' mean, weighted by their source tokens + EOS.
    weights = [len(t.source_tokens) + 1 for t in alone]
    assert joined.score == pytest.approx(
        sum(w * t.score for w, t in zip(weights, alone)) / sum(weights), abs=1e-6)
    assert joined.truncated == 0 and joined.sentences == tuple(alone)
    assert joined.attention is None and joined.alternatives == ()
    # Unsplit: the line is one sentence, as before sentences were split.
    [whole] = peaked.translate([TWO_SENTENCES], beam_size=3, split_sentences=False)
    assert whole.source_tokens == joined.source_tokens and whole.sentences == ()
    assert whole.score != pytest.approx(joined.score)
    # A line of one sentence gives the same Translation either way. Alone against in a
    # batch of two, the sums run over another shape: the score may differ in its last bits.
    [one] = peaked.translate([first], beam_size=3)
    assert one == peaked.translate([first], beam_size=3, split_sentences=False)[0]
    assert one == dataclasses.replace(alone[0], score=pytest.approx(one.score, abs=1e-5))


def test_a_split_lines_nbest_list_and_block_diagonal_attention(peaked):
    import itertools

    first, second = "The man is here.", "A dog sleeps on the table."
    alone = peaked.translate([first, second], beam_size=4, nbest=3, with_attention=True)
    [joined] = peaked.translate([TWO_SENTENCES], beam_size=4, nbest=3, with_attention=True)
    width = max(len(t.hypotheses) for t in alone)
    assert len(joined.hypotheses) == width == 3
    # The line's list: the best combinations of one hypothesis per sentence, by the mean
    # of their scores weighted by the sentences' source tokens + EOS.
    weights = [len(t.source_tokens) + 1 for t in alone]
    every = sorted(((sum(w * h.score for w, h in zip(weights, row)) / sum(weights), row)
                    for row in itertools.product(*(t.hypotheses for t in alone))),
                   key=lambda item: -item[0])
    for hypothesis, (score, parts) in zip(joined.hypotheses, every):
        assert hypothesis.text == " ".join(p.text for p in parts)
        assert hypothesis.score == pytest.approx(score, abs=1e-6)
        assert [s.tokens for s in hypothesis.sentences] == [p.tokens for p in parts]
        assert hypothesis.alternatives == ()
    assert [s.tokens for s in joined.hypotheses[0].sentences] == [t.tokens for t in alone]
    assert joined.hypotheses[0].text == joined.text
    # Rows: each sentence's tokens + EOS; columns: each sentence's source tokens + EOS.
    a, b = alone[0].attention, alone[1].attention
    assert joined.attention.shape == (a.shape[0] + b.shape[0], a.shape[1] + b.shape[1])
    np.testing.assert_array_equal(joined.attention[: a.shape[0], : a.shape[1]], a)
    np.testing.assert_array_equal(joined.attention[a.shape[0]:, a.shape[1]:], b)
    assert not joined.attention[: a.shape[0], a.shape[1]:].any()
    assert not joined.attention[a.shape[0]:, : a.shape[1]].any()
    rows, columns = joined.attention_labels()
    assert (len(rows), len(columns)) == joined.attention.shape
    assert columns == [*alone[0].source_tokens, "</s>", *alone[1].source_tokens, "</s>"]
    assert alone[0].attention_labels() == ([*alone[0].tokens, "</s>"],
                                           [*alone[0].source_tokens, "</s>"])


def nbest_sentence(text, scores, source_tokens=1, attention=None, alignment=None):
    """A sentence's Translation with an n-best list of the given scores."""
    hypotheses = [Translation(f"{text}{k + 1}", (f"{text}{k + 1}",), score,
                              ("x",) * source_tokens, attention, alignment=alignment)
                  for k, score in enumerate(scores)]
    return dataclasses.replace(hypotheses[0], alternatives=tuple(hypotheses))


def test_a_split_lines_nbest_list_holds_the_best_combinations():
    from keras_nmt.decoding.translation import join_translations

    # A's second hypothesis is nearly as good as its first, B's is far worse: the line's
    # second best is a2 b1, not a2 b2 (hypothesis 2 of each).
    a, b = nbest_sentence("a", [-0.10, -0.12]), nbest_sentence("b", [-0.10, -2.0])
    line = join_translations([a, b], "en")
    assert [h.text for h in line.hypotheses] == ["a1 b1", "a2 b1"]
    assert [h.score for h in line.hypotheses] == pytest.approx([-0.10, -0.11])
    assert line.hypotheses[1].sentences == (a.hypotheses[1], b.hypotheses[0])
    assert (line.text, line.score, line.sentences) == ("a1 b1", pytest.approx(-0.10), (a, b))
    # Scores compare across lines: a line of the same sentence twice scores as the sentence.
    assert join_translations([b, b]).score == pytest.approx(b.score)
    # Sentences weigh by their source tokens + EOS; Chinese joins without a space.
    long = nbest_sentence("c", [-1.0], source_tokens=4)
    line = join_translations([nbest_sentence("d", [-2.0]), long], "zh")
    assert (line.text, line.score) == ("d1c1", pytest.approx((2 * -2.0 + 5 * -1.0) / 7))


def test_the_target_language_joins_a_lines_sentences():
    from keras_nmt.decoding.translation import translate_lines

    def decode(sentences):
        return [Translation(f"<{sentence}>") for sentence in sentences]

    lines = ["A b. C d.", "E."]
    assert [t.text for t in translate_lines(lines, decode, 4, lang="en", split_sentences=True,
                                            target_lang="fr")] == ["<A b.> <C d.>", "<E.>"]
    assert [t.text for t in translate_lines(lines, decode, 4, lang="en", split_sentences=True,
                                            target_lang="ja")] == ["<A b.><C d.>", "<E.>"]


def test_a_long_lines_joined_matrices_are_made_only_when_read(monkeypatch):
    """A line of 1,000 sentences: reading each sentence's attention and alignment never
    builds the line's dense matrices (Σ rows x Σ columns); reading the line's builds each
    once."""
    from keras_nmt.decoding import translation
    from keras_nmt.evaluation.forced import ForcedPair
    from keras_nmt.text import line_join

    built = []

    def counted(name, function):
        def wrapper(*args):
            built.append(name)
            return function(*args)
        return wrapper

    monkeypatch.setattr(line_join, "block_diagonal",
                        counted("attention", line_join.block_diagonal))
    monkeypatch.setattr(translation, "join_pairs", counted("alignment", translation.join_pairs))

    def decode(items):
        return [Translation(f"T{i}.", ("t",), -1.0, ("s",), np.full((2, 2), 0.5, np.float32),
                            alignment=ForcedPair(("s",), ("t",), np.zeros(2, np.float32),
                                                 np.full((2, 2), 0.5, np.float32), 0))
                for i in items]

    count = 1000
    line = " ".join(f"S{i}." for i in range(count))
    [joined] = translation.translate_lines([line], decode, 64, lang="en", split_sentences=True)
    assert len(joined.sentences) == count and built == []
    assert all(s.attention.shape == (2, 2) and s.alignment.attention.shape == (2, 2)
               for s in joined.sentences)
    assert built == []
    assert joined.attention.shape == (2 * count, 2 * count) and built == ["attention"]
    assert joined.alignment.attention.shape == (2 * count, 2 * count)
    assert built == ["attention", "alignment"]
    assert joined.attention is joined.attention and built == ["attention", "alignment"]
    # Equality and pickling read the computed values.
    import pickle

    again = pickle.loads(pickle.dumps(joined))
    np.testing.assert_array_equal(again.attention, joined.attention)
    assert Translation("x", score=-1.0) == Translation("x", score=-1.0)
    plain = translation.join_translations([Translation("a", ("a",), -1.0, ("s",)),
                                           Translation("b", ("b",), -1.0, ("s",))])
    assert plain == dataclasses.replace(plain) and plain.attention is None


def test_progress_counts_lines(peaked):
    counts = []
    peaked.translate([TWO_SENTENCES, "", "A dog.", TWO_SENTENCES], beam_size=1, batch_size=2,
                     progress=counts.append)
    assert sum(counts) == 3 and len(counts) == 3  # 5 sentences, batches of 2
