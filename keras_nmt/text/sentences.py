"""Sentence splitting in pure Python: the rules, the splitter, and how the translations of
a line's sentences join into the line's translation.

The models are trained on single sentences, so a pasted paragraph is split here and its
sentences are translated one by one (``translate(..., split_sentences=True)`` of
:class:`keras_nmt.translator.Translator` and of the onnxruntime path through
:func:`keras_nmt.translation.translate_lines`, and the exported SavedModel's string
signatures). This module holds the one definition of where a sentence ends: an ordered
table of regular-expression rewrites (:func:`rules_for`) that marks the boundaries of a
line. :mod:`keras_nmt.text.sentences_graph` runs the same table with
``tf.strings.regex_replace`` inside the SavedModel; this module runs it with the
``regex`` package, without TensorFlow. Patterns use the common subset of RE2 and
``regex`` syntax (no lookaround), and tests check that the two engines agree.

The rules. A sentence ends at a run of ``. ! ? …``, possibly followed by closing quotes or
brackets (with no-break spaces between, as French writes ``« Oui ! »``), then whitespace
(any Unicode space: the U+00A0 and U+202F that French puts before ``? ! : ;`` included),
then the start of a sentence: a capital letter, a letter of a script without case, a digit,
or an opening quote or bracket, ``¿`` or ``¡``. Not a boundary:

- the period of a listed abbreviation (:data:`ABBREVIATIONS`: "Mr.", "Dr.", "Mme." ...),
  of one before a number (:data:`NUMERIC_ABBREVIATIONS`: "No. 5", "p. 12"), of a single
  capital initial ("J. R. R. Tolkien", "M. Dupont") and of letters joined by periods
  ("e.g.", "U.S.", "J.-C.");
- a break whose text before it (from the line's start or the previous break) or after it
  (to the line's end) holds no letter or digit: "... And so" stays one sentence.

A line with no boundary is returned unchanged, as ``[line]``: nothing changes for a line of
one sentence, and an empty or whitespace-only line gives ``[line]`` too (one sentence
without words, which translates to ""). Otherwise the whitespace between two sentences is
dropped; the line's leading and trailing whitespace stay on its first and last sentence.

Known limits of rules without a model: a sentence that ends with a listed abbreviation or an
initial ("... in the U.S. Then") is not split there, and one that ends with an unlisted
abbreviation before a capital ("... Smith Corp. Jones said") is.
"""

from __future__ import annotations

from typing import Sequence, TypeVar

import numpy as np
import regex

from keras_nmt.text.word import SPACE, rewrite

# Words whose period never ends a sentence, whatever follows ("Mr. Smith"). Titles and
# forms of address mostly: a word often found at a sentence's end is not listed ("etc.",
# which mostly ends a list, and so a sentence, before a capital) or listed below, only
# before a number (French "vol." (flight), "art."). This is not the tokenizer's list
# (keras_nmt.text.word.ABBREVIATIONS): that one says whether a period stays on its word,
# and it cannot change without changing the tokens of trained runs.
ABBREVIATIONS: dict[str, tuple[str, ...]] = {
    "en": (
        "Mr", "Mrs", "Ms", "Messrs", "Mmes", "Dr", "Drs", "Prof", "Rev", "Hon", "St", "Sr",
        "Jr", "Gen", "Gov", "Sen", "Rep", "Pres", "Lt", "Col", "Capt", "Sgt", "Maj", "Cmdr",
        "Adm", "Mt", "Ft", "vs", "cf", "approx", "ca", "viz",
    ),
    "fr": (
        "MM", "Mme", "Mmes", "Mlle", "Mlles", "Me", "Mes", "Mgr", "Dr", "Pr", "St", "Ste",
        "cf", "vs", "av", "apr",
    ),
}
DEFAULT_ABBREVIATIONS: tuple[str, ...] = ("Dr", "Prof", "St", "vs", "cf")  # other languages
# Words whose period is no boundary before a number ("No. 5", "p. 12", "Jan. 3").
NUMERIC_ABBREVIATIONS: dict[str, tuple[str, ...]] = {
    "en": (
        "No", "Nos", "no", "Art", "art", "Fig", "fig", "Vol", "vol", "Ch", "ch", "Sec", "sec",
        "p", "pp", "Jan", "Feb", "Mar", "Apr", "Jun", "Jul", "Aug", "Sep", "Sept", "Oct",
        "Nov", "Dec",
    ),
    "fr": (
        "n", "no", "art", "p", "pp", "vol", "chap", "fig", "t", "éd", "env", "janv", "févr",
        "avr", "juil", "sept", "oct", "nov", "déc",
    ),
}
DEFAULT_NUMERIC_ABBREVIATIONS: tuple[str, ...] = ("No", "Nr", "Art", "p", "pp")

# Private-use characters the rules write into a line: a protected period (one that ends no
# sentence) and the sentence break. The same characters in the input are first escaped
# (ESCAPE + a code letter, undone in each sentence at the end), so the marks never clash
# with the text and a line without a break comes back exactly as it was.
ESCAPE, PROTECTED, BREAK = "\ue000", "\ue001", "\ue002"
_ESCAPE_RULES: tuple[tuple[str, str], ...] = (
    (ESCAPE, ESCAPE + "b"),  # first: the escapes below add ESCAPEs of their own
    (PROTECTED, ESCAPE + "a"),
    (BREAK, ESCAPE + "c"),
)
# Undone in each sentence: ESCAPE + "b" last, so that an escaped ESCAPE never pairs with
# the letter after it.
UNESCAPE_RULES: tuple[tuple[str, str], ...] = (
    (ESCAPE + "a", PROTECTED),
    (ESCAPE + "c", BREAK),
    (ESCAPE + "b", ESCAPE),
)

_TERMINAL = "[.!?…]"
_CLOSING = "[\"'”’»›)\\]}]"
_START = "[\\p{Lu}\\p{Lt}\\p{Lo}\\p{N}\"'“‘«‹„(\\[{¿¡]"
_BEFORE_WORD = r"(^|[^\p{L}\p{N}])"  # a word starts here (the character is kept)
_NO_WORDS = f"[^\\p{{L}}\\p{{N}}{BREAK}]*"  # text between breaks without letters or digits


def _words(words: Sequence[str]) -> str:
    return "|".join(regex.escape(word) for word in words)


def rules_for(lang: str) -> tuple[tuple[str, str], ...]:
    """The ordered rewrite table of a language: a line -> the line with :data:`BREAK`
    between its sentences (and escaped private-use characters, :data:`UNESCAPE_RULES`)."""
    listed = _words(ABBREVIATIONS.get(lang, DEFAULT_ABBREVIATIONS))
    numeric = _words(NUMERIC_ABBREVIATIONS.get(lang, DEFAULT_NUMERIC_ABBREVIATIONS))
    return _ESCAPE_RULES + (
        # Letters joined by periods: e.g. i.e. U.S. p.m. J.-C.
        (r"(^|[^\p{L}\p{N}.])((?:\p{L}\.-?)+\p{L})\.", rf"\1\2{PROTECTED}"),
        # A single capital initial: J. R. R. Tolkien, M. Dupont.
        (rf"{_BEFORE_WORD}(\p{{Lu}})\.", rf"\1\2{PROTECTED}"),
        (rf"{_BEFORE_WORD}({listed})\.", rf"\1\2{PROTECTED}"),
        (rf"{_BEFORE_WORD}({numeric})\.({SPACE}+\p{{N}})", rf"\1\2{PROTECTED}\3"),
        # The boundary itself; the break goes after the whitespace, which the last rule
        # drops (kept until then so that an undone break leaves the line as it was).
        (rf"({_TERMINAL}+(?:{SPACE}*{_CLOSING})*{SPACE}+)({_START})", rf"\1{BREAK}\2"),
        # Breaks around text without letters or digits are undone: "... And so" is one
        # sentence. Twice, as the first break of a line is used up by the match on its left.
        (f"(^|{BREAK})({_NO_WORDS}){BREAK}", r"\1\2"),
        (f"(^|{BREAK})({_NO_WORDS}){BREAK}", r"\1\2"),
        (f"{BREAK}({_NO_WORDS})$", r"\1"),
        (f"{SPACE}+{BREAK}", BREAK),
        (PROTECTED, "."),
    )


_UNESCAPE = [(regex.compile(p, regex.V0), r) for p, r in UNESCAPE_RULES]
_MAY_END = regex.compile(_TERMINAL)


def split_sentences(line: str, lang: str) -> list[str]:
    """The sentences of one line, in order (``[line]`` when it has one, or none)."""
    if not _MAY_END.search(line):  # no sentence ends before the line's end
        return [line]
    sentences = rewrite(line, rules_for, lang).split(BREAK)
    for pattern, replacement in _UNESCAPE:
        sentences = [pattern.sub(replacement, sentence) for sentence in sentences]
    return sentences


# ---- the translation of a line of several sentences -------------------------------------
#
# Every path joins the same way (keras_nmt.translation.join_translations, and the
# SavedModel's graph): the text is the sentences' translations one space apart (empty ones
# left out), the tokens are concatenated, the score and the truncated tokens are summed,
# an attention matrix is block-diagonal, and hypothesis k of an n-best list joins
# hypothesis k of each sentence (its best when it has fewer). A line of one sentence keeps
# its translation.

Item = TypeVar("Item")


def join_texts(texts: Sequence[str]) -> str:
    """The translations of a line's sentences as one text: one space apart, empty ones
    left out."""
    return " ".join(text for text in texts if text)


def nbest_rows(hypotheses: Sequence[Sequence[Item]]) -> list[tuple[Item, ...]]:
    """Per sentence its n-best list (best first, at least one) -> per hypothesis of the
    line the sentences' hypotheses it joins: hypothesis k of each sentence, its best when
    it has fewer. As many as the longest list."""
    width = max(len(found) for found in hypotheses)
    return [tuple(found[k] if k < len(found) else found[0] for found in hypotheses)
            for k in range(width)]


def block_diagonal(matrices: Sequence[np.ndarray]) -> np.ndarray:
    """The matrices one after the other along the diagonal, zeros elsewhere (the
    attention of a line: each sentence's rows and columns, in order)."""
    rows = sum(matrix.shape[0] for matrix in matrices)
    columns = sum(matrix.shape[1] for matrix in matrices)
    dtype = np.result_type(*matrices) if matrices else np.float32
    out = np.zeros((rows, columns), dtype)
    row = column = 0
    for matrix in matrices:
        out[row : row + matrix.shape[0], column : column + matrix.shape[1]] = matrix
        row, column = row + matrix.shape[0], column + matrix.shape[1]
    return out
