"""The Translator API: raw sentences in, detokenized translations out.

The training report, ``keras_nmt.translate`` and ``keras_nmt.evaluate`` all go through
this class, and Python users call it directly::

    translator = Translator.from_run_dir("runs/search50")
    translator.translate(["The man is here."], beam_size=5)
"""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Callable, Sequence

import numpy as np
import tensorflow as tf

from keras_nmt import search, tokenizer
from keras_nmt.models import TranslationModel
from keras_nmt.rundir import RunDir, RunDirError
from keras_nmt.tokenizer import EOS_ID, Vocabulary


@dataclasses.dataclass(frozen=True)
class Translation:
    text: str  # detokenized
    tokens: tuple[str, ...]
    score: float  # length-normalised log-probability (0.0 for empty input)
    source_tokens: tuple[str, ...]
    attention: np.ndarray | None = None  # [output tokens + EOS, source tokens + EOS]


class Translator:
    def __init__(
        self,
        model: TranslationModel,
        source_vocab: Vocabulary,
        target_vocab: Vocabulary,
        src_lang: str,
        tgt_lang: str,
    ):
        self.model = model
        self.source_vocab = source_vocab
        self.target_vocab = target_vocab
        self.src_lang = src_lang
        self.tgt_lang = tgt_lang
        self._search = tf.function(self._search_ids, reduce_retracing=True)

    @classmethod
    def from_run_dir(cls, path: str | pathlib.Path, weights: str = "best") -> "Translator":
        """Load a run directory's model; ``weights`` is "best" (falling back to the last
        checkpoint when no best one was kept) or "last"."""
        run = RunDir(path)
        config = run.load_config()
        info = run.load_data_info()
        source_vocab, target_vocab = run.load_vocabularies()
        model = TranslationModel(config)
        directories = [run.best, run.checkpoints] if weights == "best" else [run.checkpoints]
        for directory in directories:
            latest = tf.train.latest_checkpoint(str(directory))
            if latest:
                tf.train.Checkpoint(model=model).read(latest).expect_partial()
                break
        else:
            raise RunDirError(f"{run.path} holds no trained weights (no checkpoint)")
        return cls(model, source_vocab, target_vocab, info["src"], info["tgt"])

    def _search_ids(self, source_ids, beam_size, alpha, forbid_unk):
        return search.beam_search(
            self.model,
            source_ids,
            beam_size,
            alpha=alpha,
            forbid_unk=forbid_unk,
            max_decode_ratio=self.model.config.max_decode_ratio,
        )

    def encode(self, lines: Sequence[str]) -> list[list[int]]:
        return [
            self.source_vocab.encode(tokenizer.tokenize(line, self.src_lang)) + [EOS_ID]
            for line in lines
        ]

    def translate(
        self,
        lines: Sequence[str],
        beam_size: int = 5,
        alpha: float = 1.0,
        forbid_unk: bool = False,
        batch_size: int = 32,
        with_attention: bool = False,
        progress: Callable[[int], None] | None = None,
    ) -> list[Translation]:
        """Translate ``lines``; the output has one Translation per line, in order.

        Sentences are decoded in batches of similar length (less padding); an empty
        or whitespace-only line translates to an empty string.
        """
        source_tokens = [tuple(tokenizer.tokenize(line, self.src_lang)) for line in lines]
        ids = [self.source_vocab.encode(tokens) + [EOS_ID] for tokens in source_tokens]
        results: list[Translation | None] = [None] * len(lines)
        todo = [i for i, tokens in enumerate(source_tokens) if tokens]
        for i, tokens in enumerate(source_tokens):
            if not tokens:
                results[i] = Translation("", (), 0.0, ())
        todo.sort(key=lambda i: len(ids[i]))
        for start in range(0, len(todo), batch_size):
            chosen = todo[start : start + batch_size]
            width = max(len(ids[i]) for i in chosen)
            batch = np.zeros((len(chosen), width), np.int32)
            for row, i in enumerate(chosen):
                batch[row, : len(ids[i])] = ids[i]
            out = self._search(
                tf.constant(batch),
                tf.constant(beam_size, tf.int32),
                tf.constant(alpha, tf.float32),
                tf.constant(forbid_unk),
            )
            out_ids, lengths = out["ids"].numpy(), out["lengths"].numpy()
            scores = out["scores"].numpy()
            attention = out["attention"].numpy() if with_attention else None
            for row, i in enumerate(chosen):
                length = int(lengths[row, 0])
                tokens = tuple(self.target_vocab.decode(out_ids[row, 0, :length]))
                weights = None
                if attention is not None:
                    weights = attention[row, 0, :length, : len(ids[i])]
                results[i] = Translation(
                    tokenizer.detokenize(tokens, self.tgt_lang),
                    tokens,
                    float(scores[row, 0]),
                    source_tokens[i],
                    weights,
                )
            if progress is not None:
                progress(len(chosen))
        return results  # type: ignore[return-value]
