"""Built-in English-to-French corpus, generated from a lexicon and a small grammar.

Training works out of the box with no download. The grammar makes the task need attention
(docs/data.md, "The built-in corpus"): local reordering, agreement that looks ahead or back,
many-to-one and one-to-many words, and long sentences whose length follows a target length
drawn first. Every pair comes with its gold word alignment.

Contract: pure standard library, driven by an explicit ``random.Random`` (no global random
state, ``hash()`` or set order), so a spec gives byte-identical files on every machine.
Modules: ``dictionary`` (the word lists and their tables), ``orthography`` (elision,
contraction, "a"/"an"), ``grammar`` (one pair and its alignment), ``generate`` (the splits of
a spec) and ``files`` (the corpus on disk). Cost: time grows linearly with the pairs asked for.
"""

from keras_nmt.corpus.builtin.files import CORPUS_FILES, METADATA_FILE, write_corpus
from keras_nmt.corpus.builtin.generate import (
    GENERATOR_VERSION, BuiltinCorpusSpec, corpus_stats, generate_corpus,
)
from keras_nmt.corpus.builtin.grammar import SentencePair, generate_pair
from keras_nmt.corpus.builtin.dictionary import SOURCE_LANG, TARGET_LANG

__all__ = [
    "SOURCE_LANG",
    "TARGET_LANG",
    "GENERATOR_VERSION",
    "CORPUS_FILES",
    "METADATA_FILE",
    "BuiltinCorpusSpec",
    "SentencePair",
    "generate_pair",
    "generate_corpus",
    "write_corpus",
    "corpus_stats",
]
