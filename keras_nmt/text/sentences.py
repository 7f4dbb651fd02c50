"""Sentence splitting in pure Python: the one definition of where a sentence ends.

Owns the ordered table of regular-expression rewrites that marks a line's boundaries
(:func:`rules_for`) and the non-breaking prefixes it reads (:func:`nonbreaking_prefixes`,
Moses' lists as ``sacremoses`` ships them). It runs the table with the ``regex`` package,
without TensorFlow; :mod:`keras_nmt.text.sentences_graph` runs the same table in the
SavedModel, so patterns keep to what RE2 and ``regex`` share (no lookaround), and tests check
that the two agree. :mod:`keras_nmt.text.line_join` joins the sentences' translations. The
rules and their known limits: docs/decoding.md, "Sentence splitting".

A line with no boundary comes back as ``[line]``, an empty or whitespace-only line too.
Otherwise the whitespace between sentences is dropped, and the line's leading and trailing
whitespace stay on its first and last sentence. Cost: each rule is one regex pass over the
line, so time grows linearly with its length; nothing is kept between lines.
"""

from __future__ import annotations

import functools
import importlib.util
import pathlib
from typing import Sequence

import regex

from keras_nmt.text.word import SPACE, rewrite

# How Moses marks a prefix whose period ends no sentence only before a number.
NUMERIC_ONLY = "#NUMERIC_ONLY#"


def base_language(lang: str) -> str:
    """The language of a code without its region or script: "pt-BR", "zh_Hant" -> "pt", "zh"."""
    return lang.lower().replace("_", "-").split("-")[0]


@functools.cache
def nonbreaking_prefixes(lang: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The non-breaking prefixes of a language: (those whose period never ends a sentence,
    those whose period ends none before a number), longest first. Moses' lists, as the
    ``sacremoses`` package ships them; a language without a list gets the English one, as
    Moses' splitter does. Entries of several words never match one word and are left out."""
    files = _moses_prefix_files()
    name = f"{_PREFIX_FILE}{base_language(lang)}"
    always: dict[str, None] = {}
    numeric: dict[str, None] = {}
    for line in files.get(name, files[f"{_PREFIX_FILE}en"]).splitlines():
        entry = line.strip()
        if not entry or entry.startswith("#"):
            continue
        word, _, mark = entry.partition(" ")
        if not mark:
            always[word] = None
        elif mark.strip() == NUMERIC_ONLY:
            numeric[word] = None

    def longest_first(words) -> tuple[str, ...]:
        return tuple(sorted(words, key=lambda word: (-len(word), word)))

    return longest_first(always), longest_first(w for w in numeric if w not in always)


# sacremoses keeps Moses' files, file name -> text, in this module of its package.
_PREFIX_FILE = "nonbreaking_prefix."
_PREFIX_MODULE = "_data_nonbreaking_prefixes"


@functools.cache
def _moses_prefix_files() -> dict[str, str]:
    """Moses' non-breaking prefix files as sacremoses ships them. Its data module is read
    on its own: importing the package loads its tokenizer and joblib, about 0.5 s of every
    process that splits a line (sacremoses.corpus.NonbreakingPrefixes reads the same module;
    a test holds the two equal, and a sacremoses without the module is read through it)."""
    spec = importlib.util.find_spec("sacremoses")
    folders = list(spec.submodule_search_locations or []) if spec else []
    paths = [pathlib.Path(folder) / f"{_PREFIX_MODULE}.py" for folder in folders]
    path = next((found for found in paths if found.is_file()), None)
    if path is None:
        from sacremoses.corpus import NonbreakingPrefixes

        lists = NonbreakingPrefixes()
        return {f"{_PREFIX_FILE}{code}": "\n".join(lists.words(code))
                for code in set(lists.available_langs.values())}
    module_spec = importlib.util.spec_from_file_location(f"keras_nmt_{_PREFIX_MODULE}", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return dict(module.NONBREAKING_PREFIXES)


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

_TERMINAL = "[.!?…．]"  # ends a sentence before whitespace
_CJK_TERMINAL = "[。｡！？]"  # ends one with or without whitespace after it
_ANY_TERMINAL = "[.!?…．。｡！？]"
_CLOSING = "[\"'”’»›)\\]}」』）］｝〉》】〕〗]"
_OPENING = "\"'“‘«‹„(\\[{¿¡「『（［｛〈《【〔〖"
_START = f"[\\p{{Lu}}\\p{{Lt}}\\p{{Lo}}\\p{{N}}{_OPENING}]"
# The same but hiragana, which after a closing quote goes on with the sentence.
_START_AFTER_QUOTE = f"(?:[\\p{{Lu}}\\p{{Lt}}\\p{{N}}{_OPENING}]|[^\\P{{Lo}}\\p{{Hiragana}}])"
_BEFORE_WORD = r"(^|[^\p{L}\p{N}])"  # a word starts here (the character is kept)
# A prefix is a whole word: after a hyphen ("Allons-y") it is the end of another word.
_BEFORE_PREFIX = r"(^|[^\p{L}\p{N}\-])"
_NO_WORDS = f"[^\\p{{L}}\\p{{N}}{BREAK}]*"  # text between breaks without letters or digits


def _words(words: Sequence[str]) -> str:
    return "|".join(regex.escape(word) for word in words)


def rules_for(lang: str) -> tuple[tuple[str, str], ...]:
    """The ordered rewrite table of a language: a line -> the line with :data:`BREAK`
    between its sentences (and escaped private-use characters, :data:`UNESCAPE_RULES`)."""
    always, numeric = nonbreaking_prefixes(lang)
    prefixes = ()
    if always:  # an empty alternation would protect every period
        prefixes += ((rf"{_BEFORE_PREFIX}({_words(always)})\.", rf"\1\2{PROTECTED}"),)
    if numeric:
        prefixes += ((rf"{_BEFORE_PREFIX}({_words(numeric)})\.({SPACE}+\p{{N}})",
                      rf"\1\2{PROTECTED}\3"),)
    return _ESCAPE_RULES + (
        # Letters joined by periods: e.g. i.e. U.S. p.m. J.-C.
        (r"(^|[^\p{L}\p{N}.])((?:\p{L}\.-?)+\p{L})\.", rf"\1\2{PROTECTED}"),
        # A single capital initial: J. R. R. Tolkien, M. Dupont.
        (rf"{_BEFORE_WORD}(\p{{Lu}})\.", rf"\1\2{PROTECTED}"),
    ) + prefixes + (
        # The boundary itself; the break goes after the whitespace, which a later rule
        # drops (kept until then so that an undone break leaves the line as it was).
        (rf"({_TERMINAL}+(?:{SPACE}*{_CLOSING})*{SPACE}+)({_START})", rf"\1{BREAK}\2"),
        # Chinese and Japanese ends: no whitespace needed.
        (rf"({_ANY_TERMINAL}*{_CJK_TERMINAL}{SPACE}*)({_START})", rf"\1{BREAK}\2"),
        (rf"({_ANY_TERMINAL}*{_CJK_TERMINAL}(?:{SPACE}*{_CLOSING})+{SPACE}*)"
         rf"({_START_AFTER_QUOTE})", rf"\1{BREAK}\2"),
        # Breaks around text without letters or digits are undone: "... And so" is one
        # sentence. Twice, as the first break of a line is used up by the match on its left.
        (f"(^|{BREAK})({_NO_WORDS}){BREAK}", r"\1\2"),
        (f"(^|{BREAK})({_NO_WORDS}){BREAK}", r"\1\2"),
        (f"{BREAK}({_NO_WORDS})$", r"\1"),
        (f"{SPACE}+{BREAK}", BREAK),
        (PROTECTED, "."),
    )


_UNESCAPE = [(regex.compile(p, regex.V0), r) for p, r in UNESCAPE_RULES]
_MAY_END = regex.compile(_ANY_TERMINAL)


def split_sentences(line: str, lang: str) -> list[str]:
    """The sentences of one line, in order (``[line]`` when it has one, or none)."""
    if not _MAY_END.search(line):  # no sentence ends before the line's end
        return [line]
    sentences = rewrite(line, rules_for, lang).split(BREAK)
    for pattern, replacement in _UNESCAPE:
        sentences = [pattern.sub(replacement, sentence) for sentence in sentences]
    return sentences
