"""The text rules' two runtimes agree byte for byte: the Python tokenizer, detokenizer and
sentence splitter (``regex``) and their TensorFlow twins in the SavedModel (RE2), which
run the same rewrite tables (compared by :mod:`keras_nmt.text.twin_check`).

The two regex engines carry their own Unicode tables:
:func:`test_the_engines_read_the_unicode_classes_alike` holds the assigned code points
where they read a class differently to the listed one, so a new drift fails it; the
generated lines leave that one out. The lines are drawn with a fixed seed from
pools chosen for the rules (:func:`generated_lines`): the default run compares 100,000 of
them, each in one language, and ``-m slow`` 200,000 in every language.
``python -m bench.text_agreement`` compares real corpora. The third rule with a twin,
``<unk>`` replacement, is compared on 100,000 generated hypotheses in the default run.
"""

import unicodedata

import pytest

from keras_nmt.text import sentences
from keras_nmt.text.twin_check import (KNOWN_DIFFERENCES, assigned_differences,
                                       class_differences, twin_differences)
from text_lines import LANGS, PUNCTUATION, WORDS, generated_lines


def test_the_engines_read_the_unicode_classes_alike():
    """Every class a rule uses holds the same assigned characters in both engines, but
    the ones listed in KNOWN_DIFFERENCES (what they are, and what they change, is said
    there): a new one fails here, naming it."""
    found = assigned_differences(class_differences())
    named = {name: [f"U+{c:04X} {unicodedata.name(chr(c), '?')}" for c in points]
             for name, points in found.items()}
    assert found == {name: list(points) for name, points in KNOWN_DIFFERENCES.items()}, named


def test_the_known_difference_shows_where_the_docs_say():
    """U+0295 after ". ": a sentence start to the Python splitter (Lo), not to RE2 (Ll)."""
    line = "Il dit oui. \u0295a est là."
    differences = twin_differences([line, "Il dit oui. Il est là."], "fr")
    assert differences["split_sentences"] == [0]
    assert sentences.split_sentences(line, "fr") == ["Il dit oui.", "\u0295a est là."]


def check_agreement(count: int, seed: int, every_language: bool) -> None:
    """``count`` generated lines, each in every language of LANGS or, if not
    ``every_language``, line i in LANGS[i % 3] only."""
    lines = generated_lines(count, seed)
    for index, lang in enumerate(LANGS):
        share = lines if every_language else lines[index::len(LANGS)]
        differences = twin_differences(share, lang)
        assert differences == {"tokenize": [], "detokenize": [], "split_sentences": []}, {
            rule: [share[i] for i in where[:5]] for rule, where in differences.items()}


@pytest.mark.end_to_end
def test_the_twins_agree_on_100k_generated_lines():
    """Each line in one language: a third of the CPU time of every line in all three."""
    check_agreement(100_000, seed=0, every_language=False)


@pytest.mark.slow
def test_the_twins_agree_on_many_more_generated_lines():
    check_agreement(200_000, seed=1, every_language=True)


def test_the_unk_replacement_twins_agree_on_generated_hypotheses():
    """<unk> replacement in the SavedModel (unk_replace_graph.UnknownWords) writes what
    every other path writes (unk_replace.replace_unknowns, then the detokenizer) on
    100,000 generated hypotheses: <unk> anywhere, EOS inside them, source sentences
    empty or of every length the batch pads to, attention of small integers (ties, rows
    all zero, the EOS column winning), source words the dictionary holds and lacks, and
    targets that are the words and punctuation the rules treat."""
    import numpy as np
    import tensorflow as tf

    from keras_nmt.core.constants import EOS_ID, RESERVED, UNK_ID
    from keras_nmt.text import word
    from keras_nmt.decoding.unk_replace import replace_unknowns
    from keras_nmt.decoding.unk_replace_graph import UnknownWords
    from keras_nmt.text.vocab import Vocabulary

    rng = np.random.default_rng(3)
    target = Vocabulary([*RESERVED, *WORDS, *(p for p in PUNCTUATION if p not in WORDS)])
    dictionary = {source: f"{source}-{i}" for i, source in enumerate(WORDS[::3])}
    replacer = UnknownWords(target, "fr", dictionary)
    words = np.array(WORDS, object)
    batch, nbest, steps, width = 500, 2, 8, 6
    others = np.arange(len(RESERVED), len(target))
    for _ in range(100):  # 100 batches of 500 sentences x 2 hypotheses
        counts = rng.integers(0, width + 1, batch)
        sources = [list(words[rng.integers(len(words), size=count)]) for count in counts]
        kind = rng.choice(3, size=(batch, nbest, steps), p=(0.35, 0.1, 0.55))
        ids = np.where(kind == 0, UNK_ID, np.where(kind == 1, EOS_ID,
                                                    rng.choice(others, (batch, nbest, steps))))
        attention = rng.integers(0, 3, (batch, nbest, steps, width + 1)).astype(np.float32)
        ragged = tf.ragged.constant(sources, dtype=tf.string, ragged_rank=1, inner_shape=())
        graph = replacer.texts(ragged, tf.constant(ids), tf.constant(attention)).numpy()
        for b, source in enumerate(sources):
            for n in range(nbest):
                row = list(ids[b, n])
                kept = row[:row.index(EOS_ID)] if EOS_ID in row else row
                tokens = replace_unknowns([target.tokens[i] for i in kept], source,
                                          attention[b, n], dictionary)
                expected = word.detokenize(list(tokens), "fr")
                assert graph[b, n].decode("utf-8") == expected, (source, kept, attention[b, n])
