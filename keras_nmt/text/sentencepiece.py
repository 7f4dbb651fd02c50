"""SentencePiece in pure Python (beyond the paper): training a model, and its codec.

A run trained with ``--tokenizer sentencepiece`` has one model per language (unigram,
or BPE with ``--sentencepiece-type bpe``), trained on the training side and saved in the
run directory as ``spm.LANG.model``. Its pieces are the vocabulary (written to
``vocab.LANG.txt`` as well) and it reserves the project's ids (pad 0, unk 1, bos 2, eos
3). :mod:`keras_nmt.text.sentencepiece_graph` runs the same model inside TensorFlow graphs.

Subword regularisation (Kudo, 2018) trains on segmentations sampled from the model
instead of its best one (:class:`SegmentationSampler`), so that a word seen whole is also
seen in pieces, as a rare word is.
"""

from __future__ import annotations

import io
import itertools
import math
import os
import pathlib
from typing import Iterable, Sequence

import numpy as np

from keras_nmt.core.constants import BOS, BOS_ID, EOS, EOS_ID, PAD, PAD_ID, RESERVED, UNK, UNK_ID
from keras_nmt.core.errors import CodecError
from keras_nmt.text.vocab import Vocabulary, ids_before_eos

KIND = "sentencepiece"
MODEL_TYPES = ("unigram", "bpe")
# Sentences the SentencePiece trainer keeps in memory (a uniform sample of the training
# side when it has more): bounds the memory of training on a large corpus.
SENTENCEPIECE_SAMPLE = 2_000_000
# Subword regularisation samples among this many best segmentations of a sentence (Kudo's
# l): enough to reach segmentations several pieces apart, and the n-best search's cost
# grows with it (on Anki, 8,000 pieces: about 120 microseconds a sentence in all at 32).
SAMPLED_NBEST = 32


class SentencePieceCodec:
    """A SentencePiece model (serialized bytes) run with the ``sentencepiece`` package;
    the codec interface of :class:`keras_nmt.text.word.WordCodec`."""

    kind = KIND

    def __init__(self, model: bytes, lang: str):
        import sentencepiece

        self.model, self.lang = bytes(model), lang
        self.processor = sentencepiece.SentencePieceProcessor(model_proto=self.model)
        pieces = [self.processor.id_to_piece(i) for i in range(self.processor.get_piece_size())]
        if tuple(pieces[:4]) != RESERVED:
            raise CodecError(
                f"a SentencePiece model must reserve ids 0-3 for {' '.join(RESERVED)}, "
                f"this one has {' '.join(pieces[:4])}"
            )
        self.vocabulary = Vocabulary(pieces)

    @classmethod
    def load(cls, path: str | os.PathLike, lang: str) -> "SentencePieceCodec":
        try:
            return cls(pathlib.Path(path).read_bytes(), lang)
        except FileNotFoundError:
            raise CodecError(f"SentencePiece model not found: {path}") from None

    def tokenize(self, line: str) -> list[str]:
        return self.processor.encode(line, out_type=str)

    def detokenize(self, tokens: Sequence[str]) -> str:
        return self.processor.decode_pieces(list(tokens))

    def encode(self, line: str) -> list[int]:
        return self.processor.encode(line)

    def decode(self, ids: Iterable[int]) -> str:
        return self.processor.decode(ids_before_eos(ids))


def train_sentencepiece(lines: Iterable[str], vocab_size: int, model_type: str = "unigram",
                        seed: int = 0, sample_size: int = SENTENCEPIECE_SAMPLE) -> bytes:
    """A SentencePiece model (``model_type``: "unigram" or "bpe") of at most ``vocab_size``
    pieces (fewer when the text cannot fill them) with the project's reserved ids, as
    serialized bytes, trained on a uniform sample of at most ``sample_size`` of the
    non-empty ``lines``, drawn with ``seed``: the same lines and seed give the same model."""
    import sentencepiece

    sample = uniform_sample((line for line in lines if line.strip()), sample_size, seed)
    model = io.BytesIO()
    with open(os.devnull, "w") as quiet:
        try:
            sentencepiece.SentencePieceTrainer.train(
                sentence_iterator=iter(sample),
                model_writer=model,
                logstream=quiet,
                vocab_size=vocab_size,
                hard_vocab_limit=False,
                model_type=model_type,
                character_coverage=1.0,
                # Sampled above: SentencePiece's own sampler draws from a generator that
                # cannot be seeded again once a thread has drawn.
                input_sentence_size=0,
                shuffle_input_sentence=False,
                pad_id=PAD_ID, unk_id=UNK_ID, bos_id=BOS_ID, eos_id=EOS_ID,
                pad_piece=PAD, unk_piece=UNK, bos_piece=BOS, eos_piece=EOS,
                num_threads=max(1, min(os.cpu_count() or 1, 8)),
                minloglevel=2,
            )
        except RuntimeError as error:
            raise CodecError(f"SentencePiece training failed: {error}") from None
    return model.getvalue()


def uniform_sample(items: Iterable[str], size: int, seed: int) -> list[str]:
    """A uniform sample of ``size`` of ``items`` (all of them when there are fewer), in one
    pass holding only the sample: reservoir sampling with geometric skips (Li, 1994,
    Algorithm L), so a draw costs per item kept, not per item read. The same items and
    ``seed`` give the same sample."""
    rng = np.random.default_rng(seed)
    iterator = iter(items)
    sample = list(itertools.islice(iterator, size))
    if len(sample) < size or size == 0:
        return sample

    def uniform() -> float:  # in (0, 1): the logarithms below need both ends open
        while (u := rng.random()) == 0.0:
            pass
        return u

    # W, the largest of the kept items' uniform keys: the next item with a smaller key
    # replaces a random one of them, a geometric skip away.
    weight = math.exp(math.log(uniform()) / size)
    while True:
        # W rounded to 1 (a large sample's first draws): the very next item is kept.
        skip = math.floor(math.log(uniform()) / math.log1p(-weight)) if weight < 1.0 else 0
        item = next(itertools.islice(iterator, skip, None), None)
        if item is None:
            return sample
        sample[int(rng.integers(size))] = item
        weight *= math.exp(math.log(uniform()) / size)


class SegmentationSampler:
    """Sampled segmentations of sentences given as their best ones (subword
    regularisation, Kudo 2018): ``sampler(rows, rngs)`` draws, for each row of ids (no
    EOS) and each generator, one of the sentence's SAMPLED_NBEST best segmentations with
    probability proportional to P(segmentation) ** ``alpha`` (a smaller ``alpha`` spreads
    the draws), and gives one list of rows per generator. A sentence's candidates are
    searched once for all generators: the search costs far more than a draw. A draw
    longer than ``max_len`` pieces, and a row holding UNK (whose text does not come back
    from its ids), keep the row.

    The draws come from ``rngs`` alone, not from SentencePiece's own sampler, whose seed
    cannot be set again once a thread has drawn: the same generators give the same draws,
    and each generator's draws do not depend on how many others there are."""

    def __init__(self, model: bytes, alpha: float, max_len: int):
        import sentencepiece

        self.alpha, self.max_len = alpha, max_len
        self.processor = sentencepiece.SentencePieceProcessor(model_proto=bytes(model))
        self.scores = np.array([self.processor.get_score(i)
                                for i in range(self.processor.get_piece_size())], np.float64)

    def __call__(self, rows: Sequence[Sequence[int]],
                 rngs: Sequence[np.random.Generator]) -> list[list[list[int]]]:
        sampled: list[list[list[int]]] = [[] for _ in rngs]
        for best in rows:
            best = list(best)
            if not best or UNK_ID in best:
                for copy in sampled:
                    copy.append(best)
                continue
            candidates = self.processor.nbest_encode(self.processor.decode(best),
                                                     nbest_size=SAMPLED_NBEST)
            logits = self.alpha * np.array([self.scores[c].sum() for c in candidates])
            cumulative = np.cumsum(np.exp(logits - logits.max()))
            for copy, rng in zip(sampled, rngs):
                drawn = int(np.searchsorted(cumulative, rng.random() * cumulative[-1],
                                            side="right"))
                chosen = candidates[min(drawn, len(candidates) - 1)]
                copy.append(chosen if len(chosen) <= self.max_len else best)
        return sampled
