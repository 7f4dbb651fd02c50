"""One pass over a training split before training: the pairs the length limit drops,
the empty ones, and the token counts the vocabularies are built from.

Apart from :mod:`keras_nmt.corpus.readers` because it tokenizes: the word tokenizer reads
its vocabularies with the readers, so the readers cannot import it.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Callable

from keras_nmt.corpus.readers import ParallelFiles
from keras_nmt.text import word


@dataclasses.dataclass
class SplitStats:
    """What a pass over a training split found."""

    pairs: int = 0
    kept: int = 0
    too_long: int = 0
    empty: int = 0
    source_tokens: int = 0  # in the kept pairs, EOS not counted
    target_tokens: int = 0
    source_counts: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    target_counts: collections.Counter = dataclasses.field(default_factory=collections.Counter)

    def summary(self) -> dict[str, int]:
        return {"pairs": self.pairs, "kept": self.kept, "dropped_too_long": self.too_long,
                "skipped_empty": self.empty, "source_tokens": self.source_tokens,
                "target_tokens": self.target_tokens}


def scan_training_split(
    files: ParallelFiles, src: str, tgt: str, max_len: int,
    tokenizers: tuple[Callable[[str], list[str]], Callable[[str], list[str]]] | None = None,
    progress: Callable[[int], None] | None = None,
) -> SplitStats:
    """Tokenize the training split once: word counts for the shortlists, and how many
    pairs the length limit drops (the pipeline drops the same ones).

    Streams the files: memory holds one pair and the two token-count tables (which grow
    with the number of distinct tokens, not with the corpus). ``tokenizers`` (source,
    target) replace the word tokenizer, e.g. by a subword model's. ``progress`` is
    called with the pairs read so far, every 1,000 pairs and at the end."""
    if tokenizers is None:
        tokenizers = (lambda line: word.tokenize(line, src),
                      lambda line: word.tokenize(line, tgt))
    tokenize_source, tokenize_target = tokenizers
    stats = SplitStats()
    for source, target in files.pairs():
        stats.pairs += 1
        if progress and not stats.pairs % 1000:
            progress(stats.pairs)
        s, t = tokenize_source(source), tokenize_target(target)
        if not s or not t:
            stats.empty += 1
            continue
        if len(s) > max_len or len(t) > max_len:
            stats.too_long += 1
            continue
        stats.kept += 1
        stats.source_tokens += len(s)
        stats.target_tokens += len(t)
        stats.source_counts.update(s)
        stats.target_counts.update(t)
    if progress:
        progress(stats.pairs)
    return stats
