"""The tokenizer: its rules, the graph version's agreement with the Python mirror."""


import pytest

from keras_nmt.text import word as tokenizer
from keras_nmt.core.constants import EOS_ID, UNK_ID
from keras_nmt.core.errors import VocabularyError
from keras_nmt.text.vocab import Vocabulary

SAMPLES = [
    "L'homme est là, aujourd'hui. 3.5 1,000 pommes!",
    "Bonjour\u202f! Ça va\u00a0? Oui\u00a0: très «bien».",
    "I don't know John's car... (yes)",
    "",
    "   \t ",
    "中文 текст ελληνικά 😀 ok.",
    "a,b.c 1.5. end,",
    "tab\tseparated\u2003em-space\u200bzero",
    "\x07control\x1bchars",
    # Rules added to follow Moses (each also has an exact expectation below).
    "Mr. Smith et M. Dupont, etc. vs. J.P. Morgan at 2 p.m. in the U.S. end.",
    "Prices rose 0.5% to $100,000; 100 000 $ et 60 % km/h gaining/losing.",
    "Wait... what?! ... Yes.... ....",
    "C’est l’année d’œil qu’il aujourd'hui l'homme d'Arc",
    "students' prayers 'quoted' rock'n'roll 1990's 4' tall '' x",
    "He said \"hi.\" She said 'bye.'",
    "No. 5 and No. More art. 3 a. b. c. d. E. f",
    "IHNED.cz www.example.org e-mail: a@b.com & co + 1=1 * # _ ~ ^ | \\ <x>",
    "Leading. Trailing. ,5 5, x,y 1,5,",
    "Ελληνικά. Русский текст. 中文。日本語、テスト！ עברית. العربية.",
    "U+00A0:\u00a0a\u00a0b. U+202F:\u202fc\u202f! Thin\u2009space\u3000ideo",
    "emoji 😀👍🏽 family 👨‍👩‍👧 flag 🇫🇷.",
    "ctl\x00nul\x1funit\x7fdel\x85nel\ufeffbom.",
    "combining e\u0301 te\u0301le\u0301 and H₂O ² ½.",
    "'Start' and end'",
    "qu'on a. b. Vous êtes à sec. Le vol. 3",
]


EXPECTED = [
    ("en", "Mr. Smith met Prof. Jones, Sens. Kerry and J. Doe.",
     ["Mr.", "Smith", "met", "Prof.", "Jones", ",", "Sens.", "Kerry", "and", "J.", "Doe", "."]),
    ("fr", "M. Dupont et MM. Durand, etc. Fin.",
     ["M.", "Dupont", "et", "MM.", "Durand", ",", "etc.", "Fin", "."]),
    # A period after a word that holds a period and a letter stays.
    ("en", "J.P. Morgan at 2 p.m. in the U.S. and IHNED.cz today",
     ["J.P.", "Morgan", "at", "2", "p.m.", "in", "the", "U.S.", "and", "IHNED.cz", "today"]),
    # ... unless only digits: 3.5. splits.
    ("en", "It was 3.5.", ["It", "was", "3.5", "."]),
    # A period before a lower-case word stays; before anything else it splits.
    ("en", "the Dept. could do it, etc. and so on, etc.",
     ["the", "Dept.", "could", "do", "it", ",", "etc.", "and", "so", "on", ",", "etc", "."]),
    ("en", "a. b. c. D", ["a.", "b.", "c", ".", "D"]),
    ("en", "No. 5 but No. More", ["No.", "5", "but", "No", ".", "More"]),
    ("fr", "qu'on a. Vous êtes à sec.", ["qu'", "on", "a", ".", "Vous", "êtes", "à", "sec."]),
    # Symbols are tokens of their own; hyphens stay inside words.
    ("en", "0.5% of $100,000 at 200 km/h, e-mail a@b.com & co",
     ["0.5", "%", "of", "$", "100,000", "at", "200", "km", "/", "h", ",", "e-mail", "a", "@",
      "b.com", "&", "co"]),
    ("fr", "100 000$ et 1,5 % : «oui»",
     ["100", "000", "$", "et", "1,5", "%", ":", "«", "oui", "»"]),
    # Runs of periods are one token.
    ("en", "Wait... what?! Yes....", ["Wait", "...", "what", "?", "!", "Yes", "...."]),
    # Commas: kept between digits only; a leading one stays on its number.
    ("en", "1,000, a,b ,5 5,", ["1,000", ",", "a", ",", "b", ",", "5", "5", ","]),
    ("en", ",5 x", [",5", "x"]),
    # Apostrophes, French: elision on the left; the typographic one is its own token.
    ("fr", "L'homme d'Arc aujourd'hui, C’est l’eau",
     ["L'", "homme", "d'", "Arc", "aujourd'", "hui", ",", "C", "’", "est", "l", "’", "eau"]),
    # (A quote that starts or ends the line is not split, as in Moses.)
    ("fr", "'oui' 4' dit-il'", ["'oui", "'", "4", "'", "dit-il'"]),
    # Apostrophes, English: clitics on the right; other quotes stand alone.
    ("en", "I don't know John's 1990's car",
     ["I", "don", "'t", "know", "John", "'s", "1990", "'s", "car"]),
    ("en", "students' prayers, 'flecked in' and 4' tall",
     ["students", "'", "prayers", ",", "'", "flecked", "in", "'", "and", "4", "'", "tall"]),
    ("en", "He said 'bye.'", ["He", "said", "'", "bye", ".", "'"]),
    ("en", 'A "quote."', ["A", '"', "quote", ".", '"']),
    # Spaces of every kind separate tokens; control characters too.
    ("fr", "Ça va\u00a0? Oui\u202f! a\u2009b\u3000c", ["Ça", "va", "?", "Oui", "!", "a", "b", "c"]),
    ("en", "a\x00b\x1fc\x7fd\ufeffe", ["a", "b", "c", "d", "e"]),
    # Non-Latin scripts, emoji, combining marks.
    ("en", "Русский текст. 中文。Ελλάδα!", ["Русский", "текст", ".", "中文", "。", "Ελλάδα", "!"]),
    ("en", "ok 😀👍 e\u0301te\u0301.", ["ok", "😀", "👍", "e\u0301te\u0301", "."]),
]


@pytest.mark.parametrize("lang, line, tokens", EXPECTED)
def test_moses_like_rules(lang, line, tokens):
    assert tokenizer.tokenize(line, lang) == tokens


@pytest.mark.parametrize("lang", ["en", "fr", "de"])
def test_graph_tokenizer_agrees_on_rule_cases(lang):
    from keras_nmt.text import word_graph as text

    lines = [line for _, line, _ in EXPECTED]
    graph = [[t.decode("utf-8") for t in row] for row in text.tokenize(lines, lang).to_list()]
    assert graph == [tokenizer.tokenize(line, lang) for line in lines]


def test_detokenize_handles_new_tokens():
    for lang, line in [
        ("en", "Mr. Smith paid $5 for 60% at 200 km/h, e-mail... \"Yes\" he said."),
        ("fr", "M. Dupont: «C’est l’année», etc. Il a payé 3,5%... \"Oui\"."),
    ]:
        assert tokenizer.detokenize(tokenizer.tokenize(line, lang), lang) == line


def test_rules():
    assert tokenizer.tokenize("L'homme est là.", "fr") == ["L'", "homme", "est", "là", "."]
    assert tokenizer.tokenize("I don't.", "en") == ["I", "don", "'t", "."]
    assert tokenizer.tokenize("Ça va\u202f?", "fr") == ["Ça", "va", "?"]
    assert tokenizer.tokenize("3.5 and 1,000, ok", "en") == ["3.5", "and", "1,000", ",", "ok"]
    assert tokenizer.tokenize("   ", "en") == []


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_detokenize_inverts_tokenize_on_clean_text(lang):
    for text in ["L'homme est là, aujourd'hui.", "Il a 3.5 pommes!", "Le chat (noir) dort."]:
        if lang == "en" and "'" in text:
            continue
        assert tokenizer.detokenize(tokenizer.tokenize(text, lang), lang) == text


@pytest.mark.parametrize("lang", ["en", "fr", "de"])
def test_graph_tokenizer_agrees_with_python_mirror(lang):
    from keras_nmt.text import word_graph as text

    graph = [[t.decode("utf-8") for t in row] for row in text.tokenize(SAMPLES, lang).to_list()]
    assert graph == [tokenizer.tokenize(line, lang) for line in SAMPLES]


def test_vocabulary(tmp_path):
    vocab = Vocabulary.build([["a", "b", "b"], ["c", "b", "a"]], size=6)
    assert vocab.tokens == ("<pad>", "<unk>", "<s>", "</s>", "b", "a")  # c cut by the size
    assert vocab.encode(["a", "c"]) == [5, UNK_ID]
    assert vocab.decode([5, 4, EOS_ID, 4]) == ["a", "b"]
    vocab.save(tmp_path / "v.txt")
    assert Vocabulary.load(tmp_path / "v.txt").tokens == vocab.tokens
    with pytest.raises(VocabularyError, match="not found"):
        Vocabulary.load(tmp_path / "missing.txt")
    (tmp_path / "bad.txt").write_text("x\ny\n")
    with pytest.raises(VocabularyError, match="must start with"):
        Vocabulary.load(tmp_path / "bad.txt")


# Tokens that exercise every detokenization rule: straight quotes (paired, unpaired,
# adjacent), French elision, English clitics, punctuation that attaches left or right.
DETOKENIZE_POOL = [
    ".", ",", "...", "..", '"', "'", "'s", "'t", "''", "l'", "qu'", "aujourd'", "(", ")",
    "[", "]", "{", "}", "«", "»", "“", "”", "’", "/", "$", "%", "!", "?", ":", ";", "…",
    "a", "Bob", "3.5", "1,000", "U.S.", "é", "😀", "e-mail", "<unk>",
]


def _generated_token_lists(seed: int, count: int) -> list[list[str]]:
    import random

    rng = random.Random(seed)
    lists = [tokenizer.tokenize(line, lang) for line in SAMPLES for lang in ("en", "fr")]
    lists += [[rng.choice(DETOKENIZE_POOL) for _ in range(rng.randint(0, 12))]
              for _ in range(count)]
    return lists


def test_detokenize_examples():
    assert tokenizer.detokenize(["«", "Oui", "»", ",", "dit", "l'", "homme", "."], "fr") == \
        "«Oui», dit l'homme."
    assert tokenizer.detokenize(["I", "don", "'t", "pay", "$", "5", "."], "en") == "I don't pay $5."
    # Straight quotes alternate: open (glued right), close (glued left), open again.
    assert tokenizer.detokenize(['"', "a", '"', "b", '"', "c"], "en") == '"a" b "c'
    assert tokenizer.detokenize(['"', '"', "x", "(", '"', ")"], "en") == '"" x (")'
    assert tokenizer.detokenize(["", "a", "", "."], "de") == "a."
    assert tokenizer.detokenize([], "en") == ""


@pytest.mark.parametrize("lang", ["en", "fr", "de"])
def test_graph_detokenizer_agrees_with_python(lang):
    import tensorflow as tf

    from keras_nmt.text import word_graph as text

    lists = _generated_token_lists(seed=len(lang), count=1500)
    tokens = tf.ragged.constant(lists, dtype=tf.string, ragged_rank=1, inner_shape=())
    graph = [line.decode("utf-8") for line in text.detokenize(tokens, lang).numpy()]
    assert graph == [tokenizer.detokenize(tokens, lang) for tokens in lists]
