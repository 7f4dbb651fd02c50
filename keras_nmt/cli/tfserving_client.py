"""``keras-nmt tfserving-client`` (and ``python serving/tfserving_client.py``): translate
stdin through a running TensorFlow Serving, REST or gRPC; see
:mod:`keras_nmt.serving.client`."""

from __future__ import annotations

import argparse
from typing import Sequence, TextIO

from keras_nmt.cli.common import (
    Console, OneLineParser, add_confidence_arguments, add_constraint_arguments,
    add_quiet_argument, binary,
    non_negative_float, non_negative_int, positive_float, positive_int, run_main,
)
from keras_nmt.cli.streaming import LineRules, Output, translate_in_chunks
from keras_nmt.corpus.readers import stream_lines
from keras_nmt.core.errors import ServingError
from keras_nmt.serving.client import (
    DEFAULT_SIGNATURE, SEARCH_SIGNATURE, GrpcTransport, RestTransport, TFServingClient,
)

PROG = "keras-nmt tfserving-client"


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog=prog,
        description="Translate stdin through a TensorFlow Serving model exported by "
        "`keras-nmt export`: one translation per input line, in order.",
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", help="REST endpoint, e.g. http://localhost:8501")
    where.add_argument("--grpc", metavar="HOST:PORT", help="gRPC endpoint, e.g. localhost:8500")
    parser.add_argument("--name", dest="model", default="nmt", metavar="NAME",
                        help="the model's name on the server (default nmt)")
    parser.add_argument("--model-version", dest="version", type=positive_int, metavar="N",
                        help="the model's version (default: the newest the server has)")
    parser.add_argument("--signature",
                        help=f"signature taking 'sentences' (default {DEFAULT_SIGNATURE}; "
                        f"{SEARCH_SIGNATURE} with --beam)")
    parser.add_argument("--form", choices=("instances", "inputs"),
                        help="REST request form: row 'instances' (the default) or columnar "
                        "'inputs' (the default with --beam)")
    parser.add_argument("--beam", type=positive_int, metavar="K",
                        help=f"beam size, sent to the export's '{SEARCH_SIGNATURE}' signature "
                        "(default: the beam fixed in serving_default)")
    parser.add_argument("--alpha", type=non_negative_float, metavar="A",
                        help="with --beam: length normalisation exponent (default: the "
                        "export's, the run's tuned alpha else its config's)")
    parser.add_argument("--batch-size", type=positive_int, default=32, metavar="B",
                        help="sentences per request (default 32)")
    parser.add_argument("--timeout", type=positive_float, default=60.0, metavar="SECONDS",
                        help="seconds to wait for each answer (default 60)")
    parser.add_argument("--retries", type=non_negative_int, default=3, metavar="N",
                        help="tries again after a failed connection (default 3)")
    parser.add_argument("--backoff", type=positive_float, default=0.5, metavar="SECONDS",
                        help="wait before the first retry, doubled for each next one "
                        "(default 0.5)")
    parser.add_argument("--scores", action="store_true",
                        help="write 'SCORE<TAB>translation' (length-normalised log-prob)")
    add_constraint_arguments(parser)  # keras-nmt serve only, over REST
    add_confidence_arguments(parser)  # keras-nmt serve only, over REST
    add_quiet_argument(parser, "no retry notices on stderr")
    parser.rename("--model", "--name")
    parser.rename("--version", "--model-version")
    return parser


def make_client(args, stderr: TextIO, prog: str = PROG) -> TFServingClient:
    signature = args.signature or (DEFAULT_SIGNATURE if args.beam is None else SEARCH_SIGNATURE)
    if args.grpc:
        if args.form is not None:
            raise ValueError("--form applies to REST (--url) only")
        if args.constraints or args.prefix or args.glossary:
            raise ValueError("--constraints, --prefix and --glossary go to keras-nmt serve "
                             "over REST (--url) only")
        if confidence(args):
            raise ValueError("--confidence and --min-confidence go to keras-nmt serve over "
                             "REST (--url) only")
        host, _, port = args.grpc.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"--grpc must be HOST:PORT, got {args.grpc!r}")
        transport = GrpcTransport(args.grpc, args.model, signature, args.version,
                                  args.timeout, args.beam, args.alpha)
    else:
        form = args.form or ("instances" if args.beam is None else "inputs")
        transport = RestTransport(args.url, args.model, signature, args.version,
                                  form, args.timeout, args.beam, args.alpha, confidence(args))

    def notice(error: ServingError, delay: float) -> None:
        if not args.quiet:
            print(f"{prog}: {error}; trying again in {delay:g} s", file=stderr, flush=True)

    return TFServingClient(transport, args.batch_size, args.retries, args.backoff, notice)


def confidence(args) -> bool:
    """Whether the options ask the server for each translation's confidence."""
    return args.confidence or args.min_confidence is not None


def main(argv: Sequence[str] | None = None, stdin=None, stdout: TextIO | None = None,
         stderr: TextIO | None = None, prog: str = PROG) -> int:
    parser = build_parser(prog)

    def translate(args, console: Console) -> int:
        try:
            client = make_client(args, console.stderr, console.prog)
        except ValueError as error:  # options that do not fit together: a usage error
            parser.error(str(error))
        return _translate(client, args, console)

    return run_main(parser, translate, argv, stdin, stdout, stderr)


def _translate(client: TFServingClient, args, console: Console) -> int:
    if hasattr(console.stdout, "reconfigure"):
        console.stdout.reconfigure(encoding="utf-8", newline="\n")
    output = Output(console.stdout, scores=args.scores, confidence=args.confidence,
                    min_confidence=args.min_confidence, drop_below=args.drop_below)
    rules = LineRules(args.constraints, args.prefix, args.glossary)
    # No progress line: stderr is the retry notices' (--quiet silences them).
    read = translate_in_chunks(rules.translating(client.translate),
                               stream_lines(binary(console.stdin)), args.batch_size, output,
                               console.stderr, quiet=True)
    rules.check_all_read(read)
    output.warn_truncated(console.prog, console.stderr)  # the limit is the server's
    rules.warn_unmet(console.prog, console.stderr)
    return 0

