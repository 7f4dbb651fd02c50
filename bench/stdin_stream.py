"""``keras-nmt onnx-translate`` over a long stdin: its memory and its first output.

For each ``--lines`` count N, the command runs in a fresh process on an export, its stdin
a pipe fed N lines (the file's sentences spread through it, over and over) by a thread
that writes as fast as the pipe takes them, while its stdout is read line by line. The
report gives, per run: the child's peak resident set size (ru_maxrss of the reaped
child), the seconds to its first output line, how many input lines had been written by
then, the lines answered, and whether the run was stopped by ``--seconds`` (a run of
millions of lines at this machine's speed takes hours; memory that stays flat for
minutes of chunks is the claim, and a command that read all of stdin first would show
its whole input in its peak before answering anything).

Usage::

    python -m bench.stdin_stream EXPORT_DIR --sentences test.en --lines 10000,2000000 \\
        --seconds 120 --int8 --json out.json

Only this machine's processes; every run is bounded by ``--seconds``.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import threading
import time

from bench import _common

PROG = "stdin_stream"


def run_once(export_dir: str, lines: list[str], count: int, seconds: float, int8: bool,
             batch_size: int) -> dict:
    command = [sys.executable, "-m", "keras_nmt.cli", "onnx-translate", export_dir, "--quiet",
               "--batch-size", str(batch_size), *(["--int8"] if int8 else [])]
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=_common.checkout_env())
    written = [0]

    def feed() -> None:
        try:
            for line in itertools.islice(itertools.cycle(lines), count):
                process.stdin.write(line.encode("utf-8") + b"\n")
                written[0] += 1
            process.stdin.close()
        except (BrokenPipeError, ValueError, OSError):  # the run was stopped
            pass

    started = time.perf_counter()
    threading.Thread(target=feed, daemon=True).start()
    first_seconds = first_written = None
    answered = 0
    timer = threading.Timer(seconds, process.kill)
    timer.start()
    try:
        for _ in process.stdout:
            if answered == 0:
                first_seconds, first_written = time.perf_counter() - started, written[0]
            answered += 1
    finally:
        timer.cancel()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    error = process.stderr.read().decode("utf-8", "replace")[-2000:]
    stopped = answered < count
    if process.returncode not in (0, -9):
        raise _common.ChildFailed(f"onnx-translate exited {process.returncode}: {error}")
    return {
        "lines": count, "answered": answered, "stopped_at_seconds": seconds if stopped else None,
        "seconds": round(time.perf_counter() - started, 2),
        "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
        "first_output_seconds": None if first_seconds is None else round(first_seconds, 2),
        "lines_written_before_first_output": first_written,
    }


def main(argv=None) -> int:
    parser = _common.parser(PROG, __doc__)
    parser.add_argument("export_dir", metavar="EXPORT_DIR", help="an export made with --onnx")
    parser.add_argument("--sentences", metavar="FILE", help="source sentences, one a line")
    parser.add_argument("--count", type=int, default=2000, metavar="N",
                        help="distinct sentences spread through --sentences (default 2000)")
    parser.add_argument("--lines", type=_common.int_list, default=[10_000, 2_000_000],
                        metavar="N,N", help="input lines of each run (default 10000,2000000)")
    parser.add_argument("--seconds", type=float, default=120.0,
                        help="a run is stopped after this many seconds (default 120)")
    parser.add_argument("--batch-size", type=int, default=32, metavar="N")
    parser.add_argument("--int8", action="store_true", help="translate with NAME.int8.onnx")
    args = parser.parse_args(argv)
    bench = _common.Bench(PROG, args, argv, libraries=("onnxruntime",))
    lines = _common.sentences(args.sentences, args.count, parser=parser)
    runs = [run_once(args.export_dir, lines, count, args.seconds, args.int8, args.batch_size)
            for count in args.lines]
    print(_common.table(runs, [
        ("lines", "input lines", ","), ("answered", "answered", ","),
        ("peak_rss_mib", "peak RSS MiB", ".1f"), ("first_output_seconds", "first out s", ".2f"),
        ("lines_written_before_first_output", "lines in before", ","),
        ("stopped_at_seconds", "stopped at s", "g"),
    ]))
    bench.matmul_gflops()  # logged; the report holds it
    bench.write({"runs": runs}, {"batch_size": args.batch_size, "int8": args.int8,
                                 "seconds": args.seconds, "distinct_sentences": len(lines)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
