"""``keras-nmt translate``: translate raw sentences from stdin to stdout.

One output line per input line, in order (with ``--nbest N``, up to N lines per input,
in the Moses n-best format). Several run directories are decoded as an ensemble. Bad
input never costs a line: empty and whitespace-only lines give empty translations, and
over-long sentences are truncated with a single warning at the end. Errors a user can
fix (a wrong path, a run without weights, runs that do not ensemble, a bad dictionary)
give one line ``keras-nmt translate: error: ...`` on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import functools
from typing import Sequence, TextIO

from keras_nmt.cli.common import (
    Console, OneLineParser, add_confidence_arguments, add_constraint_arguments,
    add_markup_argument, add_quiet_argument, add_shortlist_argument,
    add_split_sentences_argument, add_unk_replace_arguments, add_weights_argument, binary,
    non_negative_float, positive_int, quiet_tensorflow, run_main, unk_replacement,
)
from keras_nmt.cli.streaming import LineRules, Output, translate_in_chunks
from keras_nmt.corpus.readers import stream_lines
from keras_nmt.decoding.ensemble import check_compatible
from keras_nmt.decoding.marked_up import marking_up
from keras_nmt.core.errors import InputError
from keras_nmt.lexicon.table import shortlist_inputs
from keras_nmt.rundir.run_directory import RunDir

PROG = "keras-nmt translate"

DESCRIPTION = """\
Translate raw sentences read from stdin with the model of RUN_DIR (several RUN_DIRs:
an ensemble that averages the models' word probabilities; their vocabularies must be
identical). Writes detokenized translations to stdout, one line per input line, in
order. A line of several sentences is split into them, each is translated alone and
their translations are joined on the line, one space apart (none for Chinese and
Japanese targets; --no-split-sentences: each line is translated whole). Empty or whitespace-only lines translate to empty lines. A
sentence longer than the maximum source length is cut to it (one warning at the end
counts them). When stdin is a file or a pipe, it is read a chunk of 64 batches at a
time, decoded in batches with a progress line on stderr, and each chunk's translations
are written before the next chunk is read (memory does not grow with the input); on a
terminal each line is translated as soon as it is typed."""

EPILOG = """\
n-best output (--nbest N): the Moses n-best list format, one hypothesis per line,
"INDEX ||| translation ||| score", best first, where INDEX is the 0-based input line
number and score the length-normalised log-probability used for ranking (a line of
several sentences: its N best combinations of one hypothesis per sentence, ranked by
the line score, the mean of the sentences' scores weighted by their source lengths,
which compares across lines). An input line gets up to N lines (fewer only
when fewer distinct translations exist); an empty input line gets exactly one,
"INDEX |||  ||| 0.0000", so every index appears.

attention (--attention FILE.jsonl): one JSON object per input line, in order:
{"index", "source": source tokens + "</s>", "target": output tokens + "</s>",
"attention": one row per target token and one column per source token,
"score", "truncated": source tokens dropped}; for the best hypothesis, after UNK
replacement. A line of several sentences has "</s>" after each sentence's tokens, and
its matrix is block-diagonal: each sentence attends to its own source only. An empty
input line has empty lists.

confidence (--confidence, --min-confidence X): how sure the model is of each
translation, from its own token probabilities (see docs/decoding.md): 0-1 for the line
(the geometric mean of its tokens' probabilities), for each of its sentences and for each
space-separated word (the least probable of the word's tokens). --confidence writes
{"index", "text", "confidence", "sentences", "words": [[word, confidence], ...]} per
input line (an empty line: null and empty lists). --min-confidence X marks the lines
below X: their text starts with "[low confidence] " (with --confidence: "low": true);
--drop-below withholds them instead: an empty line ("text": "", "withheld": true).
--dropout-samples N computes the figures from N more passes over each translation with
the model's dropout on (Monte Carlo dropout: slower, and for a run trained with dropout).

constraints (--constraints FILE, --prefix FILE, --glossary TSV): each translation holds
its line's phrases and starts with its prefix (decoded inside the beam search; see
docs/decoding.md). A phrase the length limit keeps out is reported in one warning at the
end (with --confidence: "unmet", the phrases missed). A bad constraint stops the command
with one line naming it."""


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog=prog, description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="a training run directory")
    parser.add_argument(
        "--beam", type=positive_int, metavar="K",
        help="beam size (default: the run's tuned beam (keras-nmt evaluate --tune), else its "
        "beam_size; raised to N with --nbest N)",
    )
    parser.add_argument(
        "--nbest", type=positive_int, metavar="N",
        help="write the N best translations of each line in Moses n-best format "
        "'INDEX ||| translation ||| score' (see below)",
    )
    parser.add_argument(
        "--alpha", type=non_negative_float, metavar="A",
        help="length normalisation: hypotheses rank by log-prob / length**A "
        "(default: the run's tuned alpha, else its length_alpha; 0 = raw log-probability)",
    )
    parser.add_argument("--no-unk", action="store_true", help="never generate <unk>")
    add_unk_replace_arguments(parser)
    parser.add_argument(
        "--attention", metavar="FILE.jsonl",
        help="write each line's tokens and attention matrix to FILE.jsonl (see below)",
    )
    parser.add_argument(
        "--batch-size", type=positive_int, default=32, metavar="B",
        help="sentences decoded together (default 32)",
    )
    parser.add_argument(
        "--max-source-len", type=positive_int, metavar="N",
        help="truncate sentences to N source tokens (default: max(100, 2 * the run's max_len))",
    )
    add_shortlist_argument(parser)
    add_split_sentences_argument(parser)
    add_confidence_arguments(parser)
    parser.add_argument(
        "--dropout-samples", type=positive_int, metavar="N",
        help="with --confidence or --min-confidence: the figures from the mean of each "
        "token's log-probability over N force-decoding passes with the model's dropout on "
        "(N more passes; a run trained with dropout)",
    )
    add_constraint_arguments(parser)
    add_markup_argument(parser)
    add_weights_argument(parser)
    add_quiet_argument(parser, "no progress line on stderr")
    parser.add_check(_check_nbest)
    parser.add_check(_check_dropout_samples)
    return parser


def _check_dropout_samples(args: argparse.Namespace) -> None:
    if args.dropout_samples and not (args.confidence or args.min_confidence is not None):
        raise ValueError("--dropout-samples computes the confidence: it needs --confidence "
                         "or --min-confidence X")


def _check_nbest(args: argparse.Namespace) -> None:
    if args.nbest and args.beam and args.nbest > args.beam:
        raise ValueError(
            f"--nbest {args.nbest} needs a beam of at least {args.nbest} (got --beam {args.beam})"
        )


def main(argv: Sequence[str] | None = None, stdin=None, stdout: TextIO | None = None,
         stderr: TextIO | None = None, prog: str = PROG) -> int:
    return run_main(build_parser(prog), _translate, argv, stdin, stdout, stderr)


def _open_attention(path: str | None) -> TextIO | None:
    if not path:
        return None
    try:
        return open(path, "w", encoding="utf-8", newline="\n")
    except OSError as error:
        raise InputError(f"cannot write {path}: {error.strerror or error}") from None


def _translate(args, console: Console) -> int:
    # Cheap checks first: paths, vocabularies, dictionary, options; TensorFlow after.
    runs = [RunDir(path).inspect(args.weights) for path in args.run_dirs]
    check_compatible(runs)
    config = runs[0].config
    if args.dropout_samples and not any(run.config.dropout for run in runs):
        raise InputError(f"{args.run_dirs[0]} was trained without dropout: --dropout-samples "
                         "has nothing to sample")
    settings = runs[0].run.search_settings(config)  # tuned on a development set, or the config's
    nbest = args.nbest or 1
    beam = args.beam if args.beam is not None else max(settings["beam_size"], nbest)
    alpha = args.alpha if args.alpha is not None else settings["alpha"]
    unk_replace, dictionary = unk_replacement(args, runs)
    if args.shortlist:
        shortlist_inputs(args.shortlist, runs[0].run.load_lexicon())
    interactive = bool(getattr(console.stdin, "isatty", lambda: False)())
    if hasattr(console.stdout, "reconfigure"):
        console.stdout.reconfigure(encoding="utf-8", newline="\n")
    rules = LineRules(args.constraints, args.prefix, args.glossary)
    attention = _open_attention(args.attention)
    try:
        quiet_tensorflow()
        from keras_nmt.decoding.keras_translator import Translator  # TensorFlow loads here

        translator = Translator.from_run_dirs(
            args.run_dirs, weights=args.weights, max_source_len=args.max_source_len
        )
        options = dict(
            beam_size=beam, alpha=alpha, forbid_unk=args.no_unk, batch_size=args.batch_size,
            with_attention=bool(args.attention or args.markup), nbest=nbest,
            unk_replace=unk_replace,
            dictionary=dictionary, shortlist=args.shortlist, split_sentences=args.split_sentences,
            confidence=args.confidence or args.min_confidence is not None,
            dropout_samples=args.dropout_samples or 0,
        )
        writer = Output(console.stdout, nbest=bool(args.nbest), confidence=args.confidence,
                        min_confidence=args.min_confidence, drop_below=args.drop_below,
                        attention=attention, flush_each=interactive)
        lines = stream_lines(binary(console.stdin))
        translate = rules.translating(translator.translate)
        if args.markup:
            translate = marking_up(translate, args.markup)
        read = 0
        if interactive:
            for line in lines:
                writer.write_all(translate([line], **options))
                read += 1
        else:
            read = translate_in_chunks(functools.partial(translate, **options), lines,
                                       args.batch_size, writer, console.stderr, args.quiet)
        console.stdout.flush()
        rules.check_all_read(read)
    finally:
        if attention is not None:
            attention.close()
    writer.warn_truncated(console.prog, console.stderr, translator.max_source_len)
    rules.warn_unmet(console.prog, console.stderr)
    return 0
