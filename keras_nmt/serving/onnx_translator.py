"""Translation with onnxruntime, without TensorFlow or Keras.

The command is ``keras-nmt onnx-translate EXPORT_DIR [--name nmt] [--beam K] < in.txt``
(:mod:`keras_nmt.cli.onnx_translate`). It reads what ``keras-nmt export RUN_DIR --out
EXPORT_DIR --onnx`` writes into the newest version's EXPORT_DIR/NAME/VERSION/onnx/
(:mod:`keras_nmt.export.layout`; another version with ``--model-version``): ``NAME.onnx`` (the
beam search over token ids, signature ``translate_ids``), ``NAME.onnx.json`` (languages,
vocabulary files, maximum source length, beam size, alpha) and the two vocabularies.
Sentences are encoded and decoded by the export's :mod:`keras_nmt.text` codecs, the
pure-Python twins of the SavedModel graph's: the word tokenizer
(:mod:`keras_nmt.text.word`), or for a SentencePiece run its two models
(``NAME.spm.SRC.model`` / ``NAME.spm.TGT.model``, run by the ``sentencepiece`` package).
They are truncated to the export's ``max_source_len`` tokens (pieces) as
the SavedModel and :class:`keras_nmt.translator.Translator` do (a warning at the end counts
the truncated lines). One output line per input line, in order; empty and
whitespace-only lines give empty lines.

In Python::

    translator = OnnxTranslator.from_export_dir("exports", name="nmt")
    for t in translator.translate(["Hello."], beam_size=5):
        print(t.text, t.score, t.truncated)
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
from typing import Callable, Sequence

import numpy as np

from keras_nmt.constants import EOS_ID
from keras_nmt.export import ExportError, layout
from keras_nmt.text import CodecError, codecs
from keras_nmt.vocab import Vocabulary

INPUTS = ("source_ids", "beam_size", "alpha", "forbid_unk", "max_length")
OUTPUTS = ("ids", "lengths", "scores")
METADATA_KEYS = (
    "src", "tgt", "source_vocab", "target_vocab", "max_source_len", "beam_size", "alpha",
)
# Files a tokenizer needs besides the vocabularies (NAME.onnx.json keys).
TOKENIZER_FILES = {codecs.WORD: (), codecs.SENTENCEPIECE: ("source_spm", "target_spm")}


@dataclasses.dataclass(frozen=True)
class Hypothesis:
    text: str  # detokenized
    tokens: tuple[str, ...]
    score: float  # length-normalised log-probability, as Translation.score


@dataclasses.dataclass(frozen=True)
class OnnxTranslation:
    """The best hypothesis of one line, and the n-best list it heads."""

    text: str
    tokens: tuple[str, ...]
    score: float  # 0.0 for an empty line
    truncated: int  # source tokens dropped beyond max_source_len
    hypotheses: tuple[Hypothesis, ...]  # best first; (the best,) with nbest=1


def _load_metadata(path: pathlib.Path) -> dict:
    try:
        metadata = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ExportError(f"{path} not found (was the model exported with --onnx?)") from None
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise ExportError(f"cannot read {path}: {error}") from None
    if not isinstance(metadata, dict):
        raise ExportError(f"{path} does not hold a JSON object")
    missing = [key for key in METADATA_KEYS if key not in metadata]
    if missing:
        raise ExportError(f"{path} lacks {', '.join(missing)}")
    tokenizer_name = metadata.get("tokenizer", codecs.WORD)
    if tokenizer_name not in TOKENIZER_FILES:
        raise ExportError(f"{path}: tokenizer {tokenizer_name!r} is not supported here")
    missing = [key for key in TOKENIZER_FILES[tokenizer_name] if key not in metadata]
    if missing:
        raise ExportError(f"{path} lacks {', '.join(missing)} (tokenizer {tokenizer_name})")
    return metadata


def _load_codecs(export_dir: pathlib.Path, metadata: dict):
    """(source codec, target codec) of an export (:mod:`keras_nmt.text.codecs`), checked
    against the vocabularies the ONNX model's ids index."""
    kind = metadata.get("tokenizer", codecs.WORD)
    loaded = []
    for side, lang in (("source", metadata["src"]), ("target", metadata["tgt"])):
        vocabulary_name = metadata[f"{side}_vocab"]
        vocabulary = Vocabulary.load(export_dir / vocabulary_name)
        model = metadata.get(f"{side}_spm")
        try:
            loaded.append(codecs.make_codec(
                kind, lang, vocabulary, export_dir / model if model else None, vocabulary_name
            ))
        except CodecError as error:  # says which file and why
            raise ExportError(str(error)) from None
        except (RuntimeError, OSError) as error:  # sentencepiece's own errors for a bad file
            raise ExportError(f"cannot load {export_dir / model}: {error}") from None
    return tuple(loaded)


def _session(path: pathlib.Path, threads: int | None):
    import onnxruntime

    if not path.is_file():
        raise ExportError(f"{path} not found (was the model exported with --onnx?)")
    options = onnxruntime.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
    try:
        session = onnxruntime.InferenceSession(
            str(path), options, providers=["CPUExecutionProvider"]
        )
    except Exception as error:  # onnxruntime raises its own untyped errors for bad files
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ExportError(f"cannot load {path}: {reason}") from None
    names = {i.name for i in session.get_inputs()}, {o.name for o in session.get_outputs()}
    for kind, wanted, have in (("input", INPUTS, names[0]), ("output", OUTPUTS, names[1])):
        missing = [name for name in wanted if name not in have]
        if missing:
            raise ExportError(f"{path} has no {kind} {missing[0]!r}: not a translate_ids model")
    return session


class OnnxTranslator:
    """Raw sentences in, detokenized translations out, through an onnxruntime session
    running the export's ``translate_ids`` beam search."""

    def __init__(self, session, source_codec, target_codec, max_source_len: int,
                 beam_size: int = 5, alpha: float = 1.0, max_nbest: int = 1,
                 shortlist: tuple[int, int] | None = None):
        self.session = session
        # keras_nmt.text codecs: the word tokenizer or SentencePiece, as exported.
        self.source_codec = source_codec
        self.target_codec = target_codec
        self.source_vocab = source_codec.vocabulary
        self.target_vocab = target_codec.vocabulary
        self.src_lang = source_codec.lang
        self.tgt_lang = target_codec.lang
        self.max_source_len = int(max_source_len)
        self.beam_size = int(beam_size)
        self.alpha = float(alpha)
        self.max_nbest = int(max_nbest)  # hypotheses per sentence the graph returns
        # The export's vocabulary selection (F, B), when its graph holds a lexical table.
        self.selects = any(i.name == "shortlist_best" for i in session.get_inputs())
        self.shortlist = tuple(shortlist) if shortlist and self.selects else None

    @classmethod
    def from_export_dir(cls, export_dir: str | os.PathLike, name: str = "nmt",
                        threads: int | None = None, int8: bool = False,
                        version: int | None = None) -> "OnnxTranslator":
        """Load NAME.onnx.json of the newest version of ``name`` in EXPORT_DIR (or of
        ``version``; :func:`keras_nmt.export.layout.find_onnx_dir`), its vocabularies (and
        SentencePiece models), then NAME.onnx, or with ``int8`` NAME.int8.onnx (raises
        :class:`ExportError` or VocabularyError naming what is missing or broken)."""
        export_dir = layout.find_onnx_dir(export_dir, name, version)
        metadata = _load_metadata(export_dir / layout.metadata_name(name))
        source_codec, target_codec = _load_codecs(export_dir, metadata)
        try:
            max_source_len = int(metadata["max_source_len"])
            beam_size = int(metadata["beam_size"])
            alpha = float(metadata["alpha"])
            shortlist = metadata.get("shortlist")
            shortlist = None if shortlist is None else (int(shortlist[0]), int(shortlist[1]))
        except (TypeError, ValueError, IndexError) as error:
            raise ExportError(f"{name}.onnx.json: {error}") from None
        model = metadata.get("model", f"{name}.onnx")
        if int8:
            if not isinstance(metadata.get("int8"), dict) or "model" not in metadata["int8"]:
                raise ExportError(f"{name}.onnx.json names no int8 model (export with --int8)")
            model = metadata["int8"]["model"]
        session = _session(export_dir / str(model), threads)
        # The graph's n-best width is fixed when it is traced: read it off the output
        # shape when the converter kept it static, else from the metadata.
        width = next(o.shape for o in session.get_outputs() if o.name == "lengths")
        max_nbest = width[1] if len(width) == 2 and isinstance(width[1], int) else int(
            metadata.get("nbest", 1)
        )
        return cls(session, source_codec, target_codec, max_source_len, beam_size, alpha,
                   max_nbest, shortlist)

    def source_ids(self, line: str) -> tuple[list[int], int]:
        """A line's source ids with EOS, cut to ``max_source_len`` tokens, and the number
        of tokens cut (Translator's rule). No tokens: an empty list."""
        tokens = self.source_codec.tokenize(line)
        dropped = max(0, len(tokens) - self.max_source_len)
        tokens = tokens[: self.max_source_len]
        return (self.source_vocab.encode(tokens) + [EOS_ID] if tokens else []), dropped

    def translate(self, lines: Sequence[str], beam_size: int | None = None,
                  alpha: float | None = None, nbest: int = 1, forbid_unk: bool = False,
                  batch_size: int = 32,
                  progress: Callable[[int], None] | None = None,
                  shortlist: tuple[int, int] | bool | None = True) -> list[OnnxTranslation]:
        """One translation per line, in order (see :meth:`Translator.translate`).
        ``shortlist``: True, the export's vocabulary selection (if it was exported with
        one); (F, B) another one (the export must hold a lexical table); False or None:
        the whole vocabulary."""
        beam_size = self.beam_size if beam_size is None else int(beam_size)
        alpha = self.alpha if alpha is None else float(alpha)
        if not 1 <= nbest <= self.max_nbest:
            raise ValueError(f"this export returns at most {self.max_nbest} hypotheses per "
                             f"sentence (export with --nbest N for more), got nbest={nbest}")
        if nbest > beam_size:
            raise ValueError(f"nbest ({nbest}) cannot exceed the beam size ({beam_size})")
        if batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size}")
        if shortlist is True:
            shortlist = self.shortlist
        elif shortlist and not self.selects:
            raise ValueError("this export has no lexical table (export with --shortlist F,B)")
        selection = {}
        if self.selects:
            frequent, best = shortlist or (0, 0)
            selection = {"shortlist_frequent": np.array(frequent, np.int32),
                         "shortlist_best": np.array(best, np.int32)}
        prepared = [self.source_ids(line) for line in lines]
        empty = OnnxTranslation("", (), 0.0, 0, (Hypothesis("", (), 0.0),))
        results: list[OnnxTranslation] = [empty] * len(lines)
        todo = sorted((i for i, (ids, _) in enumerate(prepared) if ids),
                      key=lambda i: len(prepared[i][0]))
        for start in range(0, len(todo), batch_size):
            chosen = todo[start : start + batch_size]
            width = max(len(prepared[i][0]) for i in chosen)
            batch = np.zeros((len(chosen), width), np.int32)
            for row, i in enumerate(chosen):
                batch[row, : len(prepared[i][0])] = prepared[i][0]
            ids, lengths, scores = self.session.run(list(OUTPUTS), {
                "source_ids": batch,
                "beam_size": np.array(beam_size, np.int32),
                "alpha": np.array(alpha, np.float32),
                "forbid_unk": np.array(bool(forbid_unk)),
                "max_length": np.array(0, np.int32),  # the max_decode_ratio rule
                **selection,
            })
            for row, i in enumerate(chosen):
                hypotheses = []
                for n in range(min(nbest, lengths.shape[1])):
                    length = int(lengths[row, n])
                    if length == 0:  # an n-best slot no hypothesis filled
                        continue
                    tokens = tuple(self.target_vocab.decode(ids[row, n, :length]))
                    text = self.target_codec.detokenize(tokens)
                    hypotheses.append(Hypothesis(text, tokens, float(scores[row, n])))
                best = hypotheses[0]
                results[i] = OnnxTranslation(best.text, best.tokens, best.score,
                                             prepared[i][1], tuple(hypotheses))
            if progress is not None:
                progress(len(chosen))
        return results
