"""The built-in corpus as data: what to generate (:class:`BuiltinCorpusSpec`), its
train/valid/test pairs (:func:`generate_corpus`) and their statistics."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

from keras_nmt.corpus.builtin.grammar import SentencePair, generate_pair
from keras_nmt.corpus.readers import SPLITS

# Bump whenever the lexicon or grammar changes: the same spec then yields a
# different corpus, and write_corpus must not mistake an old one for current.
GENERATOR_VERSION = 1


@dataclasses.dataclass(frozen=True)
class BuiltinCorpusSpec:
    """What to generate; equal specs give byte-identical corpora."""

    seed: int = 1234
    train_size: int = 30000
    valid_size: int = 500
    test_size: int = 1000
    # Longer drawn target lengths are clamped; a sentence that still exceeds
    # it is redrawn.
    max_source_tokens: int = 100

    def __post_init__(self) -> None:
        for name in ("train_size", "valid_size", "test_size"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.max_source_tokens < 8:
            raise ValueError(f"max_source_tokens must be >= 8, got {self.max_source_tokens}")


def generate_corpus(spec: BuiltinCorpusSpec) -> dict[str, list[SentencePair]]:
    """Train/valid/test pairs for ``spec``; no sentence occurs twice anywhere.

    Test is drawn first, then valid, then train, each from its own seeded
    stream, so changing ``train_size`` leaves the evaluation splits unchanged.
    A pair is rejected if its source or its target was seen before, in any
    split, which also removes duplicates within a split.
    """
    seen_src: set[tuple[str, ...]] = set()
    seen_tgt: set[tuple[str, ...]] = set()
    result: dict[str, list[SentencePair]] = {}
    for split in ("test", "valid", "train"):
        size = getattr(spec, f"{split}_size")
        # A string seed is hashed with SHA-512 by random.Random, so the stream
        # is the same in every process (unlike hash()).
        rng = random.Random(f"keras-nmt-builtin/{GENERATOR_VERSION}/{spec.seed}/{split}")
        pairs: list[SentencePair] = []
        attempts, max_attempts = 0, 20 * size + 1000
        while len(pairs) < size:
            attempts += 1
            if attempts > max_attempts:
                raise RuntimeError(f"could not draw {size} distinct pairs for {split!r}")
            pair = generate_pair(rng, max_source_tokens=spec.max_source_tokens)
            if len(pair.source) > spec.max_source_tokens:
                continue
            if pair.source in seen_src or pair.target in seen_tgt:
                continue
            seen_src.add(pair.source)
            seen_tgt.add(pair.target)
            pairs.append(pair)
        result[split] = pairs
    return {split: result[split] for split in SPLITS}


def corpus_stats(corpus: dict[str, list[SentencePair]]) -> dict[str, Any]:
    """Pairs, lengths and vocabulary sizes, as stored in builtin.json."""
    stats: dict[str, Any] = {}
    src_vocab: set[str] = set()
    tgt_vocab: set[str] = set()
    for split, pairs in corpus.items():
        src_lens = [len(p.source) for p in pairs]
        tgt_lens = [len(p.target) for p in pairs]
        count = max(len(pairs), 1)  # empty splits report zeros
        stats[split] = {
            "pairs": len(pairs),
            "mean_source_tokens": round(sum(src_lens) / count, 2),
            "max_source_tokens": max(src_lens, default=0),
            "mean_target_tokens": round(sum(tgt_lens) / count, 2),
            "max_target_tokens": max(tgt_lens, default=0),
            "share_source_over_30": round(sum(n > 30 for n in src_lens) / count, 4),
            "share_source_over_50": round(sum(n > 50 for n in src_lens) / count, 4),
        }
        for p in pairs:
            src_vocab.update(p.source)
            tgt_vocab.update(p.target)
    stats["source_vocabulary"] = len(src_vocab)
    stats["target_vocabulary"] = len(tgt_vocab)
    return stats
