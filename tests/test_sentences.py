"""Sentence splitting: the rules on tricky lines, the graph splitter's agreement with the
Python one, and the join of a line's translations (Python and graph)."""

import random

import numpy as np
import pytest
import regex

from keras_nmt.text.sentences import block_diagonal, join_texts, nbest_rows, split_sentences
from keras_nmt.text.word import SPACE

NBSP, NNBSP = "\u00a0", "\u202f"

# (language, line, its sentences)
CASES = [
    ("en", "An army of sentence purifiers landed on Tatoeba. They will not rest until they "
           "eliminate everything that does not fit their narrow standards.",
     ["An army of sentence purifiers landed on Tatoeba.",
      "They will not rest until they eliminate everything that does not fit their narrow "
      "standards."]),
    # One sentence: the line itself, whitespace and all.
    ("en", "The man is here.", ["The man is here."]),
    ("en", "  The man is here .  ", ["  The man is here .  "]),
    ("en", "No end in sight", ["No end in sight"]),
    ("en", "", [""]),
    ("en", " \t ", [" \t "]),
    # Abbreviations, initials, letters joined by periods.
    ("en", "Mr. Smith met Mrs. Jones and Dr. Who on St. James St. today. They talked.",
     ["Mr. Smith met Mrs. Jones and Dr. Who on St. James St. today.", "They talked."]),
    ("en", "J. R. R. Tolkien wrote it. It is long.",
     ["J. R. R. Tolkien wrote it.", "It is long."]),
    ("en", "Big cities, e.g. Paris or London, i.e. capitals. They grow.",
     ["Big cities, e.g. Paris or London, i.e. capitals.", "They grow."]),
    ("en", "He moved to the U.S. Then he left.", ["He moved to the U.S. Then he left."]),
    ("en", "See No. 5 on p. 12. Then Fig. 3.", ["See No. 5 on p. 12.", "Then Fig. 3."]),
    ("en", "He said No. Then he left.", ["He said No.", "Then he left."]),
    # Numbers: a decimal point is no end; a number may end or start a sentence.
    ("en", "It costs 3.5 dollars. 12 people paid.", ["It costs 3.5 dollars.", "12 people paid."]),
    ("en", "It was 1990. In 1991 it ended.", ["It was 1990.", "In 1991 it ended."]),
    # Ellipsis and runs of ? and !.
    ("en", "Wait... What? Really?! Yes!!! No…  Maybe.",
     ["Wait...", "What?", "Really?!", "Yes!!!", "No…", "Maybe."]),
    ("en", "Wait... what? I see.", ["Wait... what?", "I see."]),
    # Nothing before a lower-case word.
    ("en", "It was fine. and then? it rained! so", ["It was fine. and then? it rained! so"]),
    # Quotes and brackets close a sentence; opening ones start one.
    ("en", 'He said "Hi." Then he left.', ['He said "Hi."', "Then he left."]),
    ("en", 'Stop. "Why?" (Because.) [Fine.] OK.',
     ["Stop.", '"Why?"', "(Because.)", "[Fine.]", "OK."]),
    ("en", "He asked 'why?' and left.", ["He asked 'why?' and left."]),
    # URLs and e-mail addresses hold no whitespace: no break inside them.
    ("en", "Visit www.example.org/A.B?c=d. Mail a.b@example.com now. OK",
     ["Visit www.example.org/A.B?c=d.", "Mail a.b@example.com now.", "OK"]),
    # A break must have words on both sides.
    ("en", "... And so it goes. Yes", ["... And so it goes.", "Yes"]),
    ("en", "Hello. (!)", ["Hello. (!)"]),
    ("en", "Hi!  \u2028 Yes.", ["Hi!", "Yes."]),
    # French: no-break spaces before ? ! : ; and inside guillemets.
    ("fr", f"Vraiment{NBSP}? Oui.", [f"Vraiment{NBSP}?", "Oui."]),
    ("fr", f"Vraiment{NNBSP}! Oui{NNBSP}; non.", [f"Vraiment{NNBSP}!", f"Oui{NNBSP}; non."]),
    ("fr", "Vraiment ? Oui.", ["Vraiment ?", "Oui."]),
    ("fr", f"Il a dit «{NBSP}Oui{NBSP}!{NBSP}» Puis il est parti.",
     [f"Il a dit «{NBSP}Oui{NBSP}!{NBSP}»", "Puis il est parti."]),
    ("fr", "M. Dupont, Mme. Durand et Mlle. Petit sont là. Ils partent.",
     ["M. Dupont, Mme. Durand et Mlle. Petit sont là.", "Ils partent."]),
    ("fr", "Né en 52 av. J.-C. Il régna. Voir art. 3. Le vol. Il part.",
     ["Né en 52 av. J.-C. Il régna.", "Voir art. 3.", "Le vol.", "Il part."]),
    ("fr", "C'est à la p. 3. Vraiment.", ["C'est à la p. 3.", "Vraiment."]),
    # Other languages: the default lists; a caseless script starts a sentence.
    ("es", "¿Qué? ¡Hola! Bien.", ["¿Qué?", "¡Hola!", "Bien."]),
    ("de", "Dr. Weber kam. Er ging.", ["Dr. Weber kam.", "Er ging."]),
    ("en", "Ελληνικά. Русский текст. 中文. עברית.",
     ["Ελληνικά.", "Русский текст.", "中文.", "עברית."]),
    # The private-use characters the rules write come back as they were.
    ("en", "x\ue000a. Y\ue001. Z\ue002 \ue000b \ue000 W. A.",
     ["x\ue000a.", "Y\ue001.", "Z\ue002 \ue000b \ue000 W. A."]),
]


@pytest.mark.parametrize("lang, line, expected", CASES)
def test_tricky_lines(lang, line, expected):
    assert split_sentences(line, lang) == expected


def test_a_split_drops_only_the_whitespace_between_sentences():
    for lang, line in [(lang, line) for lang, line, _ in CASES] + [
            ("fr", line) for line in random_lines()]:
        found = split_sentences(line, lang)
        rebuilt = f"{SPACE}+".join(regex.escape(sentence) for sentence in found)
        assert regex.fullmatch(rebuilt, line), (line, found)
        assert all(sentence.strip() for sentence in found) or found == [line]


PIECES = [
    "Mr.", "Dr.", "M.", "Mme.", "J.", "e.g.", "U.S.", "J.-C.", "No.", "p.", "vol.", "3.5",
    "12", "...", "…", "?!", "?", "!", ".", '"', "'", "«", "»", "(", ")", "¿", "¡", "the",
    "The", "Oui", "dog", "www.a.org", "a@b.com", NBSP, NNBSP, " ", "  ", "\t", "\u2028",
    "中", "\ue000", "\ue000a", "\ue001", "\ue002", "Ω", "é",
]


def random_lines(count=400, seed=24):
    rng = random.Random(seed)
    return ["".join(rng.choice(PIECES) + rng.choice(["", " ", " ", NBSP])
                    for _ in range(rng.randint(0, 14)))
            for _ in range(count)]


@pytest.mark.parametrize("lang", ["en", "fr", "de"])
def test_graph_splitter_agrees_with_python(lang):
    from keras_nmt.text import sentences_graph

    lines = [line for _, line, _ in CASES] + random_lines()
    graph = [[s.decode("utf-8") for s in row]
             for row in sentences_graph.split(lines, lang).to_list()]
    python = [split_sentences(line, lang) for line in lines]
    assert graph == python
    assert sum(len(found) > 1 for found in python) > 100  # the random lines do split
    assert all(all(found) for found in python[len(CASES):] if len(found) > 1)  # no empty one


def test_join_helpers():
    assert join_texts(["Il est là.", "", "Oui."]) == "Il est là. Oui."
    assert join_texts([""]) == ""
    assert nbest_rows([["a1", "a2", "a3"], ["b1"], ["c1", "c2"]]) == [
        ("a1", "b1", "c1"), ("a2", "b1", "c2"), ("a3", "b1", "c1")]
    first, second = np.full((2, 3), 1.0, np.float32), np.full((1, 2), 2.0, np.float32)
    joined = block_diagonal([first, second])
    assert joined.dtype == np.float32 and joined.shape == (3, 5)
    np.testing.assert_array_equal(joined, [[1, 1, 1, 0, 0], [1, 1, 1, 0, 0], [0, 0, 0, 2, 2]])
    assert block_diagonal([]).shape == (0, 0)


def test_graph_join_matches_the_python_join():
    import tensorflow as tf

    from keras_nmt.text import sentences_graph

    # Lines of 2, 1 and 3 sentences; n-best width 2; sentence 3 has one hypothesis, and
    # slot 1 of line 1 is empty in its one sentence.
    row_splits = tf.constant([0, 2, 3, 6], tf.int64)
    texts = tf.constant([["a", "a2"], ["b", "b2"], ["c", ""], ["d", ""], ["", "e2"],
                         ["f", "f2"]])
    scores = tf.constant([[-1.0, -2.0], [-3.0, -4.0], [-5.0, float("-inf")],
                          [-6.0, float("-inf")], [-7.0, -8.0], [-9.0, -10.0]])
    filled = tf.constant([[True, True], [True, True], [True, False], [True, False],
                          [True, True], [True, True]])
    joined, summed = sentences_graph.join_nbest(texts, scores, filled, row_splits)
    assert [[t.decode() for t in row] for row in joined.numpy()] == [
        ["a b", "a2 b2"], ["c", ""], ["d f", "d e2 f2"]]
    np.testing.assert_array_equal(summed, [[-4, -6], [-5, -np.inf], [-22, -24]])
    assert sentences_graph.join_sums(tf.constant([1, 0, 2, 3, 0, 4]), row_splits).numpy(
        ).tolist() == [1, 2, 7]

    rng = np.random.default_rng(0)
    attention = rng.random((6, 4, 5)).astype(np.float32)
    rows, columns = np.array([2, 3, 4, 1, 2, 0]), np.array([3, 1, 5, 2, 2, 4])
    got = sentences_graph.join_attention(tf.constant(attention), tf.constant(rows, tf.int32),
                                         tf.constant(columns, tf.int32), row_splits).numpy()
    blocks = [attention[s, : rows[s], : columns[s]] for s in range(6)]
    expected = [block_diagonal(blocks[0:2]), block_diagonal(blocks[2:3]),
                block_diagonal(blocks[3:6])]
    assert got.shape == (3, max(e.shape[0] for e in expected), max(e.shape[1] for e in expected))
    for line, matrix in enumerate(expected):
        np.testing.assert_array_equal(got[line, : matrix.shape[0], : matrix.shape[1]], matrix)
        assert got[line].sum() == pytest.approx(matrix.sum())
    empty = sentences_graph.join_attention(tf.zeros([0, 3, 4]), tf.zeros([0], tf.int32),
                                           tf.zeros([0], tf.int32), tf.constant([0], tf.int64))
    assert empty.shape == (0, 0, 0)
