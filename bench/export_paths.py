"""The export paths of one run, measured: export time, size on disk, parity with the Keras
model's beam search, and first-request latency.

Usage (one command; prints a table, writes JSON with --json)::

    python -m bench.export_paths RUN_DIR --sentences FILE [--count 200] [--json FILE]

- export time: ``python -m export RUN_DIR --out TMP --onnx`` as a whole (including its
  self-checks), and, in this process, the two steps alone: building and writing the
  SavedModel (ExportArchive) and converting translate_ids to ONNX (tf2onnx + checker);
- size on disk: the SavedModel directory (NAME/1, less its onnx/) and NAME.onnx;
- parity on ``--count`` non-empty lines spread through FILE at beam 1 and 5 (alpha = the run's),
  against :class:`~keras_nmt.decoding.keras_translator.Translator`: the SavedModel through
  ``tf.saved_model.load`` (TF2) and the TF1 session loader (TF1), each by its string
  signature ``translate`` (identical = same detokenized text) and by ``translate_ids``
  (identical = same tokens), and ONNX in onnxruntime (ids; tokenization and
  detokenization in Python). ``ties``: different output with the same score (1e-5);
- first request: a fresh Python process per path, timing the imports, the load, and the
  first request of one sentence (``load_and_first_s`` = load + first request).

Everything is written into a temporary directory that is removed at the end.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import tempfile

from bench import _common

PROG = "export_paths"

# Each first-request probe runs in a fresh interpreter and prints one JSON object.
_PROBE_PRELUDE = """
import json, sys, time
t0 = time.perf_counter()
{imports}
t1 = time.perf_counter()
{load}
t2 = time.perf_counter()
{request}
t3 = time.perf_counter()
print(json.dumps({{"import_s": t1 - t0, "load_s": t2 - t1, "first_request_s": t3 - t2,
                  "load_and_first_s": t3 - t1, "output": str(result)}}))
"""
PROBES = {
    "keras": dict(
        imports="from keras_nmt.decoding.keras_translator import Translator",
        load="translator = Translator.from_run_dir(sys.argv[1])",
        request="result = translator.translate([sys.argv[3]], beam_size=int(sys.argv[4]))[0].text",
    ),
    "savedmodel_tf2": dict(
        imports="import tensorflow as tf",
        load="fn = tf.saved_model.load(sys.argv[2] + '/nmt/1').signatures['serving_default']",
        request="result = fn(sentences=tf.constant([sys.argv[3]]))['translations'].numpy()[0].decode()",
    ),
    "savedmodel_tf1": dict(
        imports="from keras_nmt.export.loaders import SessionModel",
        load="model = SessionModel(sys.argv[2] + '/nmt/1')",
        request="result = model.run('serving_default', sentences=[sys.argv[3]])['translations'][0].decode()",
    ),
    # No TensorFlow: the Python tokenizer, the vocabularies and onnxruntime.
    "onnx": dict(
        imports=("import numpy as np, onnxruntime\nfrom keras_nmt.text import word as tokenizer\n"
                 "from keras_nmt.core.constants import EOS_ID\nfrom keras_nmt.text.vocab import Vocabulary"),
        load=(
            "onnx_dir = sys.argv[2] + '/nmt/1/onnx'\n"
            "meta = json.load(open(onnx_dir + '/nmt.onnx.json'))\n"
            "src = Vocabulary.load(onnx_dir + '/' + meta['source_vocab'])\n"
            "tgt = Vocabulary.load(onnx_dir + '/' + meta['target_vocab'])\n"
            "session = onnxruntime.InferenceSession(onnx_dir + '/nmt.onnx', "
            "providers=['CPUExecutionProvider'])"
        ),
        request=(
            "tokens = tokenizer.tokenize(sys.argv[3], meta['src'])[: meta['max_source_len']]\n"
            "feeds = {'source_ids': np.array([src.encode(tokens) + [EOS_ID]], np.int32),\n"
            "         'beam_size': np.array(int(sys.argv[4]), np.int32),\n"
            "         'alpha': np.array(meta['alpha'], np.float32),\n"
            "         'forbid_unk': np.array(False), 'max_length': np.array(0, np.int32)}\n"
            "ids, lengths = session.run(['ids', 'lengths'], feeds)\n"
            "result = tokenizer.detokenize(tgt.decode(ids[0, 0, : lengths[0, 0]]), meta['tgt'])"
        ),
    ),
}


def du(path: pathlib.Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def probe(name: str, run_dir: str, export_dir: pathlib.Path, sentence: str, beam: int) -> dict:
    code = _PROBE_PRELUDE.format(**PROBES[name])
    result = subprocess.run(
        [sys.executable, "-c", code, run_dir, str(export_dir), sentence, str(beam)],
        capture_output=True, text=True, env=_common.checkout_env(), cwd=_common.ROOT,
    )
    if result.returncode != 0:
        raise RuntimeError(f"probe {name} failed: {result.stderr.strip().splitlines()[-1:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def measure(run_dir: str, sentences: list[str], work: pathlib.Path) -> dict:
    report: dict = {"run_dir": run_dir, "sentences": len(sentences)}

    # The whole command, as a user runs it.
    export_dir = work / "export"
    command = [sys.executable, "-m", "export", run_dir, "--out", str(export_dir), "--onnx"]
    report["export_command_s"], _ = _common.timed(lambda: subprocess.run(
        command, check=True, capture_output=True, env=_common.checkout_env(), cwd=_common.ROOT))

    from keras_nmt.export import layout, onnx_conversion as onnx_export, parity, savedmodel
    from keras_nmt.export.loaders import SessionModel, TF2Model
    from keras_nmt.decoding.keras_translator import Translator, default_max_source_len

    translator = Translator.from_run_dir(run_dir)
    config = translator.model.config
    alpha = float(config.length_alpha)
    settings = savedmodel.ExportSettings(
        beam_size=config.beam_size, alpha=alpha,
        max_source_len=default_max_source_len(config.max_len),
    )
    from keras_nmt.rundir.run_directory import RunDir

    def savedmodel_step():
        archive = savedmodel.build_archive(translator.model, RunDir(run_dir).graph_encoders(), settings)
        savedmodel.write_savedmodel(archive, work / "step_savedmodel")

    report["savedmodel_export_s"], _ = _common.timed(savedmodel_step)
    report["onnx_export_s"], _ = _common.timed(
        lambda: onnx_export.convert(translator.model, 1, work / "step.onnx"))

    onnx_dir = layout.onnx_dir(export_dir, "nmt", 1)
    report["savedmodel_bytes"] = du(export_dir / "nmt" / "1") - du(onnx_dir)
    report["onnx_bytes"] = du(onnx_dir / "nmt.onnx")

    tf2 = TF2Model(export_dir / "nmt" / "1")
    tf1 = SessionModel(export_dir / "nmt" / "1")
    onnx_model = onnx_export.OnnxModel(onnx_dir / "nmt.onnx")
    source_ids = translator.encode(sentences)
    # The ids paths get only sentences with tokens (an empty one never reaches a model).
    nonempty = [i for i, ids in enumerate(source_ids) if len(ids) > 1]
    report["parity"] = {}
    for beam in (1, 5):
        reference = parity.from_translations(
            translator.translate(sentences, beam_size=beam, alpha=alpha)
        )
        kept = [reference[i] for i in nonempty]
        ids = [source_ids[i] for i in nonempty]
        rows = {}
        for name, model in (("savedmodel_tf2", tf2), ("savedmodel_tf1", tf1)):
            strings = model.run("translate", sentences=sentences, beam_size=beam, alpha=alpha)
            rows[f"{name}_strings"] = parity.compare(reference, parity.from_string_outputs(strings))
            decoded = parity.run_ids(lambda feeds, m=model: m.run("translate_ids", **feeds),
                                     ids, translator.target_vocab, beam, alpha)
            rows[f"{name}_ids"] = parity.compare(kept, decoded)
        decoded = parity.run_ids(onnx_model.run, ids, translator.target_vocab, beam, alpha)
        rows["onnx_ids"] = parity.compare(kept, decoded)
        report["parity"][f"beam{beam}"] = rows
    tf1.close()

    report["first_request"] = {
        name: probe(name, run_dir, export_dir, sentences[0], config.beam_size)
        for name in PROBES
    }
    return report


def table(report: dict) -> str:
    lines = [
        f"run {report['run_dir']}, {report['sentences']} sentences",
        f"export command (SavedModel + ONNX + self-checks): {report['export_command_s']:.1f} s",
        f"SavedModel export (ExportArchive build + write): {report['savedmodel_export_s']:.1f} s, "
        f"{report['savedmodel_bytes'] / 1e6:.1f} MB",
        f"ONNX export (tf2onnx + onnx.checker): {report['onnx_export_s']:.1f} s, "
        f"{report['onnx_bytes'] / 1e6:.1f} MB",
        "",
        f"{'parity vs Keras':28} {'beam':>4} {'identical':>9} {'ties':>6} {'max |score diff|':>16}",
    ]
    for beam_key, rows in report["parity"].items():
        for name, row in rows.items():
            lines.append(f"{name:28} {beam_key[4:]:>4} {row['identical']:9.3f} {row['ties']:6.3f} "
                         f"{row['max_score_diff']:16.2e}")
    lines += ["", f"{'first request':16} {'import s':>9} {'load s':>7} {'1st req s':>9} {'load+1st s':>10}"]
    for name, row in report["first_request"].items():
        lines.append(f"{name:16} {row['import_s']:9.2f} {row['load_s']:7.2f} "
                     f"{row['first_request_s']:9.2f} {row['load_and_first_s']:10.2f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = _common.parser(PROG, __doc__)
    parser.add_argument("run_dir")
    _common.add(parser, "sentences", required=True)
    _common.add(parser, "count", default=200, help="sentences used, spread evenly through the "
                "file (default 200)")
    args = parser.parse_args(argv)
    bench = _common.Bench(PROG, args, argv)
    lines = _common.sentences(args.sentences, args.count, parser=parser)
    with tempfile.TemporaryDirectory(prefix="export-bench-") as work:
        report = measure(args.run_dir, lines, pathlib.Path(work))
    print(table(report))
    bench.write(report, {"run_dir": args.run_dir, "sentences_file": args.sentences,
                         "sentences": len(lines)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
