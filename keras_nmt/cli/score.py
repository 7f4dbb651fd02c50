"""``keras-nmt score``: the model's log-probability of given translations (force decoding).

    keras-nmt score RUN_DIR [RUN_DIR ...] --src FILE --tgt FILE [--nbest-input]
        [--format tsv|json|nbest] [--alpha A] [--align FILE] [--attention FILE.jsonl]
        [--out FILE] [--batch-size B] [--weights W] [--quiet]

One output line per line of --tgt, in order. The numbers are defined in
:mod:`keras_nmt.evaluation.forced`, which does the work; this module reads, checks and
writes.
"""

from __future__ import annotations

import argparse
import contextlib
import pathlib
import sys
from typing import Sequence, TextIO

from keras_nmt.core.atomic import json_text, open_atomic
from keras_nmt.cli.common import (
    Console, OneLineParser, add_quiet_argument, add_weights_argument, non_negative_float,
    positive_int, quiet_tensorflow, run_main,
)
from keras_nmt.decoding.confidence import codec_confidence
from keras_nmt.core.config import check_attention
from keras_nmt.core.constants import EOS
from keras_nmt.corpus.readers import file_lines
from keras_nmt.decoding.ensemble import check_compatible
from keras_nmt.core.errors import InputError
from keras_nmt.core.progress import Phase, Progress, format_duration
from keras_nmt.rundir.run_directory import RunDir

PROG = "keras-nmt score"
# Pairs handed to force_decode at a time; a chunk's lines are written before the next
# one starts (bounded memory for a corpus of any size).
CHUNK_PAIRS = 2048
FORMATS = ("tsv", "json", "nbest")
NBEST_SEPARATOR = " ||| "

DESCRIPTION = """\
Score given translations with the model of RUN_DIR (several RUN_DIRs: an ensemble, the
log of the models' mean probability at each token): force-decode each line of --tgt
given its line of --src and write one line per line of --tgt, in order.

  logprob            sum of the natural-log probabilities of the target tokens and EOS
  tokens             the run's target tokens (words or SentencePiece pieces) + 1 for EOS
  logprob_per_token  logprob / tokens
  score              logprob / tokens ** alpha (the beam search's ranking score)

Nothing is truncated: every pair is scored whole, however long (the model has no length
limit). An empty or whitespace-only line is scored as EOS alone (an empty target: the
probability of ending at once). Target words outside the vocabulary are scored as <unk>
(json counts them)."""

EPILOG = """\
formats (--format):
  tsv    LOGPROB<TAB>LOGPROB_PER_TOKEN<TAB>TOKENS (the default), with --confidence
         <TAB>CONFIDENCE
  json   one object a line: {"index", "logprob", "tokens", "logprob_per_token", "score",
         "unk", "token_logprobs": one per target token then EOS}, with --confidence
         "confidence" and "words": [[word, confidence], ...]
  nbest  INDEX ||| translation ||| score, as keras-nmt translate --nbest writes it
INDEX is the 0-based line number of --src the target translates.

n-best lists (--nbest-input): --tgt is keras-nmt translate --nbest output (Moses format:
"INDEX ||| translation ||| ..."; fields after the translation are ignored); each line
is scored against line INDEX of --src. Rescoring: score the n-best list of one model
with another, --format nbest.

alignments: --align writes Pharaoh links "i-j" (source token i, target token j, 0-based
over the run's tokens), each target token linked to the source token it attends to most
(EOS left out); --attention writes one JSON object a pair: {"index", "source", "target"
(tokens + "</s>"), "attention" (one row per target token + EOS, one column per source
token + EOS, each row summing to 1), "score", "logprob"}. RNNencdec runs have none.

confidence (--confidence): exp(logprob_per_token), the geometric mean of the token
probabilities, in (0, 1]; a word's is the least probable of its tokens, the words being
those of the detokenized tokens (see docs/decoding.md)."""


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = OneLineParser(prog=prog, description=DESCRIPTION, epilog=EPILOG,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="a training run directory")
    parser.add_argument("--src", required=True, metavar="FILE",
                        help="source sentences, one per line (UTF-8, .gz read as gzip)")
    parser.add_argument("--tgt", required=True, metavar="FILE",
                        help="translations to score, line-aligned with --src (or an n-best "
                        "list with --nbest-input)")
    parser.add_argument("--nbest-input", dest="nbest", action="store_true",
                        help="--tgt is an n-best list 'INDEX ||| translation ||| ...' (see below)")
    parser.add_argument("--format", choices=FORMATS, default="tsv",
                        help="output lines (default tsv; see below)")
    parser.add_argument("--alpha", type=non_negative_float, metavar="A",
                        help="the exponent of the score field (json, nbest): logprob / "
                        "tokens**A (default: the run's tuned alpha, else its length_alpha, "
                        "as keras-nmt translate)")
    parser.add_argument("--confidence", action="store_true",
                        help="also write each translation's confidence, as keras-nmt "
                        "translate --confidence computes it (tsv: a fourth column; json: "
                        "\"confidence\" and \"words\"; see below)")
    parser.add_argument("--out", metavar="FILE",
                        help="write the scores here instead of stdout (whole or not at all)")
    parser.add_argument("--align", metavar="FILE",
                        help="also write each pair's argmax attention links, Pharaoh 'i-j'")
    parser.add_argument("--attention", metavar="FILE.jsonl",
                        help="also write each pair's tokens and attention matrix (JSON lines)")
    parser.add_argument("--batch-size", type=positive_int, default=32, metavar="B",
                        help="pairs force-decoded together (default 32)")
    add_weights_argument(parser)
    add_quiet_argument(parser, "no progress line on stderr")
    parser.rename("--nbest", "--nbest-input")
    parser.add_check(_check_confidence)
    return parser


def _check_confidence(args: argparse.Namespace) -> None:
    if args.confidence and args.format == "nbest":
        raise ValueError("--confidence is written with --format tsv or json, not nbest")


def main(argv: Sequence[str] | None = None, stdin=None, stdout: TextIO | None = None,
         stderr: TextIO | None = None, prog: str = PROG) -> int:
    return run_main(build_parser(prog), _score, argv, stdin, stdout, stderr)


def read_text_lines(flag: str, path: str) -> list[str]:
    """A file's lines (UTF-8, gzip for .gz); InputError naming ``flag`` when it cannot be read."""
    file = pathlib.Path(path)
    if not file.is_file():
        raise InputError(f"{flag} file not found: {file}")
    try:
        return list(file_lines(file))
    except (OSError, EOFError) as error:
        raise InputError(f"cannot read {flag} {file}: {getattr(error, 'strerror', None) or error}") from None


def parse_nbest(lines: Sequence[str], where: str, sources: int) -> list[tuple[int, str]]:
    """n-best lines -> (source index, translation) per line."""
    out = []
    for number, line in enumerate(lines, 1):
        fields = line.split(NBEST_SEPARATOR)
        index = fields[0].strip()
        if len(fields) < 2 or not index.isdigit():
            raise InputError(f"{where}, line {number}: not an n-best line "
                             "'INDEX ||| translation ||| ...'")
        if int(index) >= sources:
            raise InputError(f"{where}, line {number}: index {index} is past the last line "
                             f"of --src ({sources} lines, counted from 0)")
        out.append((int(index), fields[1]))
    return out


def read_pairs(args) -> tuple[list[int], list[str], list[str]]:
    """(source index, source, target) of every line of --tgt, checked."""
    sources = read_text_lines("--src", args.src)
    targets = read_text_lines("--tgt", args.tgt)
    if args.nbest:
        entries = parse_nbest(targets, args.tgt, len(sources))
        indices = [index for index, _ in entries]
        return indices, [sources[i] for i in indices], [text for _, text in entries]
    if len(sources) != len(targets):
        raise InputError(f"line counts differ: --src {args.src} has {len(sources)} lines, "
                         f"--tgt {args.tgt} has {len(targets)}")
    return list(range(len(sources))), sources, targets


def format_line(kind: str, index: int, target: str, pair, alpha: float,
                confidence=None) -> str:
    """One output line; ``confidence`` (a :class:`keras_nmt.decoding.confidence.Confidence`) adds
    its fields."""
    if kind == "tsv":
        line = f"{pair.logprob:.6f}\t{pair.logprob_per_token:.6f}\t{pair.tokens}"
        return line if confidence is None else f"{line}\t{confidence.sentence:.6f}"
    if kind == "nbest":
        return f"{index}{NBEST_SEPARATOR}{target}{NBEST_SEPARATOR}{pair.score(alpha):.6f}"
    return json_text({
        "index": index, "logprob": pair.logprob, "tokens": pair.tokens,
        "logprob_per_token": pair.logprob_per_token, "score": pair.score(alpha),
        "unk": pair.unknown,
        "token_logprobs": [round(float(value), 6) for value in pair.token_logprobs],
        **(confidence.to_json() if confidence is not None else {}),
    }, ensure_ascii=False)


def attention_record(index: int, pair, alpha: float) -> str:
    return json_text({
        "index": index,
        "source": [*pair.source_tokens, EOS],
        "target": [*pair.target_tokens, EOS],
        "attention": pair.attention.astype(float).round(6).tolist(),
        "score": pair.score(alpha),
        "logprob": pair.logprob,
    }, ensure_ascii=False)


def _output(stack: contextlib.ExitStack, flag: str, path: str | None) -> TextIO | None:
    if not path:
        return None
    try:
        return stack.enter_context(open_atomic(path, "w", encoding="utf-8", newline="\n"))
    except OSError as error:
        raise InputError(f"{flag}: cannot write {path}: {error.strerror or error}") from None


def _score(args, console: Console) -> int:
    # Cheap checks first: run directories, files, options; TensorFlow after.
    runs = [RunDir(path).inspect(args.weights) for path in args.run_dirs]
    check_compatible(runs)
    for option, value in (("--align", args.align), ("--attention", args.attention)):
        if value:
            check_attention(option, [run.config for run in runs])
    alpha = args.alpha if args.alpha is not None else (
        runs[0].run.search_settings(runs[0].config)["alpha"])
    indices, sources, targets = read_pairs(args)
    if args.out is None and hasattr(console.stdout, "reconfigure"):
        console.stdout.reconfigure(encoding="utf-8", newline="\n")
    with contextlib.ExitStack() as stack:
        out = _output(stack, "--out", args.out) or console.stdout
        align = _output(stack, "--align", args.align)
        attention = _output(stack, "--attention", args.attention)
        quiet_tensorflow()
        from keras_nmt.evaluation.alignment import argmax_alignment, format_pharaoh
        from keras_nmt.evaluation.forced import force_decode
        from keras_nmt.decoding.keras_translator import Translator  # TensorFlow loads here

        translator = Translator.from_run_dirs(args.run_dirs, weights=args.weights)
        total = len(targets)
        progress = Progress(stream=console.stderr, enabled=not args.quiet and total > 0)
        phase = Phase(progress, "scoring", total, "pairs")

        for begin in range(0, total, CHUNK_PAIRS):
            end = min(begin + CHUNK_PAIRS, total)
            pairs = force_decode(translator, sources[begin:end], targets[begin:end],
                                 args.batch_size, attention=bool(align or attention),
                                 progress=phase.advance)
            for index, target, pair in zip(indices[begin:end], targets[begin:end], pairs):
                found = (codec_confidence(pair.token_logprobs, pair.target_tokens,
                                          translator.target_codec)
                         if args.confidence else None)
                out.write(format_line(args.format, index, target, pair, alpha, found) + "\n")
                if align is not None:
                    links = argmax_alignment(pair.attention, len(pair.source_tokens),
                                             len(pair.target_tokens))
                    align.write(format_pharaoh(links) + "\n")
                if attention is not None:
                    attention.write(attention_record(index, pair, alpha) + "\n")
        out.flush()
    elapsed = phase.elapsed()
    progress.message(f"scored {total} pairs in {format_duration(elapsed)} "
                     f"({total / max(elapsed, 1e-9):.1f} pairs/s)")
    progress.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
