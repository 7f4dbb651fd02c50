"""Serving latency and throughput: the TF Serving client paths and onnx_translate.

Measures, on one export (EXPORT_DIR/NAME/VERSION with its onnx/NAME.onnx):

- REST: ``keras-nmt serve`` on the export (onnxruntime, TF Serving's REST API) in a child
  process on a loopback port, and ``TFServingClient`` over REST: the seconds until the
  server listens (its interpreter, imports and model loading), the first request (one
  sentence, fresh connection) and the median of --rounds later one-sentence requests;
  then sentences/s at --batch-size (the server batching at the same size, at the
  export's beam);
- gRPC, only with ``--grpc HOST:PORT``: a TensorFlow Serving the user runs with the same
  export (its models.config), measured as REST is, less the start and the throughput;
- onnx_translate: onnxruntime session creation, the first batch (--batch-size sentences
  at --beam), the same batch again (the difference is a one-time cost), then sentences/s
  over all sentences (sorted by length into batches, as onnx_translate does);
- cold command lines: wall time of ``serving/tfserving_client.py`` (REST, and gRPC with
  --grpc) and ``serving/onnx_translate.py`` on one sentence, interpreter start and imports
  included.

Usage (one command; exports RUN_DIR first with --onnx --beam 5 when given --run)::

    python -m bench.serving_latency --run runs/search30 [--sentences FILE]
    python -m bench.serving_latency EXPORT_DIR [--name nmt] [--grpc localhost:8500] \\
        [--json out.json]

Sentences: --count lines spread through --sentences FILE (one per line), else --count
sentences of the built-in corpus generator (seed 0). Prints a table.
"""

from __future__ import annotations

import pathlib
import statistics
import subprocess
import sys
import tempfile

from bench import _common
from bench.serving_load import Server
from keras_nmt.decoding.onnx_translator import OnnxTranslator
from keras_nmt.serving.client import GrpcTransport, RestTransport, TFServingClient

PROG = "serving_latency"
_timed = _common.timed


def measure_requests(client: TFServingClient, sentences: list[str], rounds: int) -> dict:
    """The first one-sentence request and the median of ``rounds`` later ones."""
    first_s, _ = _timed(lambda: client.predict(sentences[:1]))
    later = [_timed(lambda: client.predict(sentences[i + 1 : i + 2]))[0] for i in range(rounds)]
    return {"first_request_s": first_s, "later_request_median_s": statistics.median(later)}


def measure_rest(export_dir: pathlib.Path, name: str, sentences: list[str], batch_size: int,
                 rounds: int) -> dict:
    """REST against ``keras-nmt serve`` on the export, started here."""
    start_s, server = _timed(lambda: Server(str(export_dir), name,
                                            ["--batch-size", str(batch_size)]))
    try:
        client = TFServingClient(RestTransport(server.url, name, timeout=600),
                                 batch_size=batch_size, retries=0)
        result = {"server_start_s": start_s, **measure_requests(client, sentences, rounds)}
        seconds, _ = _timed(lambda: client.translate(sentences))
        result[f"sentences_per_s_batch{batch_size}"] = len(sentences) / seconds
        result["cold_command_s"] = _cold_client(["--url", server.url], name, sentences[0])
        return result
    finally:
        server.stop()


def measure_grpc(target: str, name: str, sentences: list[str], rounds: int) -> dict:
    """gRPC against the TF Serving at ``target``, which serves the export as ``name``."""
    transport = GrpcTransport(target, name, timeout=600)
    try:
        result = measure_requests(TFServingClient(transport, retries=0), sentences, rounds)
    finally:
        transport.close()
    result["cold_command_s"] = _cold_client(["--grpc", target], name, sentences[0])
    return result


def _cold_client(where: list[str], name: str, sentence: str) -> float:
    return _cold([str(_common.ROOT / "serving" / "tfserving_client.py"), *where, "--name", name],
                 sentence)


def _cold(args: list[str], sentence: str) -> float:
    """Wall seconds of a command line of the checkout on one sentence, interpreter start
    and imports included."""
    seconds, _ = _timed(lambda: subprocess.run(
        [sys.executable, *args], input=(sentence + "\n").encode("utf-8"), capture_output=True,
        check=True, env=_common.checkout_env(), cwd=_common.ROOT, timeout=600))
    return seconds


def measure_onnx(export_dir: pathlib.Path, name: str, sentences: list[str], beam: int,
                 batch_size: int) -> dict:
    session_s, translator = _timed(lambda: OnnxTranslator.from_export_dir(export_dir, name))
    first = sentences[:batch_size]
    first_batch_s, _ = _timed(lambda: translator.translate(first, beam_size=beam,
                                                           batch_size=batch_size))
    # The same batch again: what of the first batch's time is a one-time cost.
    again_s, _ = _timed(lambda: translator.translate(first, beam_size=beam,
                                                     batch_size=batch_size))
    seconds, _ = _timed(lambda: translator.translate(sentences, beam_size=beam,
                                                     batch_size=batch_size))
    cold = _cold([str(_common.ROOT / "serving" / "onnx_translate.py"), str(export_dir), "--name", name,
                  "--quiet"], sentences[0])
    return {"session_s": session_s, f"first_batch{batch_size}_beam{beam}_s": first_batch_s,
            "same_batch_again_s": again_s,
            f"sentences_per_s_beam{beam}_batch{batch_size}": len(sentences) / seconds,
            "cold_command_s": cold}


def main(argv=None) -> int:
    parser = _common.parser(PROG, __doc__)
    parser.add_argument("export_dir", nargs="?", help="an export made with --onnx")
    parser.add_argument("--run", metavar="RUN_DIR", help="export this run first (--onnx)")
    _common.add(parser, "name")
    _common.add(parser, "sentences")
    _common.add(parser, "count", default=512, help="sentences (default 512)")
    _common.add(parser, "beam")
    _common.add(parser, "batch_size", default=64, help="sentences a batch (default 64)")
    _common.add(parser, "rounds", default=5, help="later one-sentence requests timed (default 5)")
    parser.add_argument("--grpc", metavar="HOST:PORT",
                        help="also gRPC, to a TensorFlow Serving that serves the export as NAME")
    args = parser.parse_args(argv)
    if bool(args.export_dir) == bool(args.run):
        parser.error("give EXPORT_DIR or --run RUN_DIR (one of them)")
    bench = _common.Bench(PROG, args, argv)
    sentences = _common.sentences(args.sentences, args.count, parser=parser)
    with tempfile.TemporaryDirectory(prefix="serving_latency_") as tmp:
        export_dir = pathlib.Path(args.export_dir or tmp)
        if args.run:
            _common.export(args.run, export_dir, args.name,
                           options=["--onnx", "--beam", str(args.beam)])
        results = {
            "onnx": measure_onnx(export_dir, args.name, sentences, args.beam, args.batch_size),
            "rest": measure_rest(export_dir, args.name, sentences, args.batch_size, args.rounds),
        }
        if args.grpc:
            results["grpc"] = measure_grpc(args.grpc, args.name, sentences, args.rounds)
    print(f"{'path':<6} {'measure':<36} {'value':>10}")
    for path, measures in results.items():
        for key, value in measures.items():
            unit = "" if "per_s" in key else " s"
            print(f"{path:<6} {key:<36} {value:>10.3f}{unit}")
    bench.write(results, {
        "export_dir": args.export_dir, "run": args.run, "name": args.name, "beam": args.beam,
        "batch_size": args.batch_size, "sentences": len(sentences), "grpc": args.grpc,
        "servers": "REST: keras-nmt serve (onnxruntime) on loopback; gRPC: the TensorFlow "
                   "Serving at --grpc, if given"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
