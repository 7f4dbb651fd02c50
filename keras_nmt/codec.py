"""Text codecs: how a run turns a sentence into ids and ids back into a sentence.

No TensorFlow import: the onnxruntime path uses this module on its own.

A run directory names its tokenizer in ``data.json`` (``"tokenizer"``; runs made before
the field existed are ``"word"``), and :func:`run_codecs` gives its two codecs. Both
kinds have the same interface:

- ``tokenize(line) -> list[str]`` and ``detokenize(tokens) -> str``;
- ``encode(line) -> list[int]`` (no EOS) and ``decode(ids) -> str`` (stops at the first
  EOS, skips PAD and BOS);
- ``vocabulary``: the :class:`~keras_nmt.tokenizer.Vocabulary` whose ids ``encode``
  gives, ``<pad> <unk> <s> </s>`` first.

``word`` is the paper's: the Moses-compatible word tokenizer of
:mod:`keras_nmt.tokenizer` and a frequency shortlist. ``sentencepiece`` (beyond the
paper) is a SentencePiece model per language trained on the training side, saved in the
run directory as ``spm.LANG.model``; its pieces are the vocabulary (written to
``vocab.LANG.txt`` as well) and it reserves the project's ids (pad 0, unk 1, bos 2,
eos 3). :mod:`keras_nmt.graph_codec` runs the same models inside TensorFlow graphs.
"""

from __future__ import annotations

import io
import json
import os
import pathlib
from typing import Iterable, Iterator, Sequence

from keras_nmt import tokenizer
from keras_nmt.tokenizer import BOS_ID, EOS, BOS, EOS_ID, PAD, PAD_ID, UNK, UNK_ID, Vocabulary

WORD, SENTENCEPIECE = "word", "sentencepiece"
TOKENIZERS = (WORD, SENTENCEPIECE)
# Sentences the SentencePiece trainer keeps in memory (a uniform sample of the training
# side when it has more): bounds the memory of training on a large corpus.
SENTENCEPIECE_SAMPLE = 2_000_000


class CodecError(ValueError):
    """A tokenizer setting or model file that cannot be used; the message says why."""


def _ids_before_eos(ids: Iterable[int]) -> list[int]:
    out = []
    for i in ids:
        i = int(i)
        if i == EOS_ID:
            break
        if i not in (PAD_ID, BOS_ID):
            out.append(i)
    return out


class WordCodec:
    """The paper's words: Moses-compatible tokenizer and a shortlist."""

    kind = WORD

    def __init__(self, vocabulary: Vocabulary, lang: str):
        self.vocabulary, self.lang = vocabulary, lang

    def tokenize(self, line: str) -> list[str]:
        return tokenizer.tokenize(line, self.lang)

    def detokenize(self, tokens: Sequence[str]) -> str:
        return tokenizer.detokenize(tokens, self.lang)

    def encode(self, line: str) -> list[int]:
        return self.vocabulary.encode(self.tokenize(line))

    def decode(self, ids: Iterable[int]) -> str:
        return self.detokenize(self.vocabulary.decode(ids))


class SentencePieceCodec:
    """A SentencePiece model (serialized bytes) run with the ``sentencepiece`` package."""

    kind = SENTENCEPIECE

    def __init__(self, model: bytes, lang: str):
        import sentencepiece

        self.model, self.lang = bytes(model), lang
        self.processor = sentencepiece.SentencePieceProcessor(model_proto=self.model)
        pieces = [self.processor.id_to_piece(i) for i in range(self.processor.get_piece_size())]
        if tuple(pieces[:4]) != (PAD, UNK, BOS, EOS):
            raise CodecError(
                f"a SentencePiece model must reserve ids 0-3 for {PAD} {UNK} {BOS} {EOS}, "
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
        return self.processor.decode(_ids_before_eos(ids))


def train_sentencepiece(lines: Iterable[str], vocab_size: int) -> bytes:
    """A unigram SentencePiece model of at most ``vocab_size`` pieces (fewer when the
    text cannot fill them) with the project's reserved ids, as serialized bytes."""
    import sentencepiece

    model = io.BytesIO()
    with open(os.devnull, "w") as quiet:
        try:
            sentencepiece.SentencePieceTrainer.train(
                sentence_iterator=(line for line in lines if line.strip()),
                model_writer=model,
                logstream=quiet,
                vocab_size=vocab_size,
                hard_vocab_limit=False,
                model_type="unigram",
                character_coverage=1.0,
                input_sentence_size=SENTENCEPIECE_SAMPLE,
                shuffle_input_sentence=True,
                pad_id=PAD_ID, unk_id=UNK_ID, bos_id=BOS_ID, eos_id=EOS_ID,
                pad_piece=PAD, unk_piece=UNK, bos_piece=BOS, eos_piece=EOS,
                num_threads=max(1, min(os.cpu_count() or 1, 8)),
                minloglevel=2,
            )
        except RuntimeError as error:
            raise CodecError(f"SentencePiece training failed: {error}") from None
    return model.getvalue()


def sentencepiece_path(run_path: str | os.PathLike, lang: str) -> pathlib.Path:
    return pathlib.Path(run_path) / f"spm.{lang}.model"


def tokenizer_of(info: dict) -> str:
    """The tokenizer a run's ``data.json`` names (``word`` when it names none)."""
    kind = info.get("tokenizer", WORD)
    if kind not in TOKENIZERS:
        raise CodecError(f"unknown tokenizer {kind!r} in data.json; known: {', '.join(TOKENIZERS)}")
    return kind


def load_codec(run_path: str | os.PathLike, info: dict, lang: str, vocabulary: Vocabulary):
    """The codec of one language of a run, from its ``data.json`` entry and files."""
    if tokenizer_of(info) == SENTENCEPIECE:
        codec = SentencePieceCodec.load(sentencepiece_path(run_path, lang), lang)
        if codec.vocabulary.tokens != vocabulary.tokens:
            raise CodecError(f"{sentencepiece_path(run_path, lang)} does not match vocab.{lang}.txt")
        return codec
    return WordCodec(vocabulary, lang)


def read_data_info(run_path: str | os.PathLike) -> dict:
    return json.loads((pathlib.Path(run_path) / "data.json").read_text(encoding="utf-8"))


def run_codecs(run_path: str | os.PathLike):
    """(source codec, target codec) of a run directory."""
    run_path = pathlib.Path(run_path)
    info = read_data_info(run_path)
    vocabularies = [Vocabulary.load(run_path / f"vocab.{info[side]}.txt") for side in ("src", "tgt")]
    return tuple(load_codec(run_path, info, info[side], vocabulary)
                 for side, vocabulary in zip(("src", "tgt"), vocabularies))


def side_lines(pairs: Iterator[tuple[str, str]], side: int) -> Iterator[str]:
    for pair in pairs:
        yield pair[side]
