"""Where the time goes: the TensorFlow profiler's trace of training steps or of beam
search, summed by op type.

Usage (one command; prints a table, writes JSON)::

    python -m experiments.profile_ops train --data data/anki-fra-eng \\
        [--size medium] [--model search] [--steps 10] [--json profile-train.json]
    python -m experiments.profile_ops decode RUN_DIR [--beam 5] [--batch-size 64] \\
        [--count 256] [--json profile-decode.json]
    python -m experiments.profile_ops onnx EXPORT_DIR --sentences FILE [--beam 5] \\
        [--batch-size 64] [--count 256] [--int8] [--json profile-onnx.json]

``train`` profiles the Trainer's compiled step on real batches held in memory, set up
exactly as ``bench.train_throughput`` does; ``decode`` profiles the run's beam
search (``Translator.translate``) over ``--count`` lines of its valid split; ``onnx``
profiles the export's ONNX beam search in onnxruntime (``OnnxTranslator``, onnxruntime's
own profiler: the kernel time of every node, those inside the search loop included, the
``Loop`` node itself left out) over ``--count`` lines of ``--sentences``.

The trace (``tf.profiler.experimental``, written to a temporary directory) holds one
event per executed op, on the thread that ran it. An op's *self* time is its duration
minus that of the events nested inside it on the same thread, so a ``While`` or a
function call counts only its own overhead, not its body. Self times are summed by op
type (``MatMul``, ``Tanh``, ...), largest first, as a share of all self time; the
threads run in parallel, so the total exceeds the wall-clock time.
"""

from __future__ import annotations

import atexit
import collections
import json
import os
import pathlib
import shutil
import sys
import tempfile
from typing import Any, Callable

from bench import _common

PROG = "experiments.profile_ops"


def trace(work: Callable[[], None], logdir: str) -> float:
    """Run ``work`` under the profiler; returns its wall-clock seconds."""
    import tensorflow as tf

    tf.profiler.experimental.start(logdir)
    seconds, _ = _common.timed(work)
    tf.profiler.experimental.stop()
    return seconds


def op_type(name: str) -> str | None:
    """TF op events are named ``op_name:OpType``; other host events (runtime
    bookkeeping such as ``KernelAndDeviceFunc::Run``) are left out."""
    if ":" not in name or "::" in name:  # "ExecutorState::Process" and the like
        return None
    kind = name.rsplit(":", 1)[1]
    # oneDNN kernels are registered as _MklMatMul, _FusedMatMul, ...
    return kind if kind.lstrip("_")[:1].isupper() and kind.isidentifier() else None


def self_times(logdir: str) -> dict[str, dict[str, float]]:
    """{op type: {"seconds": self time, "count": events}} from the trace's host plane."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    files = list(pathlib.Path(logdir).rglob("*.xplane.pb"))
    if not files:
        raise RuntimeError(f"the profiler wrote no trace under {logdir}")
    space = xplane_pb2.XSpace()
    space.ParseFromString(files[0].read_bytes())
    totals: dict[str, dict[str, float]] = collections.defaultdict(lambda: {"seconds": 0.0, "count": 0})
    for plane in space.planes:
        if not plane.name.startswith("/host:CPU"):
            continue
        names = {key: meta.name for key, meta in plane.event_metadata.items()}
        for line in plane.lines:
            events = sorted(((e.offset_ps, e.duration_ps, names.get(e.metadata_id, "")) for e in line.events),
                            key=lambda e: (e[0], -e[1]))
            # Nested events on a thread start inside their parent and end before it.
            stack: list[list] = []  # [end_ps, type, children's ps, duration_ps]
            for start, duration, name in events:
                while stack and stack[-1][0] <= start:
                    _close(stack.pop(), totals)
                if stack:
                    stack[-1][2] += duration
                stack.append([start + duration, op_type(name), 0, duration])
            while stack:
                _close(stack.pop(), totals)
    return dict(totals)


def _close(frame: list, totals: dict) -> None:
    _, kind, child_ps, duration = frame
    if kind is not None:
        totals[kind]["seconds"] += max(duration - child_ps, 0) / 1e12
        totals[kind]["count"] += 1


def train_work(args) -> tuple[Callable[[], None], Callable[[], None], dict[str, Any]]:
    """(warm-up, profiled work, settings) for training steps."""
    from bench import train_throughput

    corpus = _common.Corpus.scan(args.data, args.src, args.tgt, 50, args.vocab_size)
    tmp = tempfile.mkdtemp(prefix="profile_ops_")
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    spec = {**train_throughput.corpus_spec(corpus, tmp, args.src, args.tgt, 50),
            "model": args.model, "size_name": args.size[0], "size": args.size[1],
            "warmup": 3, "steps": args.steps}
    _, _, trainer, held = train_throughput.prepare(spec, tmp)

    def steps(batches):
        return lambda: [_common.train_step(trainer, batch) for batch in batches]

    return steps(held[:3]), steps(held[3:]), {"spec": spec}


def decode_work(args) -> tuple[Callable[[], None], Callable[[], None], dict[str, Any]]:
    """(warm-up, profiled work, settings) for beam search over valid lines."""
    from keras_nmt.decoding.keras_translator import Translator

    lines = _common.sentences(None, args.count, run_dir=args.run_dir)
    translator = Translator.from_run_dir(args.run_dir)

    def run_all():
        translator.translate(lines, beam_size=args.beam, batch_size=args.batch_size)

    def warm():
        translator.translate(lines[: args.batch_size], beam_size=args.beam,
                             batch_size=args.batch_size)

    return warm, run_all, {"run_dir": args.run_dir, "sentences": len(lines), "beam": args.beam,
                           "batch_size": args.batch_size}


def onnx_profile(args) -> tuple[float, dict[str, dict[str, float]], dict[str, Any]]:
    """(wall seconds, {op type: seconds, count}, settings) from onnxruntime's profiler."""
    import onnxruntime

    from keras_nmt.decoding.onnx_translator import OnnxTranslator

    translator = OnnxTranslator.from_export_dir(args.export_dir, args.name, int8=args.int8)
    lines = _common.sentences(args.sentences, args.count)
    batch = args.batch_size
    translator.translate(lines[:batch], beam_size=args.beam, batch_size=batch)  # warm-up
    options = onnxruntime.SessionOptions()
    options.enable_profiling = True
    with tempfile.TemporaryDirectory(prefix="profile_ops_onnx_") as tmp:
        options.profile_file_prefix = str(pathlib.Path(tmp) / "ort")
        from keras_nmt.export import layout

        model = layout.find_onnx_dir(args.export_dir, args.name) / f"{args.name}.onnx"
        if args.int8:
            metadata = json.loads(model.with_suffix(".onnx.json").read_text(encoding="utf-8"))
            model = model.with_name(metadata["int8"]["model"])
        translator.session = onnxruntime.InferenceSession(str(model), options,
                                                          providers=["CPUExecutionProvider"])
        wall, _ = _common.warm_then_time(
            lambda some: translator.translate(some, beam_size=args.beam, batch_size=batch),
            lines, batch)
        events = json.loads(pathlib.Path(translator.session.end_profiling()).read_text())
    totals: dict[str, dict[str, float]] = collections.defaultdict(lambda: {"seconds": 0.0, "count": 0})
    for event in events:
        kind = event.get("args", {}).get("op_name")
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time") and kind != "Loop":
            totals[kind]["seconds"] += event["dur"] / 1e6
            totals[kind]["count"] += 1
    # The profile also holds the warm-up batch run on the new session; scale it out.
    share = len(lines) / (len(lines) + min(batch, len(lines)))
    totals = {k: {"seconds": v["seconds"] * share, "count": v["count"]} for k, v in totals.items()}
    return wall, totals, {"export_dir": args.export_dir, "int8": args.int8,
                          "sentences": len(lines), "beam": args.beam, "batch_size": batch,
                          "note": "op seconds scaled by the timed share of sentences"}


def build_parser():
    from keras_nmt.cli.common import positive_int

    parser = _common.parser(PROG, __doc__, report=False)
    sub = parser.add_subparsers(dest="what", required=True)
    train = _common.subparser(sub, "train", help="training steps")
    _common.add(train, "data", required=True, help="corpus directory with train.SRC/train.TGT")
    _common.add(train, "src_lang")
    _common.add(train, "tgt_lang")
    train.add_argument("--model", default="search", choices=("search", "encdec"))
    _common.add(train, "size", default="medium", help="compact, medium, paper (keras-nmt train "
                "--size) or E/H/N/L@B (default medium)")
    _common.add(train, "vocab_size")
    _common.add(train, "steps", default=10, help="profiled steps (default 10)")
    decode = _common.subparser(sub, "decode", help="beam search")
    decode.add_argument("run_dir")
    onnx = _common.subparser(sub, "onnx", help="the ONNX beam search in onnxruntime")
    onnx.add_argument("export_dir")
    _common.add(onnx, "name")
    _common.add(onnx, "sentences", required=True)
    onnx.add_argument("--int8", action="store_true", help="the export's int8 model")
    for p in (decode, onnx):
        _common.add(p, "beam")
        _common.add(p, "batch_size", default=64, help="sentences a batch (default 64)")
        _common.add(p, "count", default=256, help="sentences (default 256)")
    for p in (train, decode, onnx):
        p.add_argument("--top", type=positive_int, default=15, help="op types shown")
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    bench = _common.Bench(PROG, args, argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if args.what == "onnx":
        wall, totals, settings = onnx_profile(args)
    else:
        warm, work, settings = (train_work if args.what == "train" else decode_work)(args)
        warm()
        with tempfile.TemporaryDirectory(prefix="profile_ops_trace_") as logdir:
            wall = trace(work, logdir)
            totals = self_times(logdir)
    busy = sum(v["seconds"] for v in totals.values())
    rows = sorted(({"op": k, "seconds": v["seconds"], "count": int(v["count"]),
                    "share": v["seconds"] / busy if busy else 0.0} for k, v in totals.items()),
                  key=lambda r: -r["seconds"])
    bench.write({"wall_seconds": wall, "op_self_seconds": busy, "ops": rows},
                {"what": args.what, **settings})
    print(_common.table(rows[: args.top], [("op", "op type", ""), ("seconds", "self s", ".3f"),
                                            ("share", "share", ".1%"), ("count", "events", ",d")]))
    print(f"{args.what}: {wall:.2f} s wall, {busy:.2f} s of op self time over all threads")
    return 0


if __name__ == "__main__":
    sys.exit(main())
