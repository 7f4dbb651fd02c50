"""Whether the JavaScript text rules (``js/text_rules.mjs`` on the document of
:func:`keras_nmt.text.rule_data.rule_document`, run by Node.js) give the Python rules'
output (:mod:`keras_nmt.text.word`, :mod:`keras_nmt.text.sentences`), as
:mod:`keras_nmt.text.twin_check` does for the TensorFlow twins.

The two engines carry their own Unicode tables: :func:`class_differences` lists the code
points where they read a class of the tables apart; :func:`js_differences` compares them
on lines. Cost: :func:`js_differences` one Node.js process for all lines, each rule once
per line on each side, O(N) characters; :func:`class_differences` a pass of each engine
over the 1.1M code points per class (seconds).
"""

from __future__ import annotations

import concurrent.futures
import json
import pathlib
import shutil
import subprocess
import tempfile
from typing import Sequence

import regex

from keras_nmt.text import rule_data, sentences, word
from keras_nmt.text.twin_check import every_character

CLI = pathlib.Path(__file__).resolve().parent / "js" / "rules_cli.mjs"
# The rules compared, and the fields of rules_cli.mjs's output that each writes.
_FIELDS = {"tokenize": ("tokens",), "detokenize": ("detokenized",),
           "split_sentences": ("sentences",), "token_words": ("words", "owners")}
RULES = tuple(_FIELDS)
# The code points V8 (Node.js 20.20, V8 11.3: Unicode 16 in its RegExp tables) and regex
# 2026.11 (Unicode 17) put in different classes of the tables, as (first, last) ranges per
# class, measured over every code point: each is a character Unicode 17 added, which regex
# reads as a letter (a Hiragana one), a mark or a number and V8 as unassigned, in none of
# the classes (no other class differs). What they change, measured: such a character is a
# token of its own in JavaScript ("a\u0558b" -> a, \u0558, b; Python keeps one token), so
# the detokenized text and the token words differ too, and after ". " it starts a sentence
# for Python only ("Il dit oui. \U00018E00 est là." is one sentence in JavaScript). Python
# 3.11's own Unicode 14 assigns none of them, so the generated lines never hold one. A
# browser carries its own engine's tables, older or newer.
KNOWN_JS_DIFFERENCES: dict[str, tuple[tuple[int, int], ...]] = {
    "Hiragana": ((0x1b123, 0x1b123),),
    "L": ((0x0558, 0x0558), (0x058b, 0x058c), (0x208f, 0x208f), (0x209d, 0x209f),
          (0xa7dd, 0xa7dd), (0xa7e2, 0xa7e2), (0xab6c, 0xab6d), (0x107bb, 0x107bf),
          (0x10ed9, 0x10eee), (0x11b0a, 0x11b0a), (0x11df1, 0x11df1), (0x18cd6, 0x18cda),
          (0x18d1f, 0x18d20), (0x18e00, 0x19191), (0x191a0, 0x191d2), (0x1b123, 0x1b128),
          (0x1b168, 0x1b168), (0x1d6a6, 0x1d6a6), (0x1df1f, 0x1df24), (0x1df2b, 0x1df81),
          (0x1df90, 0x1df96), (0x1dfcd, 0x1dfff), (0x2b81e, 0x2b81e), (0x3d000, 0x3fc3f)),
    "Ll": ((0x1d6a6, 0x1d6a6), (0x1df1f, 0x1df24), (0x1df2b, 0x1df3f), (0x1df41, 0x1df47),
           (0x1df49, 0x1df49), (0x1df4b, 0x1df4c), (0x1df4e, 0x1df50), (0x1df52, 0x1df67),
           (0x1df69, 0x1df69), (0x1df6b, 0x1df6b), (0x1df6d, 0x1df6d), (0x1df6f, 0x1df71),
           (0x1df73, 0x1df73), (0x1df75, 0x1df75), (0x1df77, 0x1df77), (0x1df79, 0x1df79),
           (0x1df7b, 0x1df7b), (0x1df7d, 0x1df7d), (0x1df7f, 0x1df7f), (0x1df90, 0x1df96)),
    "Lo": ((0x10ed9, 0x10eee), (0x11b0a, 0x11b0a), (0x11df1, 0x11df1), (0x18cd6, 0x18cda),
           (0x18d1f, 0x18d20), (0x18e00, 0x19191), (0x191a0, 0x191d2), (0x1b123, 0x1b128),
           (0x1b168, 0x1b168), (0x1df80, 0x1df81), (0x2b81e, 0x2b81e), (0x3d000, 0x3fc3f)),
    "Lu": ((0xa7dd, 0xa7dd), (0xa7e2, 0xa7e2), (0xab6c, 0xab6d), (0x1df40, 0x1df40),
           (0x1df48, 0x1df48), (0x1df4a, 0x1df4a), (0x1df4d, 0x1df4d), (0x1df51, 0x1df51),
           (0x1df68, 0x1df68), (0x1df6a, 0x1df6a), (0x1df6c, 0x1df6c), (0x1df6e, 0x1df6e),
           (0x1df72, 0x1df72), (0x1df74, 0x1df74), (0x1df76, 0x1df76), (0x1df78, 0x1df78),
           (0x1df7a, 0x1df7a), (0x1df7c, 0x1df7c), (0x1df7e, 0x1df7e)),
    "M": ((0x05c8, 0x05c9), (0x0b53, 0x0b54), (0x1ade, 0x1adf), (0x1aec, 0x1af0),
          (0x10ecb, 0x10ecf), (0x10ef0, 0x10ef9), (0x11df0, 0x11df0), (0x1d127, 0x1d128),
          (0x1d250, 0x1d252), (0x1d25b, 0x1d25c), (0x1d25f, 0x1d25f), (0x1d280, 0x1d281)),
    "N": ((0x1246f, 0x1246f), (0x12475, 0x1247f), (0x12550, 0x12686)),
}


class NodeMissing(RuntimeError):
    """``node`` is not on PATH."""


def node() -> str:
    """The path of ``node``, or :class:`NodeMissing` saying so in one line."""
    found = shutil.which("node")
    if found is None:
        raise NodeMissing("node (Node.js 20 or later) is not on PATH: the JavaScript text "
                          "rules cannot be checked without it")
    return found


def _run(arguments: Sequence[str], text: str) -> str:
    """``node rules_cli.mjs ARGUMENTS`` with ``text`` on stdin -> its stdout."""
    done = subprocess.run([node(), str(CLI), *arguments], input=text.encode("utf-8"),
                          capture_output=True, check=False)
    if done.returncode:
        last = (done.stderr.decode("utf-8", "replace").strip().splitlines() or ["?"])[-1]
        raise RuntimeError(f"{CLI.name} failed ({done.returncode}): {last}")
    return done.stdout.decode("utf-8")


def js_outputs(lines: Sequence[str], langs: Sequence[str]) -> list[dict]:
    """Per line, what the JavaScript rules give in its language (rules_cli.mjs's fields)."""
    with tempfile.TemporaryDirectory() as folder:
        path = pathlib.Path(folder) / "rules.json"
        path.write_text(json.dumps(rule_data.rule_document(sorted(set(langs)))), encoding="utf-8")
        text = "".join(json.dumps({"lang": lang, "line": line}) + "\n"
                       for line, lang in zip(lines, langs, strict=True))
        out = _run([str(path)], text)
    # Split at "\n" only: a JSON line holds U+2028 and U+0085 unescaped.
    return [json.loads(row) for row in out.split("\n")[:-1]]


def python_outputs(line: str, lang: str) -> dict:
    """What the Python rules give for ``line``, in rules_cli.mjs's fields and JSON's types."""
    tokens = word.tokenize(line, lang)
    words, owners = word.token_words(tokens, lang)
    return {"tokens": tokens, "detokenized": word.detokenize(tokens, lang),
            "sentences": sentences.split_sentences(line, lang),
            "words": list(words), "owners": [list(found) for found in owners]}


def js_differences(lines: Sequence[str], lang: str | Sequence[str]) -> dict[str, list[int]]:
    """Per rule (:data:`RULES`), the indices of the lines where the JavaScript rules differ
    from the Python ones; ``lang`` is every line's language, or one per line. Node.js
    runs on all lines while Python runs its rules on them."""
    node()
    lines = list(lines)
    langs = [lang] * len(lines) if isinstance(lang, str) else list(lang)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        running = pool.submit(js_outputs, lines, langs)
        python = [python_outputs(line, language) for line, language in zip(lines, langs)]
        js = running.result()
    return {rule: [i for i, (ours, theirs) in enumerate(zip(python, js, strict=True))
                   if any(ours[field] != theirs[field] for field in fields)]
            for rule, fields in _FIELDS.items()}


def table_classes(langs: Sequence[str]) -> tuple[str, ...]:
    """The Unicode classes and scripts (``\\p{NAME}``, ``\\P{NAME}``) the tables of
    ``langs`` are written with, sorted."""
    patterns = [p for lang in langs for table in rule_data.python_tables(lang).values()
                for p, _ in table]
    return tuple(sorted({name for p in patterns for name in regex.findall(r"\\[pP]\{(\w+)\}", p)}))


def as_ranges(points: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """Sorted code points -> (first, last) runs, as :data:`KNOWN_JS_DIFFERENCES` lists them."""
    runs: list[list[int]] = []
    for point in points:
        if runs and runs[-1][1] == point - 1:
            runs[-1][1] = point
        else:
            runs.append([point, point])
    return tuple((first, last) for first, last in runs)


def class_differences(classes: Sequence[str]) -> dict[str, list[int]]:
    """Per class, the code points (surrogates left out) one engine puts in it and the
    other does not."""
    text = every_character()
    patterns = {name: rule_data.js_pattern(rf"\p{{{name}}}") for name in classes}
    ranges = json.loads(_run(["--classes"], json.dumps(patterns)))
    found = {}
    for name in classes:
        python = {ord(c) for c in regex.findall(rf"\p{{{name}}}", text)}
        js = {c for first, last in ranges[name] for c in range(first, last + 1)}
        found[name] = sorted(python.symmetric_difference(js))
    return found
