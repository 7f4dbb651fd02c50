"""The JavaScript text rules of the web export (keras_nmt/web/js/text_rules.mjs, run by
Node.js on the document of keras_nmt.text.rule_data) give the Python rules' output, as
keras_nmt.web.rules_check compares them: on the 100,000 generated lines the TensorFlow
twins are compared on (tests/text_lines.py, each line in one language), token words
included; the Unicode classes they read apart are the listed ones; each construct of
rule_data.DIALECT converts to known JavaScript that behaves as the Python does; and a
few hand-picked lines give known tokens, text and sentences in both."""

import json
import shutil
import subprocess
import unicodedata

import pytest
import regex

if shutil.which("node") is None:
    pytest.skip("node (Node.js) is not on PATH: the JavaScript text rules run in it",
                allow_module_level=True)

from keras_nmt.text import rule_data, sentences, word
from keras_nmt.text.twin_check import CLASSES
from keras_nmt.web import rules_check
from text_lines import LANGS, generated_lines

TEXT_RULES = rules_check.CLI.parent / "text_rules.mjs"


def node_eval(script: str, data) -> object:
    """``script`` (an ES module body that sees ``data`` and ``TextRules``, and sets
    ``result``) run by node -> ``result``, through JSON."""
    source = (f"import {{ TextRules }} from {json.dumps(TEXT_RULES.as_uri())};\n"
              f"const data = {json.dumps(data)};\nlet result;\n{script}\n"
              "process.stdout.write(JSON.stringify(result));\n")
    done = subprocess.run(["node", "--input-type=module", "-"], input=source.encode("utf-8"),
                          capture_output=True, check=True)
    return json.loads(done.stdout)


@pytest.mark.end_to_end
def test_the_js_rules_agree_on_100k_generated_lines():
    """Line i in LANGS[i % 3], as the twins' default run: one node process for all."""
    lines = generated_lines(100_000, seed=0)
    langs = [LANGS[i % len(LANGS)] for i in range(len(lines))]
    differences = rules_check.js_differences(lines, langs)
    assert differences == {rule: [] for rule in rules_check.RULES}, {
        rule: [(langs[i], lines[i]) for i in where[:5]] for rule, where in differences.items()}


def test_the_engines_read_the_unicode_classes_as_listed():
    """Every class the tables use holds the same code points in V8 and regex but the
    listed ones (Unicode 17's additions, rules_check.KNOWN_JS_DIFFERENCES): a new one
    fails here, naming it."""
    classes = rules_check.table_classes(LANGS)
    assert set(classes) == set(CLASSES)
    found = rules_check.class_differences(classes)
    listed = {name: {c for first, last in runs for c in range(first, last + 1)}
              for name, runs in rules_check.KNOWN_JS_DIFFERENCES.items()}
    drift = {name: [f"U+{c:04X} {unicodedata.name(chr(c), '?')}"
                    for c in sorted(set(points) ^ listed.get(name, set()))][:20]
             for name, points in found.items()}
    assert {name: rules_check.as_ranges(points) for name, points in found.items() if points} \
        == rules_check.KNOWN_JS_DIFFERENCES, {name: c for name, c in drift.items() if c}


def test_the_known_differences_show_where_the_docs_say():
    """A Unicode 17 letter: a token of its own in JavaScript only, and a sentence start
    for Python only. U+0295, which RE2 reads apart (twin_check), JavaScript reads as Python."""
    lines = ["a\u0558b", "Il dit oui. \U00018E00 est là.", "Il dit oui. \u0295a est là."]
    assert rules_check.js_differences(lines, "fr") == {
        "tokenize": [0], "detokenize": [0], "split_sentences": [1], "token_words": [0]}
    js = rules_check.js_outputs(lines, ["fr"] * 3)
    assert js[0]["tokens"] == ["a", "\u0558", "b"] and word.tokenize(lines[0], "fr") == ["a\u0558b"]
    assert js[2]["sentences"] == ["Il dit oui.", "\u0295a est là."]


def test_the_script_names_are_read_as_their_script_property():
    text = "".join(map(chr, range(0x3000, 0x3100))) + "".join(map(chr, range(0x1B000, 0x1B200)))
    for name in rule_data.SCRIPTS:
        assert regex.findall(rf"\p{{{name}}}", text) == regex.findall(rf"\p{{Script={name}}}", text)


# Per construct of DIALECT that a conversion deals with: (Python, JavaScript) pairs.
CONVERSIONS = {
    "script property": [(r"\p{Hiragana}", r"\p{Script=Hiragana}"),
                        (r"[^\P{Lo}\p{Hiragana}]", r"[^\P{Lo}\p{Script=Hiragana}]")],
    "identity escape": [(r"c\.\-à\-d", r"c\.-à-d"), (r"a\#\&\~\ b", "a#&~ b")],
    "identity escape in a class": [(r"[^\p{L}\-\&]", r"[^\p{L}\-&]")],
    "end anchor": [(r"(\p{N}),$", r"(\p{N}),(?=\n?$)")],
    "any character": [("a.b", r"a[^\n]b")],
    "lone brace or bracket": [("a}", r"a\}"), ("]", r"\]"), ("{x", r"\{x")],
    "quantifier without minimum": [("a{,3}", "a{0,3}")],
    "leading ] in a class": [("[^]a]", r"[^\]a]")],
    "group reference": [(r"\1 \2", "$1 $2")],
    "dollar": [("\x02$\x03", "\x02$$\x03")],
    "escaped backslash": [("\\\\1", "\\1")],
}


def test_every_conversion_of_the_dialect_is_tested_here():
    assert set(CONVERSIONS) == {d.construct for d in rule_data.DIALECT if d.kind != "runtime"}


@pytest.mark.parametrize("construct", sorted(CONVERSIONS))
def test_each_construct_converts_to_known_javascript(construct):
    kind = next(d.kind for d in rule_data.DIALECT if d.construct == construct)
    convert, pieces = ((rule_data.js_pattern, rule_data.pattern_pieces) if kind == "pattern"
                       else (rule_data.js_replacement, rule_data.replacement_pieces))
    for python, js in CONVERSIONS[construct]:
        assert convert(python) == js
        assert construct in {name for name, _ in pieces(python)}
    entry = next(d for d in rule_data.DIALECT if d.construct == construct)
    assert convert(entry.python) == entry.js


def test_common_syntax_passes_unchanged():
    for pattern in (r"(^| )([A-Z]|Mr)\.( +\p{N})", r"[^\p{L}\p{N}\p{M} .'`,-]", r"(?:a|b)*?c{2,3}",
                    "\x02([(\\[{«“/’])\x03 ", r"[^\p{L}\p{N}\-]"):
        assert rule_data.js_pattern(pattern) == pattern
    assert rule_data.js_replacement("\\1\\2\x01\\3") == "$1$2\x01$3"


@pytest.mark.parametrize("pattern", [r"\d", r"\w", r"\b", r"\1", r"\x41", "\\", r"(?=a)", r"(?i)a",
                                     r"(?P<n>a)", "a*+", "a{2}+", "[[:alpha:]]", "[a&&b]", "[a--b]",
                                     r"[\p{L}-z]", r"\p{Greek}", r"\pL", "[a", "a{}"])
def test_an_unknown_pattern_construct_raises(pattern):
    with pytest.raises(rule_data.UnknownConstruct, match="not in rule_data.DIALECT"):
        rule_data.js_pattern(pattern)


@pytest.mark.parametrize("replacement", [r"\n", r"\g<1>", r"\12", r"\0", "\\"])
def test_an_unknown_replacement_construct_raises(replacement):
    with pytest.raises(rule_data.UnknownConstruct):
        rule_data.js_replacement(replacement)


def test_the_conversions_behave_in_node_as_in_python():
    """Each converted example rewrites texts in JavaScript as regex.sub does in Python:
    the end anchor before a final newline, the any-character against \\r and U+2028."""
    cases = [("(a)$", r"<\1>", "a\n"), ("(a)$", r"<\1>", "a\na"), ("a.", "X", "a\ra\u2028a\nab"),
             (r"(c\.\-à\-d\#)", r"[\1]", "c.-à-d# c.-à-d"), ("[]a]+", "_", "]a]b"),
             (r"\p{Hiragana}+", "H", "ひらがなカタカナー"), ("(x)", r"$\1$", "axb"),
             ("{a}]", r"\\", "{a}]"), ("ab{,2}", "-", "abbbc")]
    js = [[rule_data.js_pattern(p), rule_data.js_replacement(r), t] for p, r, t in cases]
    found = node_eval("result = data.map(([p, r, t]) => t.replace(new RegExp(p, 'gu'), r));", js)
    expected = ["<a>\n", "a\n<a>", "XXa\nX", "[c.-à-d#] c.-à-d", "_b", "Hカタカナー", "a$x$b", "\\",
                "-bc"]
    assert [regex.sub(p, r, t) for p, r, t in cases] == expected
    assert found == expected


def test_the_tables_use_these_constructs():
    """What the tables meet of DIALECT: the Hiragana script, regex.escape's escapes in the
    prefix lists, $ anchors and the replacements' groups and the English $ rule."""
    assert rule_data.constructs_used(LANGS) == {
        "script property", "identity escape", "end anchor", "group reference", "dollar"}


# Hand-picked lines: (lang, line, tokens, detokenized tokens, sentences).
LINES = [
    ("en", "I don't pay $100. Mr. Smith does.",
     ["I", "don", "'t", "pay", "$", "100", ".", "Mr.", "Smith", "does", "."],
     "I don't pay $100. Mr. Smith does.", ["I don't pay $100.", "Mr. Smith does."]),
    ("fr", "L'homme est là. « Oui ! » Il part.",
     ["L'", "homme", "est", "là", ".", "«", "Oui", "!", "»", "Il", "part", "."],
     "L'homme est là. «Oui!» Il part.", ["L'homme est là.", "« Oui ! »", "Il part."]),
    ("fr", "M. Dupont dit \"non\", aujourd'hui.",
     ["M.", "Dupont", "dit", '"', "non", '"', ",", "aujourd'", "hui", "."],
     "M. Dupont dit \"non\", aujourd'hui.", ["M. Dupont dit \"non\", aujourd'hui."]),
    ("zh", "你好。我很好！", ["你好", "。", "我很好", "！"], "你好 。 我很好 ！", ["你好。", "我很好！"]),
]


@pytest.mark.parametrize("lang, line, tokens, text, split", LINES)
def test_hand_picked_lines_give_known_output_in_both(lang, line, tokens, text, split):
    assert word.tokenize(line, lang) == tokens
    assert word.detokenize(tokens, lang) == text
    assert sentences.split_sentences(line, lang) == split
    js = rules_check.js_outputs([line], [lang])[0]
    assert (js["tokens"], js["detokenized"], js["sentences"]) == (tokens, text, split)
    words, owners = word.token_words(tokens, lang)
    assert (js["words"], js["owners"]) == (list(words), [list(o) for o in owners])
    assert js["words"] == text.split()


def test_token_words_and_join_in_javascript():
    doc = rule_data.rule_document(["en", "zh"])
    found = node_eval("const rules = new TextRules(data);\nresult = ["
                      "rules.tokenWords(['', 'I', '', '\"', 'hi', '\"', '.'], 'en'),"
                      "rules.joinTexts(['A.', '', 'B.'], 'en'),"
                      "rules.joinTexts(['你好。', '好！'], 'zh')];\n"
                      "try { rules.tokenize('a', 'fr'); } catch (e) { result.push(e.message); }",
                      doc)
    assert found[0] == {"words": ["I", '"hi".'], "owners": [[0], [0], [0], [1], [1], [1], [1]]}
    assert list(word.token_words(['', 'I', '', '"', 'hi', '"', '.'], "en")[0]) == found[0]["words"]
    assert found[1:3] == ["A. B.", "你好。好！"]
    assert found[3] == 'text rules: no language "fr" (the document holds en, zh)'


def test_a_missing_node_is_said_in_one_line(monkeypatch):
    monkeypatch.setattr(rules_check.shutil, "which", lambda name: None)
    with pytest.raises(rules_check.NodeMissing) as caught:
        rules_check.js_differences(["a"], "en")
    assert "node (Node.js" in str(caught.value) and "\n" not in str(caught.value)
