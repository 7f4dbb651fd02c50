"""The text rules as data for another runtime: the browser and Node.js translator
(``keras_nmt/web/js/text_rules.mjs``) runs the same rewrite tables as the Python rules
(:mod:`keras_nmt.text.word`, :mod:`keras_nmt.text.sentences`,
:mod:`keras_nmt.text.line_join`), read from :func:`rule_document`.

The tables are written in the common subset of RE2 and ``regex`` (V0) syntax; JavaScript's
RegExp with the ``u`` flag reads some of it otherwise. :func:`js_pattern` and
:func:`js_replacement` convert each pattern and replacement, construct by construct, as
:data:`DIALECT` states, and raise on a construct they do not know. Pure Python, no
TensorFlow. :mod:`keras_nmt.web.rules_check` compares the two runtimes.
"""

from __future__ import annotations

import functools
import re
import sys
from typing import Iterable, NamedTuple, Sequence

from keras_nmt.text import line_join, sentences, word


class Dialect(NamedTuple):
    """One construct that Python ``regex`` (V0) and JavaScript (``u`` flag) read apart:
    ``kind`` is "pattern" or "replacement" (:func:`js_pattern`, :func:`js_replacement`
    turn ``python`` into ``js``) or "runtime" (the lines or the document deal with it)."""

    construct: str
    kind: str
    python: str
    js: str
    done: str


DIALECT: tuple[Dialect, ...] = (
    Dialect("script property", "pattern", r"\p{Hiragana}", r"\p{Script=Hiragana}",
            "converted: regex reads a bare script name as its Script property (not "
            "Script_Extensions, not the block: measured); u mode needs the property named"),
    Dialect("identity escape", "pattern", r"c\.\-à\-d\#\&\~\ ", r"c\.-à-d#&~ ",
            "converted: regex.escape (the non-breaking prefixes) escapes - # & ~ and space, "
            "which u mode rejects escaped; the character goes bare"),
    Dialect("identity escape in a class", "pattern", r"[\-\&\#]", r"[\-&#]",
            r"converted: u mode allows \- in a class, not \& or \#; those go bare"),
    Dialect("end anchor", "pattern", "a$", r"a(?=\n?$)",
            r"converted: Python's $ also matches before a final \n, JavaScript's does not"),
    Dialect("any character", "pattern", "a.", r"a[^\n]",
            r"converted: Python's . is anything but \n; JavaScript's also skips \r, U+2028 "
            "and U+2029"),
    Dialect("lone brace or bracket", "pattern", "{a}]", r"\{a\}\]",
            "converted: literals in Python, a SyntaxError in u mode; escaped"),
    Dialect("quantifier without minimum", "pattern", "a{,2}", "a{0,2}",
            "converted: regex reads {,n} as {0,n}; u mode rejects it"),
    Dialect("leading ] in a class", "pattern", "[]a]", r"[\]a]",
            "converted: a literal ] in Python, the end of an empty class in JavaScript"),
    Dialect("group reference", "replacement", r"\1 ,", "$1 ,",
            r"converted: Python writes group n as \n, JavaScript as $n"),
    Dialect("dollar", "replacement", "\x02$\x03", "\x02$$\x03",
            "converted: $ starts a group reference in JavaScript; $$ is a dollar"),
    Dialect("escaped backslash", "replacement", r"a\\b", "a\\b",
            r"converted: \\ is one backslash in Python, a plain character in JavaScript"),
    Dialect("whitespace of token_words", "runtime", "str.isspace()", "constants.spaces",
            "the document lists every character Python's str.isspace() holds"),
    Dialect("Unicode tables", "runtime", r"\p{L} (regex: Unicode 17)",
            r"\p{L} (Node.js 20's V8: Unicode 16)",
            "measured per class, listed with what they change in "
            "keras_nmt.web.rules_check.KNOWN_JS_DIFFERENCES; the generated lines hold none"),
    Dialect("surrogate code points", "runtime", "one character each", "paired into one",
            "not handled: a line read from UTF-8 holds none"),
)

# JavaScript's syntax characters (and /), the only ones u mode lets be escaped outside a
# class; inside one, - too.
_SYNTAX = frozenset("^$\\.*+?()[]{}|/")
_GENERAL_CATEGORIES = frozenset(
    "L Lu Ll Lt Lm Lo M Mn Mc Me N Nd Nl No P Pc Pd Ps Pe Pi Pf Po S Sm Sc Sk So "
    "Z Zs Zl Zp C Cc Cf Cs Co Cn".split())
# Scripts whose bare name regex reads as the Script property (tests/test_web_rules.py).
SCRIPTS = frozenset({"Hiragana", "Katakana", "Han"})
_PROPERTY = re.compile(r"\\([pP])\{(\w+)\}")
_BRACES = re.compile(r"\{(\d*)(,?)(\d*)\}")


class UnknownConstruct(ValueError):
    """A pattern or replacement holds a construct :data:`DIALECT` does not cover."""


def _unknown(text: str, at: int, what: str) -> UnknownConstruct:
    return UnknownConstruct(f"{what} at {at} of {text!r}: not in rule_data.DIALECT")


def _property(pattern: str, at: int) -> tuple[str, str, int]:
    """``\\p{NAME}`` or ``\\P{NAME}`` at ``at`` -> (construct, JS text, next index)."""
    found = _PROPERTY.match(pattern, at)
    if found and found[2] in _GENERAL_CATEGORIES:
        return "", found[0], found.end()
    if found and found[2] in SCRIPTS:
        return "script property", rf"\{found[1]}{{Script={found[2]}}}", found.end()
    raise _unknown(pattern, at, "a property")


def _escape(pattern: str, at: int, in_class: bool) -> tuple[str, str, int]:
    """The escape at ``at`` -> (construct, JS text, next index)."""
    char = pattern[at + 1:at + 2]
    if char in ("p", "P"):
        return _property(pattern, at)
    if not char or (char.isascii() and char.isalnum()):
        raise _unknown(pattern, at, "an escape")
    if char in _SYNTAX or (in_class and char == "-"):
        return "", "\\" + char, at + 2
    return "identity escape in a class" if in_class else "identity escape", char, at + 2


def _braces(pattern: str, at: int) -> tuple[str, str, int]:
    """A ``{`` outside a class: a quantifier or a literal brace."""
    found = _BRACES.match(pattern, at)
    if not found:
        return "lone brace or bracket", r"\{", at + 1
    low, comma, high = found.groups()
    if pattern.startswith("+", found.end()):
        raise _unknown(pattern, at, "a possessive quantifier")
    if low:
        return "", found[0], found.end()
    if comma and high:
        return "quantifier without minimum", f"{{0,{high}}}", found.end()
    raise _unknown(pattern, at, "a quantifier")


def _is_property(before: str, after: str) -> bool:
    """Whether a hyphen between ``before`` (a piece) and ``after`` touches a property."""
    return before.startswith(("\\p", "\\P")) or after in ("\\p", "\\P")


def _class(pattern: str, at: int) -> tuple[list[tuple[str, str]], int]:
    """The class opening at ``at`` -> its (construct, JS text) pieces and the next index."""
    pieces, i = [("", "[")], at + 1
    if pattern.startswith("^", i):
        pieces, i = pieces + [("", "^")], i + 1
    if pattern.startswith("]", i):
        pieces, i = pieces + [("leading ] in a class", r"\]")], i + 1
    first = i
    while i < len(pattern) and pattern[i] != "]":
        if pattern[i] == "[" or pattern[i:i + 2] in ("--", "&&", "||", "~~"):
            raise _unknown(pattern, i, "a nested set or set operation")
        if pattern[i] == "-" and first < i < len(pattern) - 1 and pattern[i + 1] != "]" \
                and _is_property(pieces[-1][1], pattern[i + 1:i + 3]):
            raise _unknown(pattern, i, "a range to or from a property")
        if pattern[i] == "\\":
            construct, text, i = _escape(pattern, i, in_class=True)
        else:
            construct, text, i = "", pattern[i], i + 1
        pieces.append((construct, text))
    if i == len(pattern):
        raise _unknown(pattern, at, "an unterminated class")
    return pieces + [("", "]")], i + 1


def _outside(pattern: str, at: int) -> tuple[str, str, int]:
    """The piece at ``at`` outside a class -> (construct, JS text, next index)."""
    char, after = pattern[at], pattern[at + 1:at + 2]
    if char == "\\":
        return _escape(pattern, at, in_class=False)
    if char == "(" and after == "?":
        if pattern.startswith("(?:", at):
            return "", "(?:", at + 3
        raise _unknown(pattern, at, "a group flag or lookaround")
    if char in "*+?" and after == "+":
        raise _unknown(pattern, at, "a possessive quantifier")
    if char == "{":
        return _braces(pattern, at)
    special = {"$": ("end anchor", r"(?=\n?$)"), ".": ("any character", r"[^\n]"),
               "}": ("lone brace or bracket", r"\}"), "]": ("lone brace or bracket", r"\]")}
    construct, text = special.get(char, ("", char))
    return construct, text, at + 1


def pattern_pieces(pattern: str) -> list[tuple[str, str]]:
    """``pattern`` (regex V0) as (construct of :data:`DIALECT` or "", JavaScript text)
    pieces, in order; raises :class:`UnknownConstruct` on anything else. O(len)."""
    pieces, i = [], 0
    while i < len(pattern):
        if pattern[i] == "[":
            found, i = _class(pattern, i)
            pieces += found
        else:
            construct, text, i = _outside(pattern, i)
            pieces.append((construct, text))
    return pieces


def js_pattern(pattern: str) -> str:
    """``pattern`` in JavaScript ``u``-flag syntax, matching what regex V0 matches."""
    return "".join(text for _, text in pattern_pieces(pattern))


def replacement_pieces(replacement: str) -> list[tuple[str, str]]:
    """A ``regex.sub`` template as (construct or "", JavaScript text) pieces; raises
    :class:`UnknownConstruct` on an escape other than a one-digit group or ``\\\\``."""
    pieces, i = [], 0
    while i < len(replacement):
        char, after = replacement[i], replacement[i + 1:i + 2]
        if char == "$":
            pieces.append(("dollar", "$$"))
        elif char != "\\":
            pieces.append(("", char))
        elif after == "\\":
            pieces.append(("escaped backslash", "\\"))
        elif after in "123456789" and after and not replacement[i + 2:i + 3].isdigit():
            pieces.append(("group reference", "$" + after))
        else:
            raise _unknown(replacement, i, "a replacement escape")
        i += 2 if char == "\\" else 1
    return pieces


def js_replacement(replacement: str) -> str:
    """A ``regex.sub`` template as a ``String.prototype.replace`` replacement string."""
    return "".join(text for _, text in replacement_pieces(replacement))


def python_tables(lang: str) -> dict[str, tuple[tuple[str, str], ...]]:
    """The Python rewrite tables of a language, by the document's names."""
    return {"tokenize": word.rules_for(lang),
            "detokenize": word.detokenize_rules(lang),
            "marked_detokenize": word.marked_detokenize_rules(lang),
            "sentences": sentences.rules_for(lang)}


def _js_table(table: Iterable[tuple[str, str]]) -> list[list[str]]:
    return [[js_pattern(p), js_replacement(r)] for p, r in table]


@functools.cache
def _spaces() -> str:
    """Every character for which ``str.isspace()`` holds (one pass over the code points)."""
    return "".join(c for c in map(chr, range(sys.maxunicode + 1)) if c.isspace())


def constants() -> dict:
    """The markers and rules every language shares, for the document."""
    return {"token_separator": word.TOKEN_SEPARATOR,
            "markers": {"start": word._START, "end": word._END, "quote": word._QUOTE,
                        "open": word._OPEN, "close": word._CLOSE},
            "quote_token": '"',
            "break": sentences.BREAK,
            "unescape": _js_table(sentences.UNESCAPE_RULES),
            "may_end": js_pattern(sentences._MAY_END.pattern),
            "spaces": _spaces()}


def rule_document(langs: Sequence[str]) -> dict:
    """The document ``new TextRules(doc)`` reads: the constants and, per language of
    ``langs`` (exactly as given: "en-US" gets the rules Python gives "en-US"), its tables
    in JavaScript syntax and its sentence separator. JSON-serializable. Costs a pass over
    the code points once per process (:func:`constants`), then milliseconds a language."""
    languages = {lang: {**{name: _js_table(table) for name, table in python_tables(lang).items()},
                        "sentence_separator": line_join.sentence_separator(lang)}
                 for lang in langs}
    return {"format": 1, "constants": constants(), "languages": languages}


def constructs_used(langs: Sequence[str]) -> set[str]:
    """The :data:`DIALECT` constructs the tables of ``langs`` (and the constants) meet."""
    tables = [rule for lang in langs for table in python_tables(lang).values() for rule in table]
    tables += list(sentences.UNESCAPE_RULES) + [(sentences._MAY_END.pattern, "")]
    return {construct for p, r in tables
            for construct, _ in pattern_pieces(p) + replacement_pieces(r) if construct}
