"""Corpora: readers and the built-in generator."""

from keras_nmt.corpus.builtin import (
    SOURCE_LANG,
    TARGET_LANG,
    BuiltinCorpusSpec,
    SentencePair,
    corpus_stats,
    generate_corpus,
    generate_pair,
    write_corpus,
)

__all__ = [
    "SOURCE_LANG",
    "TARGET_LANG",
    "BuiltinCorpusSpec",
    "SentencePair",
    "corpus_stats",
    "generate_corpus",
    "generate_pair",
    "write_corpus",
]
