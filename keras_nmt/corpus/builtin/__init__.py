"""Built-in English-to-French corpus, generated from a lexicon and a small grammar.

The toolkit must train out of the box (``python train.py``) without downloading
anything, so it ships a synthetic corpus instead of data.  A toy corpus is only
useful for an attention model if a plain encoder-decoder finds it hard, so the
grammar deliberately produces the phenomena that make Bahdanau et al. (2015)
attention pay off:

* local reordering: English adjectives precede the noun, French ones follow it,
  and stacked adjectives come out in reverse order ("the European economic
  area" -> "la zone économique européenne"); preverbal English adverbs follow
  the French verb; "does not see" -> "ne voit pas".
* agreement that needs look-ahead or look-back: le/la/les/l', un/une,
  ce/cet/cette/ces, son/sa/ses all depend on the noun, which in English can be
  several adjectives away; adjectives take one of four forms; verbs agree with
  their (possibly coordinated, possibly distant) subject.
* many-to-one and one-to-many tokens: "of the" -> "du", "to the" -> "au",
  "near" -> "près de", "in front of" -> "devant", "needs" -> "a besoin de".
* long sentences: nested prepositional phrases, subject and object relative
  clauses, subordinate and coordinated clauses.  Sentence length is steered by
  a target length drawn first, so the length distribution is predictable.

Everything is pure standard library and driven by an explicit
``random.Random``; no global random state, ``hash()`` or set order is used, so a
spec always yields byte-identical files on every machine and process.

Modules: ``dictionary`` (the bilingual word lists and the tables derived from
them), ``orthography`` (elision, contraction, "a"/"an"), ``grammar`` (one sentence pair
and its alignment), ``generate`` (the splits of a spec) and ``files`` (the corpus on disk).
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
