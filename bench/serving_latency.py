"""Serving latency and throughput: the TF Serving client paths and onnx_translate.

Measures, on one export (a SavedModel EXPORT_DIR/NAME/VERSION and its onnx/NAME.onnx):

- REST and gRPC through the loopback stand-in (bench/tfserving_standin.py: the TF1
  session loader behind TF Serving's protocols; NOT TF Serving itself): the time to load
  the SavedModel, the first request (one sentence, fresh connection, the graph's first
  Session.run included) and the median of --rounds later one-sentence requests; each protocol
  gets its own freshly loaded stand-in;
- onnx_translate: onnxruntime session creation, the first batch (--batch-size sentences
  at --beam), the same batch again (the difference is a one-time cost), then sentences/s
  over all sentences (sorted by length into batches, as onnx_translate does);
- REST through the stand-in: sentences/s at --batch-size (at the export's own beam);
- cold command lines: wall time of ``serving/tfserving_client.py`` (REST and gRPC) and
  ``serving/onnx_translate.py`` on one sentence, interpreter start and imports included.

Usage (one command; exports RUN_DIR first with --onnx --beam 5 when given --run)::

    python -m bench.serving_latency --run runs/search30 [--sentences FILE]
    python -m bench.serving_latency EXPORT_DIR [--name nmt] [--json out.json]

Sentences: --count lines spread through --sentences FILE (one per line), else --count
sentences of the built-in corpus generator (seed 0). Prints a table.
"""

from __future__ import annotations

import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

from bench import _common
from keras_nmt.serving.onnx_translator import OnnxTranslator
from keras_nmt.serving.tfserving_client import GrpcTransport, RestTransport, TFServingClient

PROG = "serving_latency"
_timed = _common.timed


def _standin(export_dir: pathlib.Path, name: str):
    from bench.tfserving_standin import ModelRegistry, StandInServer

    registry = ModelRegistry()
    load_s, _ = _timed(lambda: registry.add(name, export_dir / name))
    return registry, StandInServer(registry).start(), load_s


def measure_protocol(protocol: str, export_dir: pathlib.Path, name: str, sentences: list[str],
                     batch_size: int, rounds: int) -> dict:
    registry, server, load_s = _standin(export_dir, name)
    try:
        if protocol == "rest":
            transport = RestTransport(server.rest_url, name, timeout=600)
        else:
            transport = GrpcTransport(server.grpc_target, name, timeout=600)
        client = TFServingClient(transport, batch_size=batch_size, retries=0)
        first_s, _ = _timed(lambda: client.predict(sentences[:1]))
        later = [_timed(lambda: client.predict(sentences[i + 1 : i + 2]))[0]
                 for i in range(rounds)]
        result = {"savedmodel_load_s": load_s, "first_request_s": first_s,
                  "later_request_median_s": statistics.median(later)}
        if protocol == "rest":
            seconds, _ = _timed(lambda: client.translate(sentences))
            result[f"sentences_per_s_batch{batch_size}"] = len(sentences) / seconds
        if protocol == "grpc":
            transport.close()
        result["cold_command_s"] = _cold_client(protocol, server, name, sentences[0])
        return result
    finally:
        server.stop()
        registry.close()


def _cold_client(protocol: str, server, name: str, sentence: str) -> float:
    where = ["--url", server.rest_url] if protocol == "rest" else ["--grpc", server.grpc_target]
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
    args = parser.parse_args(argv)
    if bool(args.export_dir) == bool(args.run):
        parser.error("give EXPORT_DIR or --run RUN_DIR (one of them)")
    bench = _common.Bench(PROG, args, argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")  # the TF1 loader's deprecation notice
    sentences = _common.sentences(args.sentences, args.count, parser=parser)
    with tempfile.TemporaryDirectory(prefix="serving_latency_") as tmp:
        export_dir = pathlib.Path(args.export_dir or tmp)
        if args.run:
            _common.export(args.run, export_dir, args.name,
                           options=["--onnx", "--beam", str(args.beam)])
        results = {
            "onnx": measure_onnx(export_dir, args.name, sentences, args.beam, args.batch_size),
            "rest": measure_protocol("rest", export_dir, args.name, sentences,
                                     args.batch_size, args.rounds),
            "grpc": measure_protocol("grpc", export_dir, args.name, sentences,
                                     args.batch_size, args.rounds),
        }
    print(f"{'path':<6} {'measure':<36} {'value':>10}")
    for path in ("rest", "grpc", "onnx"):
        for key, value in results[path].items():
            unit = "" if "per_s" in key else " s"
            print(f"{path:<6} {key:<36} {value:>10.3f}{unit}")
    bench.write(results, {
        "export_dir": args.export_dir, "run": args.run, "name": args.name, "beam": args.beam,
        "batch_size": args.batch_size, "sentences": len(sentences),
        "servers": "REST/gRPC go through the loopback stand-in (TF1 session loader), "
                   "not TF Serving"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
