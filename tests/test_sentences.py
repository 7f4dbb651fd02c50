"""Sentence splitting: the rules on tricky lines, the graph splitter's agreement with the
Python one, and the join of a line's translations (Python and graph): texts, the n-best
merge against brute force, block-diagonal attention."""

import itertools
import random
import subprocess
import sys

import numpy as np
import pytest
import regex

from keras_nmt.text.line_join import block_diagonal, join_texts, line_nbest
from keras_nmt.text.sentences import nonbreaking_prefixes, split_sentences
from keras_nmt.text.word import SPACE

NBSP, NNBSP = "\u00a0", "\u202f"
CJK_END = regex.compile(r"[。｡！？][^\p{L}\p{N}]*$")

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
    # Moses' prefixes: "No", "Art" and "pp" protect their period only before a number.
    ("en", "See No. 5 and pp. 12-14 of Art. 3. Then he left.",
     ["See No. 5 and pp. 12-14 of Art. 3.", "Then he left."]),
    ("en", "He said No. Then he left.", ["He said No.", "Then he left."]),
    ("en", "He said no. 20 people left.", ["He said no.", "20 people left."]),
    ("en", "Capt. Hook and Gen. Grant met at the Corp. today. Then Sgt. Pepper came.",
     ["Capt. Hook and Gen. Grant met at the Corp. today.", "Then Sgt. Pepper came."]),
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
    # French prefixes (Moses' list): "M.", "av.", "p.", "ex.", "chap.", "etc." never end
    # a sentence; French writes "Mme" and "Mlle" without a period.
    ("fr", "M. Dupont, Mme Durand et Mlle Petit sont là. Ils partent.",
     ["M. Dupont, Mme Durand et Mlle Petit sont là.", "Ils partent."]),
    ("fr", "Né en 52 av. J.-C. Il régna. Voir art. 3. Le chap. 2 aussi.",
     ["Né en 52 av. J.-C. Il régna.", "Voir art. 3.", "Le chap. 2 aussi."]),
    ("fr", "C'est à la p. 3. Vraiment.", ["C'est à la p. 3.", "Vraiment."]),
    ("fr", "Voir p. ex. Paris, Lyon, etc. Tout va bien.",
     ["Voir p. ex. Paris, Lyon, etc. Tout va bien."]),
    # A prefix is a whole word: "y" is one, "Allons-y" is not; French has no "No".
    ("fr", "Allons-y. Il part. Voir No. 5.", ["Allons-y.", "Il part.", "Voir No.", "5."]),
    # Chinese and Japanese: no whitespace after an end; hiragana after a closing quote
    # goes on with the sentence; the fullwidth period needs whitespace (decimals).
    ("en", "他来了。我走了！你呢？好。", ["他来了。", "我走了！", "你呢？", "好。"]),
    ("en", "「はい。」と言った。次は？ 明日だ。「いいえ。」「なぜ？」",
     ["「はい。」と言った。", "次は？", "明日だ。", "「いいえ。」", "「なぜ？」"]),
    ("fr", "価格は３．５ドルです。Il a dit « 好。» Puis il est parti.",
     ["価格は３．５ドルです。", "Il a dit « 好。»", "Puis il est parti."]),
    ("en", "第３章．Next one。", ["第３章．Next one。"]),
    # Other languages: their own lists; a caseless script starts a sentence.
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
        # (maybe none after a Chinese or Japanese end)
        rebuilt = "".join(regex.escape(sentence) + (
            "" if last else f"{SPACE}*" if CJK_END.search(sentence) else f"{SPACE}+")
            for last, sentence in zip([False] * (len(found) - 1) + [True], found))
        assert regex.fullmatch(rebuilt, line), (line, found)
        assert all(sentence.strip() for sentence in found) or found == [line]


PIECES = [
    "Mr.", "Dr.", "M.", "Mme.", "J.", "e.g.", "U.S.", "J.-C.", "No.", "p.", "vol.", "3.5",
    "12", "...", "…", "?!", "?", "!", ".", '"', "'", "«", "»", "(", ")", "¿", "¡", "the",
    "The", "Oui", "dog", "www.a.org", "a@b.com", NBSP, NNBSP, " ", "  ", "\t", "\u2028",
    "中", "\ue000", "\ue000a", "\ue001", "\ue002", "Ω", "é", "no.", "Art.", "y.", "-y.", "etc.",
    "。", "！", "？", "．", "｡", "「", "」", "と", "ア", "３", "Corp.",
]


def random_lines(count=400, seed=24):
    rng = random.Random(seed)
    return ["".join(rng.choice(PIECES) + rng.choice(["", " ", " ", NBSP])
                    for _ in range(rng.randint(0, 14)))
            for _ in range(count)]


@pytest.mark.parametrize("lang", ["en", "fr", "de", "zh"])
def test_graph_splitter_agrees_with_python(lang):
    from keras_nmt.text import sentences_graph

    lines = [line for _, line, _ in CASES] + random_lines()
    graph = [[s.decode("utf-8") for s in row]
             for row in sentences_graph.split(lines, lang).to_list()]
    python = [split_sentences(line, lang) for line in lines]
    assert graph == python
    assert sum(len(found) > 1 for found in python) > 100  # the random lines do split
    assert all(all(found) for found in python[len(CASES):] if len(found) > 1)  # no empty one


def test_the_prefix_lists_are_moses_lists_read_from_sacremoses():
    always, numeric = nonbreaking_prefixes("en")
    assert {"Mr", "Dr", "Corp", "e.g"} <= set(always) and "no" not in always
    assert set(numeric) == {"No", "Art", "pp"}
    assert "etc" in nonbreaking_prefixes("fr")[0] and not nonbreaking_prefixes("fr")[1]
    assert nonbreaking_prefixes("fr-CA") == nonbreaking_prefixes("fr")
    assert nonbreaking_prefixes("ja") == nonbreaking_prefixes("en")  # no list: English's
    assert not [word for word in always + numeric if " " in word]
    assert len(always[0]) >= len(always[-1])  # longest first


def test_the_prefix_files_read_alone_are_those_sacremoses_reads(monkeypatch):
    """The data module read on its own gives every language the lists that sacremoses'
    public reader gives, which is also what is read where the module is not found."""
    from sacremoses.corpus import NonbreakingPrefixes

    from keras_nmt.text import sentences

    codes = sorted(set(NonbreakingPrefixes().available_langs.values()))
    assert {"en", "fr", "de", "zh"} <= set(codes)
    alone = {code: nonbreaking_prefixes(code) for code in codes}
    monkeypatch.setattr(sentences, "_PREFIX_MODULE", "no_such_module")
    sentences._moses_prefix_files.cache_clear()
    sentences.nonbreaking_prefixes.cache_clear()
    try:
        assert {code: nonbreaking_prefixes(code) for code in codes} == alone
    finally:
        monkeypatch.undo()
        sentences._moses_prefix_files.cache_clear()
        sentences.nonbreaking_prefixes.cache_clear()


def test_splitting_loads_neither_the_moses_tokenizer_nor_joblib():
    """Reading the lists leaves the sacremoses package (its tokenizer, joblib) unimported."""
    code = ("import sys; from keras_nmt.text.sentences import split_sentences; "
            "assert split_sentences('Mr. Smith is here. He left.', 'en') == "
            "['Mr. Smith is here.', 'He left.']; "
            "print(sorted(m for m in ('sacremoses', 'joblib') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_join_helpers():
    assert join_texts(["Il est là.", "", "Oui."]) == "Il est là. Oui."
    assert join_texts(["Il est là.", "", "Oui."], "fr") == "Il est là. Oui."
    assert join_texts(["他来了。", "", "我走了。"], "zh") == "他来了。我走了。"
    assert join_texts(["来た。", "帰った。"], "ja-JP") == "来た。帰った。"
    assert join_texts([""]) == ""
    first, second = np.full((2, 3), 1.0, np.float32), np.full((1, 2), 2.0, np.float32)
    joined = block_diagonal([first, second])
    assert joined.dtype == np.float32 and joined.shape == (3, 5)
    np.testing.assert_array_equal(joined, [[1, 1, 1, 0, 0], [1, 1, 1, 0, 0], [0, 0, 0, 2, 2]])
    assert block_diagonal([]).shape == (0, 0)


def test_a_lines_nbest_list_is_the_best_combinations():
    # Sentence A's second hypothesis is nearly as good as its first, B's is far worse: the
    # line's second best changes A only.
    assert line_nbest([[-0.10, -0.12], [-0.10, -2.0]], [1, 1], 2) == [
        (pytest.approx(-0.10), (0, 0)), (pytest.approx(-0.11), (1, 0))]
    # The score is the mean weighted by the sentences' source lengths.
    [(score, chosen)] = line_nbest([[-1.0], [-2.0]], [2, 3], 1)
    assert score == pytest.approx(-1.6) and chosen == (0, 0)
    # Unsorted lists are ranked by score; ties go to the earlier hypothesis.
    assert line_nbest([[-2.0, -1.0, -1.0]], [1], 3) == [(-1.0, (1,)), (-1.0, (2,)), (-2.0, (0,))]
    # Fewer combinations than asked: all of them.
    assert [c for _, c in line_nbest([[-1.0], [-1.0]], [1, 1], 3)] == [(0, 0)]


def test_a_lines_nbest_list_ranks_the_hypotheses_that_meet_its_constraints_first():
    """Finding: the pool [met -1.2, unmet -0.5] of a line's first sentence gave the unmet
    hypothesis, though the search ranks a hypothesis that misses a phrase below every one
    that meets them all. The fewest unmet come first, then the score."""
    found = line_nbest([[-1.2, -0.5], [-0.3]], [4, 3], 2, unmet=[[0, 1], [0]])
    assert [chosen for _, chosen in found] == [(0, 0), (1, 0)]
    assert found[0][0] == pytest.approx((4 * -1.2 + 3 * -0.3) / 7)
    # Without unmet phrases, the score alone, as before.
    assert [c for _, c in line_nbest([[-1.2, -0.5], [-0.3]], [4, 3], 2)] == [(1, 0), (0, 0)]
    # Unmet counts add up over the line: one miss in each sentence ranks below one in all.
    found = line_nbest([[-0.1, -0.2], [-0.1, -0.2]], [1, 1], 4, unmet=[[1, 0], [0, 1]])
    assert [c for _, c in found] == [(1, 0), (0, 0), (1, 1), (0, 1)]


def test_a_joined_translation_keeps_the_hypothesis_that_meets_the_constraints():
    from keras_nmt.decoding.translation import Translation, join_translations, ranked

    met = Translation("le chat", ("le", "chat"), -1.2, ("the", "cat"))
    unmet = Translation("un chat", ("un", "chat"), -0.5, ("the", "cat"), unmet=("le",))
    first = ranked([unmet, met], 2)  # the scores alone would put "un chat" first
    second = ranked([Translation("ici", ("ici",), -0.3, ("here",))], 2)
    line = join_translations([first, second], "fr")
    assert (line.text, line.unmet) == ("le chat ici", ())
    assert [h.text for h in line.hypotheses] == ["le chat ici", "un chat ici"]
    assert line.hypotheses[1].unmet == ("le",)


def brute_force(scores, weights):
    """Every combination of one hypothesis per sentence with its line score, best first."""
    total = np.float32(sum(weights))
    every = []
    for chosen in itertools.product(*(range(len(found)) for found in scores)):
        value = np.float32(0.0)
        for found, weight, k in zip(scores, weights, chosen):
            value = value + np.float32(weight) * np.float32(found[k])
        every.append((float(value / total), chosen))
    return sorted(every, key=lambda item: -item[0])


def random_nbest_lists(rng, sentences, width):
    """Per sentence 1..width scores, best first, drawn from few values (ties) and many."""
    return [sorted((rng.choice([-0.5, -1.0, -1.25, round(-3 * rng.random(), 3)])
                    for _ in range(rng.randint(1, width))), reverse=True)
            for _ in range(sentences)]


def test_the_nbest_merge_agrees_with_brute_force():
    rng = random.Random(7)
    for _ in range(300):
        scores = random_nbest_lists(rng, rng.randint(1, 5), 4)
        weights = [rng.randint(1, 30) for _ in scores]
        count = rng.randint(1, 6)
        got = line_nbest(scores, weights, count)
        every = brute_force(scores, weights)
        assert len(got) == min(count, len(every))
        # The same scores in the same order (ties may pick other, equal combinations) ...
        assert [score for score, _ in got] == [score for score, _ in every[: len(got)]]
        # ... each the score of its combination, no combination twice.
        scored = dict((chosen, score) for score, chosen in every)
        assert all(scored[chosen] == score for score, chosen in got)
        assert len({chosen for _, chosen in got}) == len(got)
        assert got[0][1] == (0,) * len(scores)  # the best: each sentence's best


def test_the_nbest_merge_with_unmet_phrases_agrees_with_brute_force():
    """Ranked by the line's unmet phrases, then its score: the same (unmet, score) list
    as every combination sorted."""
    rng = random.Random(11)
    for _ in range(300):
        scores = random_nbest_lists(rng, rng.randint(1, 5), 4)
        unmet = [[rng.choice([0, 0, 1, 2]) for _ in found] for found in scores]
        weights = [rng.randint(1, 30) for _ in scores]
        count = rng.randint(1, 6)
        got = line_nbest(scores, weights, count, unmet)
        missed = {chosen: sum(unmet[n][k] for n, k in enumerate(chosen))
                  for _, chosen in brute_force(scores, weights)}
        every = sorted(brute_force(scores, weights), key=lambda item: missed[item[1]])
        assert [(missed[c], score) for score, c in got] == [
            (missed[c], score) for score, c in every[: len(got)]]
        assert len({chosen for _, chosen in got}) == len(got)


def test_graph_join_matches_the_python_join():
    import tensorflow as tf

    from keras_nmt.text import sentences_graph

    # The n-best join: random lines of 1-4 sentences, lists of 1-K hypotheses (ties, empty
    # texts); the graph gives the Python merge's lists, bit for bit, for both separators.
    rng = random.Random(3)
    for trial in range(30):
        width, lang = rng.randint(1, 4), rng.choice(["en", "fr", "zh"])
        counts = [rng.randint(1, 4) for _ in range(rng.randint(0, 6))]
        lists = random_nbest_lists(rng, sum(counts), width)
        texts = [[f"s{s}h{k}" if k == 0 or rng.random() < 0.8 else "" for k in range(len(found))]
                 for s, found in enumerate(lists)]
        weights = [rng.randint(1, 12) for _ in lists]
        pad = [width - len(found) for found in lists]
        row_splits = np.cumsum([0, *counts])
        joined, scored = sentences_graph.join_nbest(
            tf.constant([t + [""] * n for t, n in zip(texts, pad)], tf.string, [len(lists), width]),
            tf.constant([f + [-np.inf] * n for f, n in zip(lists, pad)], tf.float32,
                        [len(lists), width]),
            tf.constant([[True] * len(f) + [False] * n for f, n in zip(lists, pad)], tf.bool,
                        [len(lists), width]),
            tf.constant(weights, tf.float32, [len(lists)]), tf.constant(row_splits, tf.int64),
            lang)
        assert joined.shape == scored.shape == (len(counts), width)
        for line in range(len(counts)):
            members = range(row_splits[line], row_splits[line + 1])
            if len(members) == 1:  # kept as it is
                [s] = members
                expected = [(float(np.float32(v)), t) for v, t in zip(lists[s], texts[s])]
            else:
                expected = [
                    (score, join_texts([texts[s][k] for s, k in zip(members, chosen)], lang))
                    for score, chosen in line_nbest([lists[s] for s in members],
                                                    [weights[s] for s in members], width)]
                expected = expected[: max(len(lists[s]) for s in members)]
            got = [(float(scored[line, k]), joined[line, k].numpy().decode())
                   for k in range(len(expected))]
            assert got == expected, (trial, line)
            assert not any(joined[line, len(expected):].numpy())  # the rest empty
            assert np.all(np.isneginf(scored[line, len(expected):]))

    # The A/B example, through the graph: a line of two sentences, a line of one.
    joined, scored = sentences_graph.join_nbest(
        tf.constant([["a1", "a2"], ["b1", "b2"], ["c1", "c2"]]),
        tf.constant([[-0.10, -0.12], [-0.10, -2.0], [-1.0, -3.0]]),
        tf.ones([3, 2], tf.bool), tf.constant([1.0, 1.0, 4.0]),
        tf.constant([0, 2, 3], tf.int64), "en")
    assert joined.numpy().tolist() == [[b"a1 b1", b"a2 b1"], [b"c1", b"c2"]]
    np.testing.assert_allclose(scored, [[-0.10, -0.11], [-1.0, -3.0]])

    row_splits = tf.constant([0, 2, 3, 6], tf.int64)
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
