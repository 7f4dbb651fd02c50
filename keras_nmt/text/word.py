"""The paper's word tokenizer in pure Python: rules, tokenize, detokenize, and its codec.

This module holds the one definition of how text becomes words: an ordered table of
regular-expression rewrites (:func:`rules_for`). :mod:`keras_nmt.text.word_graph` runs
the same table with ``tf.strings.regex_replace`` inside tf.data and the exported graph;
this module runs it with the ``regex`` package for the onnxruntime path, which must
work without TensorFlow. Patterns are written in the common subset of RE2 and ``regex`` syntax so the
two engines agree; tests check that they do, token for token.

The rules follow the Moses tokenizer's spirit (no lowercasing, punctuation split off,
French elision kept on the left, English clitics on the right).
"""

from __future__ import annotations

import functools
from typing import Callable, Iterable, Sequence

import regex

from keras_nmt.text.vocab import Vocabulary

KIND = "word"

# Every Unicode space separator (U+00A0 and U+202F included, which French text puts
# before ? ! : ;), tabs and control characters count as a token boundary (and as the
# space between two sentences, keras_nmt.text.sentences).
SPACE = "[\\p{Z}\\p{Cc}\ufeff]"
_LETTER = r"\p{L}"
_NOT_LETTER = r"[^\p{L}]"
# A word-final period that must stay on its word is parked on this character while the
# other word-final periods are split off. Control characters never survive the first
# rule (they become spaces), so the marker cannot clash with the input.
_KEEP = "\x01"

# Abbreviations whose period stays on the word, whatever follows ("Mr. Smith"). Short
# lists of our own; a period after any other word is split off unless the next word
# starts with a lower-case letter or the word already holds a period and a letter
# ("U.S.", "p.m.", "IHNED.cz").
ABBREVIATIONS: dict[str, tuple[str, ...]] = {
    "en": (
        "Mr", "Mrs", "Ms", "Messrs", "Dr", "Prof", "Hon", "Rev", "St", "Sr", "Gen", "Gov",
        "Sen", "Sens", "Rep", "Lt", "Col", "Capt", "Sgt", "Maj", "Brig", "Pfc", "Adm", "Cmdr", "Supt", "Corp",
        "Bros", "Ph", "vs", "v", "Jan", "Feb", "Mar", "Apr", "Jun", "Jul", "Aug", "Sep",
        "Oct", "Nov", "Dec",
    ),
    "fr": (
        "M", "MM", "etc", "vs", "cf", "ex", "fig", "art", "chap", "p", "pp", "vol", "sec",
        "av", "apr", "env", "éd", "tél", "hab", "boul",
    ),
}
# Single letters ("J. Smith") keep their period too: capitals in English; in French
# lower-case ones as well, except the verb "a" ("qu'on a.").
_INITIALS = {"en": "[A-Z]", "fr": "[A-Zb-z]"}
# Abbreviations that keep their period only before a number ("No. 5").
NUMERIC_ABBREVIATIONS: dict[str, tuple[str, ...]] = {"en": ("No", "Art", "pp"), "fr": ()}

COMMON_RULES: tuple[tuple[str, str], ...] = (
    (SPACE + "+", " "),
    # Everything but letters, digits, marks and . ' ` , - is a token of its own:
    # ! ? ; : " ( ) « » “ ” ’ … % $ & / @ + = *, emoji, CJK punctuation...
    (r"([^\p{L}\p{N}\p{M} .'`,-])", r" \1 "),
    # A run of two or more periods ("...") is one token.
    (r"(\.\.+)", r" \1 "),
    # Comma: split off unless between digits (1,000); a final comma always.
    (r"([^\p{N}]),", r"\1 , "),
    (r",([^\p{N}])", r" , \1"),
    (r"(\p{N}),$", r"\1 ,"),
)
LANGUAGE_APOSTROPHE_RULES: dict[str, tuple[tuple[str, str], ...]] = {
    # l'homme -> l' homme, aujourd'hui -> aujourd' hui (as Moses does for French);
    # a quote not between two letters is a token of its own.
    "fr": (
        (rf"({_NOT_LETTER})'({_NOT_LETTER})", r"\1 ' \2"),
        (rf"({_NOT_LETTER})'({_LETTER})", r"\1 ' \2"),
        (rf"({_LETTER})'({_NOT_LETTER})", r"\1 ' \2"),
        (rf"({_LETTER})'({_LETTER})", r"\1' \2"),
    ),
    # don't -> don 't, John's -> John 's, 1990's -> 1990 's (as Moses does for English);
    # students' -> students ' and other quotes not between two letters stand alone.
    "en": (
        (rf"({_NOT_LETTER})'({_NOT_LETTER})", r"\1 ' \2"),
        (r"([^\p{L}\p{N}])'(\p{L})", r"\1 ' \2"),
        (rf"({_LETTER})'({_NOT_LETTER})", r"\1 ' \2"),
        (rf"({_LETTER})'({_LETTER})", r"\1 '\2"),
        (r"(\p{N})'s", r"\1 's"),
    ),
}
# Any other language: every quote is a token of its own.
_OTHER_APOSTROPHE_RULES: tuple[tuple[str, str], ...] = ((r"'", r" ' "),)


def _period_rules(lang: str) -> tuple[tuple[str, str], ...]:
    """Word-final periods: kept on abbreviations, split off everywhere else."""
    words = "|".join(ABBREVIATIONS.get(lang, ()))
    initials = _INITIALS.get(lang)
    listed = "|".join(x for x in (initials, words) if x)
    rules = [
        # Doubled spaces let neighbouring words match one after the other below.
        (" ", "  "),
        # The word already holds a period and a letter: U.S. p.m. i.e.
        (r"(^| )([^ ]*(\p{L}[^ ]*\.|\.[^ ]*\p{L})[^ ]*)\.( |$)", rf"\1\2{_KEEP}\4"),
    ]
    if listed:
        rules.append((rf"(^| )({listed})\.( |$)", rf"\1\2{_KEEP}\3"))
    numeric = "|".join(NUMERIC_ABBREVIATIONS.get(lang, ()))
    if numeric:
        rules.append((rf"(^| )({numeric})\.( +\p{{N}})", rf"\1\2{_KEEP}\3"))
    # The next word starts with a lower-case letter. Twice, since a one-letter word
    # ("a. b. c") is used up by the first match on its left.
    rules += [(r"([^ .])\.( +\p{Ll})", rf"\1{_KEEP}\2")] * 2
    rules += [
        (r"([^ .])\.( |$)", r"\1 .\2"),
        (_KEEP, "."),
        # A sentence that ends in .' splits both.
        (r"\.' *$", r" . ' "),
    ]
    return tuple(rules)


def rules_for(lang: str) -> tuple[tuple[str, str], ...]:
    """The ordered rewrite table for a language (unknown languages get the common rules)."""
    apostrophes = LANGUAGE_APOSTROPHE_RULES.get(lang, _OTHER_APOSTROPHE_RULES)
    return COMMON_RULES + apostrophes + _period_rules(lang)


@functools.cache
def _compiled(table: Callable[[str], tuple[tuple[str, str], ...]],
              lang: str) -> tuple[tuple[regex.Pattern, str], ...]:
    return tuple((regex.compile(p, regex.V0), r) for p, r in table(lang))


def rewrite(line: str, table: Callable[[str], tuple[tuple[str, str], ...]], lang: str) -> str:
    """``line`` through the ordered rewrite table ``table(lang)`` (such as
    :func:`rules_for`), compiled once per table and language."""
    for pattern, replacement in _compiled(table, lang):
        line = pattern.sub(replacement, line)
    return line


def tokenize(line: str, lang: str) -> list[str]:
    """Split one raw sentence into word tokens."""
    return [token for token in rewrite(line, rules_for, lang).split(" ") if token]


# Detokenization is an ordered rewrite table too (:func:`detokenize_rules`), run on the
# tokens joined into one line, each token wrapped in markers so a rule can tell a whole
# token ("." alone) from a part of one ("3.5"). Control characters never survive
# tokenization, so the markers cannot clash with a token. ``word_graph`` runs the
# same table in the graph; patterns use the common subset of RE2 and ``regex``.
_START, _END = "\x02", "\x03"  # around every token: START token END
_QUOTE, _OPEN, _CLOSE = "\x04", "\x05", "\x06"  # a straight double quote token
TOKEN_SEPARATOR = _END + " " + _START

# Tokens that attach to the word on their left: . , ; : ! ? ) ] } » ” … % and runs of
# periods; / and the typographic apostrophe glue to both sides (km/h, C’est).
_ATTACH_LEFT = r"[,;:!?)\]}»”…%/’]|\.+"
# Tokens that glue to the word on their right.
_ATTACH_RIGHT = r"[(\[{«“/’]"

_COMMON_DETOKENIZE_RULES: tuple[tuple[str, str], ...] = (
    # Straight double quotes alternate, opening then closing, left to right: pair them
    # first (an opening quote glues to its right, a closing one to its left) ...
    (_START + '"' + _END, _QUOTE),
    (rf"{_QUOTE} (?:([^{_QUOTE}]*) )?{_QUOTE}", rf"{_OPEN}\1{_CLOSE}"),
    # ... a last unpaired one opens.
    (f"{_QUOTE} ?", _OPEN),
    (rf" {_START}({_ATTACH_LEFT}){_END}", rf"{_START}\1{_END}"),
    (rf"{_START}({_ATTACH_RIGHT}){_END} ", rf"{_START}\1{_END}"),
)
LANGUAGE_DETOKENIZE_RULES: dict[str, tuple[tuple[str, str], ...]] = {
    # English clitics attach left: don 't -> don't; $ glues right: $100.
    "en": (
        (rf" {_START}('[^{_END}])", rf"{_START}\1"),
        (rf"{_START}\${_END} ", rf"{_START}${_END}"),
    ),
    # French elisions glue right: l' homme -> l'homme (a lone quote does not).
    "fr": ((rf"{_START}([^{_END}]+'){_END} ", rf"{_START}\1{_END}"),),
}
_UNMARK_RULES: tuple[tuple[str, str], ...] = (
    (f"[{_START}{_END}]", ""),
    (f"[{_OPEN}{_CLOSE}]", '"'),
)


def detokenize_rules(lang: str) -> tuple[tuple[str, str], ...]:
    """The ordered rewrite table that turns marked, joined tokens into text."""
    return marked_detokenize_rules(lang) + _UNMARK_RULES


def marked_detokenize_rules(lang: str) -> tuple[tuple[str, str], ...]:
    """:func:`detokenize_rules` but the last step: the text with each token still marked
    (START token END, a quote token as one OPEN or CLOSE character)."""
    return _COMMON_DETOKENIZE_RULES + LANGUAGE_DETOKENIZE_RULES.get(lang, ())


def token_words(tokens: Sequence[str], lang: str
                ) -> tuple[tuple[str, ...], list[tuple[int, ...]]]:
    """The words of ``detokenize(tokens, lang).split()`` and, for each of ``tokens``, the
    numbers of the words its characters are in, read from one detokenization that keeps
    the tokens marked (rules only ever remove the spaces between tokens). A token with no
    character in a word (an empty one) belongs to the word before it, or to the first.
    What :func:`keras_nmt.decoding.confidence.word_of_tokens` gives by detokenizing every prefix,
    in one pass (tested against it)."""
    kept = [k for k, token in enumerate(tokens) if token]
    marked = rewrite(mark_tokens(TOKEN_SEPARATOR.join(tokens[k] for k in kept)),
                     marked_detokenize_rules, lang)
    found: list[list[int]] = [[] for _ in tokens]
    words: list[list[str]] = []
    current = -1  # the position in ``kept``
    in_word = False
    for char in marked:
        if char == _START or char in (_OPEN, _CLOSE):
            current += 1
            if char == _START:
                continue
            char = '"'
        elif char == _END:
            continue
        if char.isspace():
            in_word = False
            continue
        if not in_word:
            words.append([])
            in_word = True
        words[-1].append(char)
        owners = found[kept[current]]
        if not owners or owners[-1] != len(words) - 1:
            owners.append(len(words) - 1)
    last = 0
    for owners in found:
        if not owners and words:
            owners.append(last)
        last = owners[-1] if owners else last
    return tuple("".join(chars) for chars in words), [tuple(owners) for owners in found]


def mark_tokens(joined: str) -> str:
    """Tokens joined by :data:`TOKEN_SEPARATOR` -> the input of :func:`detokenize_rules`."""
    return _START + joined + _END


def detokenize(tokens: Sequence[str], lang: str) -> str:
    """Join tokens back into normal text: the inverse of :func:`tokenize` on clean text.

    Tokens must be what :func:`tokenize` makes (no spaces, no control characters);
    empty tokens are skipped."""
    line = mark_tokens(TOKEN_SEPARATOR.join(token for token in tokens if token))
    return rewrite(line, detokenize_rules, lang)


class WordCodec:
    """The paper's words: this module's tokenizer and a frequency shortlist.

    The codec interface (shared with :class:`~keras_nmt.text.sentencepiece.SentencePieceCodec`):
    ``tokenize(line)``, ``detokenize(tokens)``, ``encode(line)`` (ids, no EOS),
    ``decode(ids)`` (text up to the first EOS, PAD and BOS skipped), ``vocabulary``,
    ``lang`` and ``kind``."""

    kind = KIND

    def __init__(self, vocabulary: Vocabulary, lang: str):
        self.vocabulary, self.lang = vocabulary, lang

    def tokenize(self, line: str) -> list[str]:
        return tokenize(line, self.lang)

    def detokenize(self, tokens: Sequence[str]) -> str:
        return detokenize(tokens, self.lang)

    def token_words(self, tokens: Sequence[str]) -> tuple[tuple[str, ...], list[tuple[int, ...]]]:
        return token_words(tokens, self.lang)

    def encode(self, line: str) -> list[int]:
        return self.vocabulary.encode(self.tokenize(line))

    def decode(self, ids: Iterable[int]) -> str:
        return self.detokenize(self.vocabulary.decode(ids))
