"""Every stage a user runs, at growing corpus sizes: wall time and peak memory per stage.

For each ``--pairs`` size N, a synthetic parallel corpus with the shape of news text is
written under ``--work`` (:mod:`keras_nmt.corpus.synthetic`: about 27 words a side, Zipfian
vocabularies of ``--types`` word types a side, lognormal line lengths with a few very
long and empty lines; generated from a seed, copied from no corpus). Then the user's own
commands run on it, each in a fresh process watched from here (its resident memory
sampled every 0.1 s, its log lines timestamped as they come):

    train     keras-nmt train --data CORPUS --max-steps 1 --no-lexicon
              stages: prepare (everything before the first training step: imports,
              corpus checks, the tokenization pass, vocabularies, prepared ids), setup
              (model, pipeline), first_batches (the shuffle, the first batches and
              update 1, traced), held_out (the report's translation)
    resume    keras-nmt train --resume --max-steps 1+STEPS: resume (start and checkpoint
              read), steps (STEPS updates, the first one traced), held_out
    pipeline  the input pipeline alone (data.prepared_batches on the run's prepared
              split): sentences per second of wall and per CPU-second, and the
              correlation between the order of the first epoch and the file order
    lexicon   keras-nmt lexicon RUN
    evaluate  keras-nmt evaluate RUN --src test.SRC --ref test.TGT --beam 1
    export    keras-nmt export RUN --out EXPORT

Results go to ``--json`` as each command finishes; a second start with the same
``--json`` skips what is recorded (a killed command runs again from its start), so the
largest sizes can run unattended and be resumed. A command whose memory passes
``--max-rss-gib`` is stopped and recorded as such (the machine stays usable). Corpus
and run are deleted once a size is done unless ``--keep``.

Usage (a quiet machine; the 12M-pair corpus is about 4.5 GB)::

    python -m bench.scale --pairs 1000000,4000000,12000000 --work /tmp/scale \\
        --json docs/results/scale.json --plot docs/figures/scale.png

``--plot`` draws wall time and peak RSS of every stage against N (log-log) and each
stage's growth: the exponent b of time ~ N^b fitted over the sizes (about 1: linear).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import shutil
import subprocess
import sys
import threading
import time

from bench import _common
from bench._common import peak_rss_mib, table
from keras_nmt.corpus.synthetic import LANGS, write_corpus

PROG = "scale"
# A small model: the benchmark is about the data path, and the steps must stay cheap.
TRAIN_SETTINGS = [
    "--variant", "search50",
    "--set", "embedding=128", "--set", "hidden=128", "--set", "attention=128",
    "--set", "maxout=64", "--set", "optimizer=adam", "--set", "learning_rate=1e-3",
    "--set", "batch_size=80", "--set", "beam_size=1",
    "--set", "eval_every=1000000", "--set", "checkpoint_every=1000000",
]
COMMANDS = ("train", "resume", "pipeline", "lexicon", "evaluate", "export")


# ---------------------------------------------------------------------------- watching


def watch(argv: list[str], markers: dict[str, str], max_rss_gib: float, log) -> dict:
    """Run ``argv``, sampling its resident memory (with its children's) every 0.1 s and
    timestamping its output lines. ``markers``: stage -> the start of the log line that
    ends it (stages in order; the last ends with the process). Returns per stage wall
    seconds and peak RSS, and the process's own peak (wait4's ru_maxrss)."""
    import psutil

    env = _common.checkout_env(PYTHONUNBUFFERED="1")
    start = time.monotonic()
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                               cwd=str(_common.ROOT))
    seen: list[tuple[float, str]] = []

    def read():
        for raw in process.stdout:
            line = raw.decode("utf-8", "replace").rstrip()
            seen.append((time.monotonic(), line))
            log("    | " + line[-160:])

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    samples: list[tuple[float, int]] = []
    watched = psutil.Process(process.pid)
    killed = None
    status = None
    while status is None:
        try:
            rss = watched.memory_info().rss + sum(
                c.memory_info().rss for c in watched.children(recursive=True))
            samples.append((time.monotonic(), rss))
            if rss > max_rss_gib * 2**30 and killed is None:
                killed = f"stopped: resident memory passed {max_rss_gib} GiB"
                process.kill()
        except psutil.Error:
            pass
        pid, raw_status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            status = os.waitstatus_to_exitcode(raw_status)
            maxrss_mib = usage.ru_maxrss / 1024
        else:
            time.sleep(0.1)
    end = time.monotonic()
    reader.join(timeout=5)
    result = {"argv": argv, "exit_status": status, "wall_s": end - start,
              "peak_rss_mib": maxrss_mib, "stages": {}}
    if killed:
        result["killed"] = killed
    boundary = start
    names = list(markers)
    for index, name in enumerate(names):
        marker = markers[name]
        ends = [t for t, line in seen if marker and line.startswith(marker) and t >= boundary]
        stage_end = ends[0] if ends else (end if index == len(names) - 1 else None)
        if stage_end is None:
            break
        peak = max((rss for t, rss in samples if boundary <= t <= stage_end), default=0)
        result["stages"][name] = {"wall_s": stage_end - boundary, "peak_rss_mib": peak / 2**20}
        boundary = stage_end
    if status != 0:
        result["output_tail"] = [line for _, line in seen[-10:]]
    result["output"] = [line for _, line in seen[-3:]]
    return result


# ---------------------------------------------------------------------------- stages


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "keras_nmt.cli", *args]


def run_command(name: str, corpus: pathlib.Path, run: pathlib.Path, steps: int,
                max_rss_gib: float, log) -> dict:
    src, tgt = LANGS
    if name == "train":
        shutil.rmtree(run, ignore_errors=True)  # a killed first start leaves a partial run
        return watch(_cli("train", "--data", str(corpus), "--src-lang", src, "--tgt-lang", tgt,
                          "--out", str(run), "--max-steps", "1", "--no-lexicon", *TRAIN_SETTINGS),
                     {"prepare": "training pairs:", "setup": "training search50",
                      "first_batches": "translating the held-out", "held_out": ""},
                     max_rss_gib, log)
    if name == "resume":
        # Back to the state after update 1 (a killed resume may have gone further).
        done = json.loads((run / "summary.json").read_text())["updates"]
        if done != 1:
            raise RuntimeError(f"{run} has {done} updates; run the size again from train")
        result = watch(_cli("train", "--out", str(run), "--resume", "--max-steps", str(1 + steps),
                            "--no-lexicon"),
                       {"resume": "resumed at step", "steps": "translating the held-out",
                        "held_out": ""},
                       max_rss_gib, log)
        if "steps" in result["stages"]:
            stage = result["stages"]["steps"]
            stage["steps"] = steps
            stage["steps_per_s"] = steps / stage["wall_s"]
        return result
    if name == "pipeline":
        return watch(_common.module_argv(PROG, "--pipeline-of", str(run)), {"pipeline": ""},
                     max_rss_gib, log)
    if name == "lexicon":
        return watch(_cli("lexicon", str(run), "--quiet"), {"lexicon": ""}, max_rss_gib, log)
    if name == "evaluate":
        return watch(_cli("evaluate", str(run), "--src", str(corpus / f"test.{src}"),
                          "--ref", str(corpus / f"test.{tgt}"), "--beam", "1"),
                     {"evaluate": ""}, max_rss_gib, log)
    if name == "export":
        out = run.parent / f"{run.name}-export"
        shutil.rmtree(out, ignore_errors=True)
        result = watch(_cli("export", str(run), "--out", str(out)), {"export": ""}, max_rss_gib, log)
        shutil.rmtree(out, ignore_errors=True)
        return result
    raise ValueError(name)


def pipeline_child(run_dir: str, batches: int = 300, order_sample: int = 1_000_000) -> None:
    """The input pipeline alone on a run's prepared split (printed as one JSON line):
    the first batch's wait, sentences/s of wall and per CPU-second over ``batches``
    batches, and the correlation of the first epoch's order with the file order over
    its first ``order_sample`` positions."""
    import resource

    import numpy as np

    from keras_nmt.data import pipelines as data
    from keras_nmt.data.pipelines import mean_pair_length
    from keras_nmt.rundir.run_directory import RunDir

    run = RunDir(run_dir)
    config, info = run.load_config(), run.load_data_info()
    split = run.prepared_split(info, needed_for="the benchmark")

    def cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    batching = data.Batching.from_config(config, mean_pair_length(info["train"]))

    def rate(dataset) -> tuple[float, float, float]:
        """(first batch's wait, sentences/s, sentences per CPU-second) over ``batches``."""
        start = time.monotonic()
        iterator = iter(dataset)
        next(iterator)
        first = time.monotonic() - start
        sentences, wall, cpu_start = 0, time.monotonic(), cpu()
        for _ in range(batches):
            (source, _), _ = next(iterator)
            sentences += int(source.shape[0])
        return first, sentences / (time.monotonic() - wall), sentences / (cpu() - cpu_start)

    first, per_second, per_cpu_second = rate(data.prepared_batches(split, batching))
    # The other design for comparison: the text tokenized on the fly by the graph
    # encoders (streamed through a 10,000-pair buffer: only the tokenization is timed).
    _, text_per_second, text_per_cpu_second = rate(data.training_batches(
        run.split_files("train", info, needed_for="the benchmark"), *run.graph_encoders(),
        batching.replace(shuffle_buffer=10_000)))
    sample = min(order_sample, split.count)
    window = 1 << 16
    order = np.concatenate(list(data.pair_indices(split.count, config.seed, window)
                                .take(-(-sample // window)).as_numpy_iterator()))[:sample]
    print(json.dumps({
        "batches": batches, "batch_size": config.batch_size, "first_batch_s": first,
        "sentences_per_s": per_second, "sentences_per_cpu_s": per_cpu_second,
        "text_on_the_fly_sentences_per_s": text_per_second,
        "text_on_the_fly_sentences_per_cpu_s": text_per_cpu_second,
        "order_sample": sample, "distinct_in_sample": int(len(np.unique(order))),
        "order_index_correlation": float(np.corrcoef(np.arange(sample), order)[0, 1]),
        "peak_rss_mib": peak_rss_mib(),
    }), flush=True)


# ---------------------------------------------------------------------------- report


def growth(sizes: list[int], values: list[float]) -> str:
    """How a cost grows with N, from the exponent b of a least-squares fit of
    log(cost) = a + b log(N) over the sizes measured."""
    points = [(math.log(n), math.log(v)) for n, v in zip(sizes, values) if v and v > 0]
    if len(points) < 2:
        return "one size: no trend"
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    b = (sum((x - mean_x) * (y - mean_y) for x, y in points)
         / max(1e-12, sum((x - mean_x) ** 2 for x, _ in points)))
    if b < 0.2:
        kind = "constant"
    elif b < 0.8:
        kind = "sublinear"
    elif b <= 1.2:
        kind = "linear"
    else:
        kind = "superlinear"
    return f"{kind} (N^{b:.2f})"


def stage_rows(report: dict) -> tuple[list[int], dict[str, dict[int, dict]]]:
    sizes = sorted(int(n) for n in report["sizes"])
    stages: dict[str, dict[int, dict]] = {}
    for n in sizes:
        for command, result in report["sizes"][str(n)].get("commands", {}).items():
            for stage, figures in result.get("stages", {}).items():
                stages.setdefault(f"{command}.{stage}", {})[n] = figures
    return sizes, stages


def summarize(report: dict, plot: str | None) -> str:
    sizes, stages = stage_rows(report)
    rows = []
    for name, by_size in stages.items():
        measured = [n for n in sizes if n in by_size]
        row = {"stage": name, "growth (wall)": growth(measured, [by_size[n]["wall_s"] for n in measured]),
               "growth (RSS)": growth(measured, [by_size[n]["peak_rss_mib"] for n in measured])}
        for n in measured:
            row[f"{n:,} s"] = by_size[n]["wall_s"]
            row[f"{n:,} MiB"] = by_size[n]["peak_rss_mib"]
        rows.append(row)
        report.setdefault("growth", {})[name] = {"wall": row["growth (wall)"], "rss": row["growth (RSS)"]}
    columns = [("stage", "stage", "")]
    for n in sizes:
        columns += [(f"{n:,} s", f"{n:,} s", ".1f"), (f"{n:,} MiB", f"{n:,} MiB", ".0f")]
    columns += [("growth (wall)", "growth (wall)", ""), ("growth (RSS)", "growth (RSS)", "")]
    text = table(rows, columns)
    for n in sizes:
        prepare = stages.get("train.prepare", {}).get(n)
        if prepare:
            text += f"\npreparation at {n:,} pairs: {prepare['wall_s'] / (n / 1e6):.0f} s per million pairs"
    if plot and stages:
        _plot(sizes, stages, plot)
    return text


def _plot(sizes, stages, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (wall, rss) = plt.subplots(1, 2, figsize=(13, 5.5))
    styles = ("-", "--", ":", "-.")
    for index, (name, by_size) in enumerate(stages.items()):
        measured = [n for n in sizes if n in by_size and by_size[n]["wall_s"] > 0.05]
        if not measured:
            continue
        style = dict(marker="o", linestyle=styles[index // 10 % len(styles)])
        label = f"{name}: {growth(measured, [by_size[n]['wall_s'] for n in measured])}"
        wall.plot(measured, [by_size[n]["wall_s"] for n in measured], label=label, **style)
        rss.plot(measured, [by_size[n]["peak_rss_mib"] / 1024 for n in measured], label=name, **style)
    wall.set(xscale="log", yscale="log", xlabel="training pairs", ylabel="wall seconds",
             title="time per stage (label: growth with N)")
    rss.set(xscale="log", xlabel="training pairs", ylabel="peak RSS (GiB)", title="peak memory per stage")
    rss.axhline(4, color="grey", linestyle="--", linewidth=1)
    wall.legend(fontsize=7)
    rss.legend(fontsize=7)
    figure.tight_layout()
    pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)


# ---------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = _common.parser(PROG, __doc__)
    parser.add_argument("--pairs", type=_common.int_list, default="100000,1000000",
                        help="training pairs, comma-separated (default 100000,1000000)")
    parser.add_argument("--types", type=int, default=600_000, help="word types a side (default 600,000)")
    _common.add(parser, "steps", default=50, help="updates timed after --resume (default 50)")
    parser.add_argument("--work", default="/tmp/scale", help="where corpora and runs go (default /tmp/scale)")
    parser.add_argument("--plot", help="PNG of cost against size")
    parser.add_argument("--commands", default=",".join(COMMANDS),
                        help=f"which commands to run (default all: {','.join(COMMANDS)})")
    parser.add_argument("--max-rss-gib", type=float, default=12.0,
                        help="stop a command whose memory passes this (default 12)")
    parser.add_argument("--keep", action="store_true", help="keep corpora and runs")
    parser.add_argument("--pipeline-of", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.pipeline_of:
        pipeline_child(args.pipeline_of)
        return 0
    if not args.json:
        parser.error("--json is required (the report, read back to skip what is done)")
    bench = _common.Bench(PROG, args, argv, libraries=("tensorflow", "keras"))
    log = bench.log

    path = pathlib.Path(args.json)
    earlier = json.loads(path.read_text()) if path.is_file() else {}
    results = earlier.get("results", earlier)  # a report, or one written before the harness
    results = {"sizes": results.get("sizes", {})}
    settings = {"train_settings": TRAIN_SETTINGS, "types": args.types, "steps": args.steps}

    def write() -> None:
        bench.write(results, settings)

    commands = [c for c in args.commands.split(",") if c]
    work = pathlib.Path(args.work)
    for pairs in args.pairs:
        entry = results["sizes"].setdefault(str(pairs), {"commands": {}})
        corpus, run = work / f"corpus-{pairs}", work / f"run-{pairs}"
        todo = [c for c in commands if entry["commands"].get(c, {}).get("exit_status") != 0]
        if not todo:
            continue
        if not (corpus / ".complete").is_file():
            log(f"writing a {pairs:,}-pair corpus into {corpus}")
            seconds, entry["corpus"] = _common.timed(lambda: write_corpus(corpus, pairs, args.types))
            entry["corpus"]["write_s"] = seconds
            write()
        if "train" in todo:  # a new run: whatever was measured on the old one is redone
            entry["commands"] = {}
            todo = list(commands)
        # The machine's speed when this size ran: times compare across sizes through it.
        entry["matmul_gflops"] = _common.matmul_gflops(args.matmul_rounds)
        for command in todo:
            log(f"{pairs:,} pairs: {command}")
            result = run_command(command, corpus, run, args.steps, args.max_rss_gib, log)
            if command == "pipeline" and result["exit_status"] == 0:
                result.update(_child_json(result))
            result.pop("output", None)
            entry["commands"][command] = result
            write()
            if result["exit_status"] != 0:
                log(f"{command} failed (exit status {result['exit_status']}); see the report")
                if command == "train":
                    break
        if not args.keep and all(
                entry["commands"].get(c, {}).get("exit_status") == 0 for c in commands):
            shutil.rmtree(corpus, ignore_errors=True)
            shutil.rmtree(run, ignore_errors=True)
    print(summarize(results, args.plot))
    write()
    return 0


def _child_json(result: dict) -> dict:
    """The pipeline child's figures: its last output line, one JSON object."""
    for line in reversed(result.get("output", [])):
        if line.startswith("{"):
            return json.loads(line)
    return {}


if __name__ == "__main__":
    sys.exit(main())
