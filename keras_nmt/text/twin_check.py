"""Whether the text rules' two runtimes agree: the Python tokenizer, detokenizer and
sentence splitter (:mod:`keras_nmt.text.word`, :mod:`keras_nmt.text.sentences`, on the
``regex`` package) and their graph twins (:mod:`keras_nmt.text.word_graph`,
:mod:`keras_nmt.text.sentences_graph`, on TensorFlow's RE2), which run the same rewrite
tables: the SavedModel's text is the twins', every other path's the Python rules'.

The two engines carry their own Unicode tables, so one table can still read a character
two ways. :func:`class_differences` lists the code points where they do, for each class
the tables are written with; :func:`twin_differences` compares the two on lines.

Cost: :func:`class_differences` one pass of each engine over the 1.1M code points per
class (seconds); :func:`twin_differences` each rule once per line in each engine, O(N)
characters.
"""

from __future__ import annotations

import sys
import unicodedata
from typing import Sequence

import regex

from keras_nmt.text import sentences, word

# The Unicode classes and scripts the rewrite tables of word.py and sentences.py use.
CLASSES = ("L", "Ll", "Lu", "Lt", "Lo", "M", "N", "Z", "Cc", "Hiragana")
# Assigned code points (in Python's own Unicode database) that the two engines put in
# different classes, measured with regex 2026.11 and TensorFlow 2.21's RE2:
# U+0295 LATIN LETTER PHARYNGEAL VOICED FRICATIVE (ʕ) became Lo in Unicode 16; regex
# reads Lo, RE2 and Python 3.11 (Unicode 14) read Ll. So after ". " it starts a sentence
# for the Python splitter and not for the graph's, and a period before it is kept on its
# word by the graph's tokenizer only. Every other difference is a code point unassigned
# in Unicode 14, which no text of this Python's era holds.
KNOWN_DIFFERENCES: dict[str, tuple[int, ...]] = {"Ll": (0x295,), "Lo": (0x295,)}
RULES = ("tokenize", "detokenize", "split_sentences")


def every_character() -> str:
    """Every code point but the surrogates (UTF-8 cannot hold them), in order."""
    return "".join(chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF)


def class_differences(classes: Sequence[str] = CLASSES) -> dict[str, list[int]]:
    """Per class, the code points one engine puts in it and the other does not."""
    import tensorflow as tf

    text = every_character()
    found = {}
    for name in classes:
        python = set(regex.findall(rf"\p{{{name}}}", text))
        graph = tf.strings.regex_replace(text, rf"\P{{{name}}}", "").numpy().decode("utf-8")
        found[name] = sorted(ord(c) for c in python.symmetric_difference(graph))
    return found


def assigned_differences(found: dict[str, list[int]]) -> dict[str, list[int]]:
    """Of :func:`class_differences`' code points, those Python's Unicode database assigns,
    per class (empty classes left out)."""
    kept = {name: [c for c in points if unicodedata.category(chr(c)) != "Cn"]
            for name, points in found.items()}
    return {name: points for name, points in kept.items() if points}


def twin_differences(lines: Sequence[str], lang: str) -> dict[str, list[int]]:
    """Per rule (:data:`RULES`), the indices of the lines whose tokens, detokenized
    tokens or sentences differ between the Python rules and the graph's."""
    import tensorflow as tf

    from keras_nmt.text import sentences_graph, word_graph

    lines = list(lines)
    tokens = [word.tokenize(line, lang) for line in lines]
    graph = word_graph.tokenize(lines, lang).to_list()
    # From flat values and row lengths: tf.ragged.constant walks every token in Python
    # (a quarter of a comparison's time).
    ragged = tf.RaggedTensor.from_row_lengths(
        tf.constant([t for row in tokens for t in row], dtype=tf.string),
        tf.constant([len(row) for row in tokens], dtype=tf.int64))
    texts = word_graph.detokenize(ragged, lang).numpy()
    split = sentences_graph.split(lines, lang).to_list()
    return {
        "tokenize": [i for i, row in enumerate(graph)
                     if [t.decode("utf-8") for t in row] != tokens[i]],
        "detokenize": [i for i, text in enumerate(texts)
                       if text.decode("utf-8") != word.detokenize(tokens[i], lang)],
        "split_sentences": [i for i, row in enumerate(split)
                            if [s.decode("utf-8") for s in row]
                            != sentences.split_sentences(lines[i], lang)],
    }
