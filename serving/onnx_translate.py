"""Translate stdin with onnxruntime, without TensorFlow or Keras.

    python serving/onnx_translate.py EXPORT_DIR [--name nmt] [--beam K] < in.txt

Reads what ``python -m export RUN_DIR --out EXPORT_DIR --onnx`` writes: ``NAME.onnx`` (the
beam search over token ids, signature ``translate_ids``), ``NAME.onnx.json`` (languages,
vocabulary files, maximum source length, beam size, alpha) and the two vocabularies.
Sentences are encoded and decoded by :mod:`keras_nmt.codec` with the export's tokenizer,
the pure-Python twin of the SavedModel graph's: the word tokenizer
(:mod:`keras_nmt.tokenizer`), or for a SentencePiece run its two models
(``NAME.spm.SRC.model`` / ``NAME.spm.TGT.model``, run by the ``sentencepiece`` package).
They are truncated to the export's ``max_source_len`` tokens (pieces) as
the SavedModel and :class:`keras_nmt.translator.Translator` do (a warning at the end counts
the truncated lines). One output line per input line, in order; empty and
whitespace-only lines give empty lines. With ``--nbest N``: the Moses n-best format of
``keras_nmt.translate``, ``INDEX ||| translation ||| score``.

In Python::

    translator = OnnxTranslator.from_export_dir("exports", name="nmt")
    for t in translator.translate(["Hello."], beam_size=5):
        print(t.text, t.score, t.truncated)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import sys
import time
from typing import Callable, Sequence, TextIO

try:
    import keras_nmt  # noqa: F401  (run as a script: the project must be importable)
except ImportError:  # a checkout that is not installed: its root is the script's parent
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import numpy as np

from keras_nmt import codec
from keras_nmt.arguments import OneLineParser, non_negative_float, positive_int, run_command
from keras_nmt.lineio import InputError, binary, read_lines, std_streams
from keras_nmt.progress import Progress, format_duration
from keras_nmt.tokenizer import EOS_ID, Vocabulary, VocabularyError

PROG = "onnx_translate"
INPUTS = ("source_ids", "beam_size", "alpha", "forbid_unk", "max_length")
OUTPUTS = ("ids", "lengths", "scores")
METADATA_KEYS = (
    "src", "tgt", "source_vocab", "target_vocab", "max_source_len", "beam_size", "alpha",
)
# Files a tokenizer needs besides the vocabularies (NAME.onnx.json keys).
TOKENIZER_FILES = {codec.WORD: (), codec.SENTENCEPIECE: ("source_spm", "target_spm")}
# Sentences translated at a time: sorted by length within a chunk, written in order.
CHUNK_BATCHES = 64


class ExportError(ValueError):
    """An export directory that cannot be used."""


class UsageError(ValueError):
    """Options that do not fit together or do not fit the export."""


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
    tokenizer_name = metadata.get("tokenizer", codec.WORD)
    if tokenizer_name not in TOKENIZER_FILES:
        raise ExportError(f"{path}: tokenizer {tokenizer_name!r} is not supported here")
    missing = [key for key in TOKENIZER_FILES[tokenizer_name] if key not in metadata]
    if missing:
        raise ExportError(f"{path} lacks {', '.join(missing)} (tokenizer {tokenizer_name})")
    return metadata


def _load_codecs(export_dir: pathlib.Path, metadata: dict):
    """(source codec, target codec) of an export (:mod:`keras_nmt.codec`), checked
    against the vocabularies the ONNX model's ids index."""
    vocabularies = [Vocabulary.load(export_dir / metadata[key])
                    for key in ("source_vocab", "target_vocab")]
    langs = metadata["src"], metadata["tgt"]
    if metadata.get("tokenizer", codec.WORD) == codec.WORD:
        return tuple(codec.WordCodec(v, lang) for v, lang in zip(vocabularies, langs))
    codecs = []
    for key, vocabulary, lang in zip(("source_spm", "target_spm"), vocabularies, langs):
        try:
            loaded = codec.SentencePieceCodec.load(export_dir / metadata[key], lang)
        except codec.CodecError as error:  # says which file and why
            raise ExportError(str(error)) from None
        except (RuntimeError, OSError) as error:  # sentencepiece's own errors for a bad file
            raise ExportError(f"cannot load {export_dir / metadata[key]}: {error}") from None
        if loaded.vocabulary.tokens != vocabulary.tokens:
            raise ExportError(f"{metadata[key]} does not match {metadata[key.replace('spm', 'vocab')]}")
        codecs.append(loaded)
    return tuple(codecs)


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
                 beam_size: int = 5, alpha: float = 1.0, max_nbest: int = 1):
        self.session = session
        # keras_nmt.codec objects: the word tokenizer or SentencePiece, as exported.
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

    @classmethod
    def from_export_dir(cls, export_dir: str | os.PathLike, name: str = "nmt",
                        threads: int | None = None) -> "OnnxTranslator":
        """Load EXPORT_DIR/NAME.onnx.json, its vocabularies (and SentencePiece models),
        then NAME.onnx (raises
        :class:`ExportError` or VocabularyError naming what is missing or broken)."""
        export_dir = pathlib.Path(export_dir)
        if not export_dir.is_dir():
            raise ExportError(f"{export_dir} is not a directory")
        metadata = _load_metadata(export_dir / f"{name}.onnx.json")
        source_codec, target_codec = _load_codecs(export_dir, metadata)
        try:
            max_source_len = int(metadata["max_source_len"])
            beam_size = int(metadata["beam_size"])
            alpha = float(metadata["alpha"])
        except (TypeError, ValueError) as error:
            raise ExportError(f"{name}.onnx.json: {error}") from None
        session = _session(export_dir / str(metadata.get("model", f"{name}.onnx")), threads)
        # The graph's n-best width is fixed when it is traced: read it off the output
        # shape when the converter kept it static, else from the metadata.
        width = next(o.shape for o in session.get_outputs() if o.name == "lengths")
        max_nbest = width[1] if len(width) == 2 and isinstance(width[1], int) else int(
            metadata.get("nbest", 1)
        )
        return cls(session, source_codec, target_codec, max_source_len, beam_size, alpha,
                   max_nbest)

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
                  progress: Callable[[int], None] | None = None) -> list[OnnxTranslation]:
        """One translation per line, in order (see :meth:`Translator.translate`)."""
        beam_size = self.beam_size if beam_size is None else int(beam_size)
        alpha = self.alpha if alpha is None else float(alpha)
        if not 1 <= nbest <= self.max_nbest:
            raise ValueError(f"this export returns at most {self.max_nbest} hypotheses per "
                             f"sentence (export with --nbest N for more), got nbest={nbest}")
        if nbest > beam_size:
            raise ValueError(f"nbest ({nbest}) cannot exceed the beam size ({beam_size})")
        if batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size}")
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


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog=PROG,
        description="Translate raw sentences from stdin with onnxruntime, using "
        "EXPORT_DIR/NAME.onnx, NAME.onnx.json and the vocabularies written by "
        "`python -m export ... --onnx`. No TensorFlow needed. One translation per input "
        "line, in order.",
    )
    parser.add_argument("export_dir", metavar="EXPORT_DIR")
    parser.add_argument("--name", default="nmt", help="model name in EXPORT_DIR (default nmt)")
    parser.add_argument("--beam", type=positive_int, metavar="K",
                        help="beam size (default: the export's)")
    parser.add_argument("--alpha", type=non_negative_float, metavar="A",
                        help="length normalisation exponent (default: the export's)")
    parser.add_argument("--nbest", type=positive_int, metavar="N",
                        help="write the N best translations as 'INDEX ||| translation ||| score'"
                        " (at most the export's --nbest)")
    parser.add_argument("--no-unk", action="store_true", help="never generate <unk>")
    parser.add_argument("--batch-size", type=positive_int, default=32, metavar="B",
                        help="sentences decoded together (default 32)")
    parser.add_argument("--threads", type=positive_int, metavar="N",
                        help="onnxruntime intra-op threads (default: onnxruntime's choice)")
    parser.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    return parser


def main(argv: Sequence[str] | None = None, stdin=None, stdout: TextIO | None = None,
         stderr: TextIO | None = None) -> int:
    stdin, stdout, stderr = std_streams(stdin, stdout, stderr)
    args = build_parser().parse_args(argv)
    return run_command(PROG, lambda: _run(args, stdin, stdout, stderr), stdout, stderr,
                       (ExportError, VocabularyError, InputError, UsageError))


def _run(args, stdin, stdout: TextIO, stderr: TextIO) -> int:
    translator = OnnxTranslator.from_export_dir(args.export_dir, args.name, args.threads)
    nbest = args.nbest or 1
    beam = args.beam if args.beam is not None else max(translator.beam_size, nbest)
    options = dict(beam_size=beam, alpha=args.alpha, nbest=nbest, forbid_unk=args.no_unk,
                   batch_size=args.batch_size)
    try:
        translator.translate([], **options)  # checks the options before reading stdin
    except ValueError as error:
        raise UsageError(str(error)) from None
    lines = read_lines(binary(stdin).read())
    if hasattr(stdout, "reconfigure"):
        stdout.reconfigure(encoding="utf-8", newline="\n")
    progress = Progress(stream=stderr, enabled=not args.quiet and bool(lines))
    start = time.monotonic()
    done = [0]

    def advance(count: int) -> None:
        done[0] += count
        rate = done[0] / max(time.monotonic() - start, 1e-9)
        progress.update(f"translating: {done[0]}/{len(lines)} sentences, {rate:.1f} sentences/s")

    truncated = 0
    chunk = args.batch_size * CHUNK_BATCHES
    for begin in range(0, len(lines), chunk):
        part = lines[begin : begin + chunk]
        for index, t in enumerate(translator.translate(part, progress=advance, **options), begin):
            truncated += t.truncated > 0
            if args.nbest:
                for h in t.hypotheses:
                    stdout.write(f"{index} ||| {h.text} ||| {h.score:.4f}\n")
            else:
                stdout.write(t.text + "\n")
    stdout.flush()
    elapsed = time.monotonic() - start
    progress.message(f"translated {len(lines)} sentences in {format_duration(elapsed)}")
    progress.close()
    if truncated:
        limit = translator.max_source_len
        print(f"{PROG}: warning: {truncated} sentence(s) longer than {limit} tokens were "
              f"truncated to their first {limit} tokens", file=stderr)
    return 0

if __name__ == "__main__":
    sys.exit(main())
