"""A vocabulary: the reserved symbols first, then words (or pieces) by falling frequency.

Pure Python. Ids index the model's embedding and output layers; ``vocab.LANG.txt`` in a
run directory holds one token a line in id order.
"""

from __future__ import annotations

import collections
import pathlib
from typing import Iterable, Sequence

from keras_nmt.core.atomic import write_text_atomic
from keras_nmt.core.constants import BOS_ID, EOS_ID, PAD_ID, RESERVED, UNK, UNK_ID
from keras_nmt.corpus.readers import file_lines
from keras_nmt.core.errors import InputError, VocabularyError


def ids_before_eos(ids: Iterable[int]) -> list[int]:
    """A search output row as the ids of its text: up to (not including) the first EOS,
    PAD and BOS skipped."""
    out = []
    for i in ids:
        i = int(i)
        if i == EOS_ID:
            break
        if i not in (PAD_ID, BOS_ID):
            out.append(i)
    return out


class Vocabulary:
    """A word shortlist: reserved symbols first, then words by falling frequency."""

    def __init__(self, tokens: Sequence[str]):
        if tuple(tokens[: len(RESERVED)]) != RESERVED:
            raise VocabularyError(f"a vocabulary must start with {', '.join(RESERVED)}")
        if len(set(tokens)) != len(tokens):
            raise VocabularyError("a vocabulary must not repeat a token")
        self.tokens: tuple[str, ...] = tuple(tokens)
        self._ids = {token: i for i, token in enumerate(self.tokens)}

    @classmethod
    def build(cls, sentences: Iterable[Sequence[str]], size: int,
              min_count: int = 1) -> "Vocabulary":
        """The ``size`` - 4 most frequent tokens seen at least ``min_count`` times (ties
        broken by the token itself)."""
        counts: collections.Counter[str] = collections.Counter()
        for tokens in sentences:
            counts.update(tokens)
        return cls.from_counts(counts, size, min_count)

    @classmethod
    def from_counts(cls, counts: collections.Counter, size: int,
                    min_count: int = 1) -> "Vocabulary":
        counts = collections.Counter(counts)
        for reserved in RESERVED:
            counts.pop(reserved, None)
        ranked = sorted(((token, count) for token, count in counts.items() if count >= min_count),
                        key=lambda item: (-item[1], item[0]))
        words = [token for token, _ in ranked[: max(0, size - len(RESERVED))]]
        return cls(list(RESERVED) + words)

    def __len__(self) -> int:
        return len(self.tokens)

    def __contains__(self, token: str) -> bool:
        return token in self._ids

    def encode(self, tokens: Sequence[str]) -> list[int]:
        return [self._ids.get(token, UNK_ID) for token in tokens]

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Tokens up to (not including) the first EOS; PAD and BOS are skipped."""
        return [self.tokens[i] if 0 <= i < len(self.tokens) else UNK for i in ids_before_eos(ids)]

    def save(self, path: str | pathlib.Path) -> None:
        write_text_atomic(path, "".join(token + "\n" for token in self.tokens))

    @classmethod
    def load(cls, path: str | pathlib.Path) -> "Vocabulary":
        path = pathlib.Path(path)
        try:
            lines = list(file_lines(path))
        except FileNotFoundError:
            raise VocabularyError(f"vocabulary file not found: {path}") from None
        except InputError as error:
            raise VocabularyError(str(error)) from None
        return cls(lines)
