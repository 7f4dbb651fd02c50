"""What every command shares: its ``main``, one-line errors, number types, shared options,
stdin and stdout, quiet start-up.

Every command's ``main(argv, stdin, stdout, stderr, prog) -> int`` is :func:`run_main`:
its arguments parsed, then its work run. Bad input is reported as one line
``PROG: error: ...`` and exit status 2 (:class:`OneLineParser` for the arguments,
:func:`run_command` for the work: every :class:`~keras_nmt.core.errors.UserError`). No
TensorFlow here: the onnxruntime command runs without it.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
from typing import BinaryIO, Callable, Sequence, TextIO

from keras_nmt.core.errors import UserError
from keras_nmt.rundir.run_directory import WEIGHTS


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line, not a usage dump, and which keeps an
    option's old spelling working for one release (:meth:`rename`)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.renamed: dict[str, str] = {}
        self.checks: list[Callable[[argparse.Namespace], None]] = []

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")

    def add_check(self, check: Callable[[argparse.Namespace], None]) -> None:
        """Check the parsed arguments together, after each one has parsed: a ValueError
        that ``check(args)`` raises is reported as a bad argument is."""
        self.checks.append(check)

    def parse_args(self, args=None, namespace=None):
        parsed = super().parse_args(args, namespace)
        for check in self.checks:
            try:
                check(parsed)
            except ValueError as error:
                self.error(str(error))
        return parsed

    def rename(self, old: str, new: str) -> None:
        """Accept ``old`` as a deprecated spelling of the option ``new`` (already added):
        it works as ``new`` does, after a one-line notice on stderr that names ``new``.
        The rule each spelling follows is in docs/cli.md."""
        if new not in self._option_string_actions:
            raise ValueError(f"{new} is not an option of {self.prog}")
        self.renamed[old] = new

    def parse_known_args(self, args=None, namespace=None):
        args = sys.argv[1:] if args is None else list(args)
        return super().parse_known_args(self._respell(args), namespace)

    def _respell(self, args: list[str]) -> list[str]:
        """``args`` with every old spelling replaced by its new one, each noticed once.

        A token that starts with ``--`` is an option to argparse wherever it stands (it
        never takes one as a value), so replacing such tokens before the first bare ``--``
        changes exactly the options argparse would see; replacing them before parsing also
        keeps argparse's prefix matching from taking ``--src`` for ``--src-lang`` unnoticed."""
        out, noticed = [], set()
        for position, token in enumerate(args):
            if token == "--":
                return out + args[position:]
            name, equals, value = token.partition("=")
            new = self.renamed.get(name) if name.startswith("--") else None
            if new is None:
                out.append(token)
                continue
            if name not in noticed:
                noticed.add(name)
                print(f"{self.prog}: warning: {name} is deprecated, use {new} (the old "
                      "spelling goes in the next release)", file=sys.stderr, flush=True)
            out.append(new + equals + value)
        return out


def _number(kind: type, accept: Callable[[float], bool], description: str):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {description}, got {text!r}") from None
        if not (accept(value) and math.isfinite(value)):
            raise argparse.ArgumentTypeError(f"expected {description}, got {text!r}")
        return value

    return parse


positive_int = _number(int, lambda v: v >= 1, "a positive integer")
non_negative_int = _number(int, lambda v: v >= 0, "a non-negative integer")
positive_float = _number(float, lambda v: v > 0, "a positive number")
non_negative_float = _number(float, lambda v: v >= 0, "a number >= 0")


def add_weights_argument(parser: argparse.ArgumentParser) -> None:
    """``--weights reported|best|last|averaged``: which of a run's weights a command
    loads (rundir.WEIGHTS)."""
    parser.add_argument(
        "--weights", choices=WEIGHTS, default="reported",
        help="'reported': those the run's report at the end of training used (the default: "
        "the averaged ones for a run that averages, else the best), the 'best' development "
        "weights (the last checkpoint when there are none), the 'last' checkpoint, or the "
        "'averaged' ones of keras-nmt average",
    )


def shortlist(text: str) -> tuple[int, int]:
    """``F,B`` (argparse type): the F most frequent target words and the B best
    translations of each source word (:class:`keras_nmt.search.Shortlist`)."""
    parts = text.split(",")
    try:
        frequent, best = (int(part) for part in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected F,B (two integers >= 0), got {text!r}") from None
    if frequent < 0 or best < 0 or frequent + best == 0:
        raise argparse.ArgumentTypeError(f"expected F,B (integers >= 0, not both 0), got {text!r}")
    return frequent, best


def add_shortlist_argument(parser: argparse.ArgumentParser, what: str = "decode") -> None:
    """``--shortlist F,B``: vocabulary selection with the run's lexical table."""
    parser.add_argument(
        "--shortlist", type=shortlist, metavar="F,B",
        help=f"{what} over the F most frequent target words and the B best translations of "
        "each source word of the batch (the run's lexical table, keras-nmt lexicon) instead "
        "of the whole vocabulary: faster, scores normalised over those words (a sentence "
        "with a source word training saw at most twice: every word); e.g. 1000,20",
    )


def add_constraint_arguments(parser: argparse.ArgumentParser) -> None:
    """``--constraints FILE``, ``--prefix FILE`` and ``--glossary TSV``: what the output of
    each line must respect (:mod:`keras_nmt.decoding.constraints`), read back by
    :class:`keras_nmt.cli.streaming.LineRules`."""
    parser.add_argument(
        "--constraints", metavar="FILE",
        help="one JSON value a line, aligned with the input: a list of target phrases the "
        "line's translation must include, or an object {\"constraints\": [...], \"avoid\": "
        "[...], \"prefix\": \"...\"}; an empty line: none (see docs/decoding.md)",
    )
    parser.add_argument(
        "--prefix", metavar="FILE",
        help="one target prefix a line, aligned with the input: each translation starts "
        "with its line's prefix and the model completes it (an empty line: none)",
    )
    parser.add_argument(
        "--glossary", metavar="TSV",
        help="'source term<TAB>target term' lines: a line whose source holds a source term "
        "must include its target term",
    )


# Where --unk-replace is on unless given --no-unk-replace (keras_nmt.decoding.unk_replace.on_by_default).
UNK_REPLACE_DEFAULT = "Default: on for a run trained with vocab_min_count above 1, off otherwise"


def add_unk_replace_arguments(parser: OneLineParser) -> None:
    """``--[no-]unk-replace`` and ``--dictionary FILE``, read back by :func:`unk_replacement`."""
    parser.add_argument(
        "--unk-replace", action=argparse.BooleanOptionalAction, default=None,
        help="replace each generated <unk> with the most attended source word, translated "
        "by the run's dictionary.tsv when it has one (a word run whose vocabulary leaves "
        f"training words out; keras-nmt lexicon builds it). {UNK_REPLACE_DEFAULT}",
    )
    parser.add_argument(
        "--dictionary", metavar="FILE",
        help="with --unk-replace (implied), translate the copied source word with this "
        "UTF-8 file of 'source<TAB>target' lines instead (words it lacks are copied unchanged)",
    )
    parser.add_check(_check_unk_replace)


def _check_unk_replace(args: argparse.Namespace) -> None:
    if args.unk_replace is False and args.dictionary is not None:
        raise ValueError("--dictionary fills <unk>, which --no-unk-replace keeps: give one of them")


def unk_replacement(args: argparse.Namespace, runs) -> tuple[bool, dict[str, str] | None]:
    """(whether to replace, the dictionary) from :func:`add_unk_replace_arguments`'s options,
    for ``runs`` (inspected run directories): replace when told, or by the runs' default
    (:func:`keras_nmt.decoding.unk_replace.on_by_default`); the dictionary is ``--dictionary``
    when given, else the first run's ``dictionary.tsv`` when it has one (an ensemble's
    runs share their vocabularies), else none: unknown words are copied."""
    from keras_nmt.core.config import check_attention
    from keras_nmt.lexicon.unk_dictionary import load_dictionary
    from keras_nmt.decoding.unk_replace import on_by_default

    if args.unk_replace is False:
        return False, None
    if args.unk_replace or args.dictionary is not None:
        check_attention("--unk-replace" if args.unk_replace else "--dictionary",
                        [run.config for run in runs])
    elif not all(on_by_default(run.config, run.source_codec.kind) for run in runs):
        return False, None
    if args.dictionary is not None:
        return True, load_dictionary(args.dictionary)
    return True, runs[0].run.load_dictionary()


def add_beam_search_arguments(parser: argparse.ArgumentParser, default: str) -> None:
    """``--beam K`` and ``--alpha A``, the beam search's size and length normalisation;
    ``default`` says where both come from when not given."""
    parser.add_argument("--beam", type=positive_int, metavar="K",
                        help=f"beam size (default: {default})")
    parser.add_argument("--alpha", type=non_negative_float, metavar="A",
                        help=f"length normalisation exponent (default: {default})")


def add_onnx_export_arguments(parser: argparse.ArgumentParser) -> None:
    """EXPORT_DIR, ``--name`` and ``--model-version``: which ONNX model of an export a
    command reads (:func:`keras_nmt.export.layout.find_onnx_dir`)."""
    parser.add_argument("export_dir", metavar="EXPORT_DIR")
    parser.add_argument("--name", default="nmt", help="model name in EXPORT_DIR (default nmt)")
    parser.add_argument("--model-version", dest="version", type=non_negative_int, metavar="N",
                        help="the version of NAME to run (default: the newest, which must "
                             "have been exported with --onnx)")


def add_quiet_argument(parser: argparse.ArgumentParser,
                       help: str = "no progress lines on stderr") -> None:
    """``--quiet``: nothing on stderr but errors, or less (``help`` says what goes)."""
    parser.add_argument("--quiet", action="store_true", help=help)


def add_markup_argument(parser) -> None:
    """``--markup html|xml``: the input lines hold inline markup, kept in the output
    (:mod:`keras_nmt.decoding.marked_up`); refused with ``--nbest`` (one line)."""
    parser.add_argument(
        "--markup", choices=("html", "xml"),
        help="the lines hold inline HTML or XML: translate their text and put the tags, "
             "untranslated spans and placeholders back where the attention says "
             "(docs/markup.md)",
    )
    parser.add_check(_check_markup)


def _check_markup(args: argparse.Namespace) -> None:
    if args.markup and (args.nbest or 1) > 1:
        raise ValueError("--markup places the tags in one translation a line: it does not "
                         "combine with --nbest N > 1")


def add_split_sentences_argument(
    parser: argparse.ArgumentParser,
    default: str = "split each line into its sentences (keras_nmt.text.sentences), translate "
                   "each alone and join their translations",
    unset: bool | None = True,
) -> None:
    """``--no-split-sentences``: translate each line whole, as one sentence
    (``args.split_sentences`` False; ``unset`` without the option)."""
    parser.add_argument(
        "--no-split-sentences", dest="split_sentences", action="store_false", default=unset,
        help=f"translate each line whole, as one sentence (default: {default})",
    )


def quiet_tensorflow() -> None:
    """Keep TensorFlow's C++ start-up lines off the terminal: on a machine without a GPU
    they include an error, "failed call to cuInit", that a new user reads as a failure.

    Unless the user set TF_CPP_MIN_LOG_LEVEL (then it is theirs, and nothing is hidden),
    the level becomes 3 and TensorFlow is imported with its known start-up noise filtered
    out of native stderr (its first lines are written before the level is read; see
    :func:`keras_nmt.core.progress.native_stderr_filtered`). Anything else, such as the message
    of a native abort during the import, and Python errors still show."""
    if "TF_CPP_MIN_LOG_LEVEL" in os.environ or "tensorflow" in sys.modules:
        return
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    from keras_nmt.core.progress import native_stderr_filtered

    with native_stderr_filtered():
        import tensorflow  # noqa: F401


def binary(stream) -> BinaryIO:
    """The byte stream under a text stream (the stream itself when it has none)."""
    return getattr(stream, "buffer", stream)


@dataclasses.dataclass(frozen=True)
class Console:
    """What a command's work talks through: its name (the ``PROG`` of its messages) and
    its streams."""

    prog: str
    stdin: TextIO
    stdout: TextIO
    stderr: TextIO


def run_main(parser: OneLineParser, body: Callable[[argparse.Namespace, Console], int],
             argv: Sequence[str] | None, stdin=None, stdout=None, stderr=None, *,
             interrupted: str = "interrupted") -> int:
    """A command's ``main``: ``argv`` parsed by ``parser`` (bad arguments end it with one
    line and exit status 2), then ``body(args, console)`` run by :func:`run_command`
    (``interrupted`` is its message for Ctrl-C), named ``parser.prog``, with the streams
    ``main`` was given and sys's where it was given none."""
    console = Console(parser.prog, sys.stdin if stdin is None else stdin,
                      sys.stdout if stdout is None else stdout,
                      sys.stderr if stderr is None else stderr)
    args = parser.parse_args(argv)
    return run_command(console.prog, lambda: body(args, console), console.stdout,
                       console.stderr, interrupted=interrupted)


def run_command(prog: str, body: Callable[[], int], stdout: TextIO, stderr: TextIO,
                interrupted: str = "interrupted") -> int:
    """Run a command's work and return its exit status: a
    :class:`~keras_nmt.core.errors.UserError` as one line ``PROG: error: ...`` (2); Ctrl-C
    (130, with ``interrupted`` as the message); output piped into a reader that stopped,
    such as ``head`` (1, quietly). Anything else is a bug, and keeps its traceback."""
    try:
        return body()
    except UserError as error:
        print(f"{prog}: error: {error}", file=stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: {interrupted}", file=stderr)
        return 130
    except BrokenPipeError:
        # Point stdout at /dev/null so that Python's final flush does not fail again.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stdout.fileno())
        except (OSError, AttributeError, ValueError):
            pass
        return 1


# What --min-confidence puts before the text of a line below the threshold.
LOW_CONFIDENCE_MARK = "[low confidence] "


def add_confidence_arguments(parser: OneLineParser) -> None:
    """``--confidence``, ``--min-confidence X`` and ``--drop-below``: the model's
    confidence in each translation (:mod:`keras_nmt.decoding.confidence`), written and acted on by
    :class:`keras_nmt.cli.streaming.Output`; none of them with ``--nbest``."""
    parser.add_argument(
        "--confidence", action="store_true",
        help="write one JSON object per input line instead of its text: {\"index\", \"text\", "
        "\"confidence\" (0-1), \"sentences\" (each sentence's), \"words\" ([word, 0-1] per "
        "word)}, from the token probabilities the search scored (see docs/decoding.md)",
    )
    parser.add_argument(
        "--min-confidence", type=_number(float, lambda v: 0 <= v <= 1, "a number in [0, 1]"),
        metavar="X",
        help="mark the lines whose confidence is below X: the text starts with "
        f"'{LOW_CONFIDENCE_MARK}' (with --confidence: \"low\": true)",
    )
    parser.add_argument(
        "--drop-below", action="store_true",
        help="with --min-confidence, withhold those lines instead: an empty line (with "
        "--confidence: \"text\": \"\" and \"withheld\": true)",
    )
    parser.add_check(_check_confidence)



def _check_confidence(args: argparse.Namespace) -> None:
    if args.drop_below and args.min_confidence is None:
        raise ValueError("--drop-below needs --min-confidence X")
    asked = args.confidence or args.min_confidence is not None
    if asked and getattr(args, "nbest", None):
        raise ValueError("--confidence and --min-confidence are for single translations, "
                         "not --nbest lists")
