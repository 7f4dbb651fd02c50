"""A web export's speed against native onnxruntime, side by side in one run: the same
sentences translated by ``OnnxTranslator`` (int8, 2 threads), by the Node.js module (one
thread, all it has) and by the page in headless Chromium (1 thread, and 2 cross-origin
isolated), with the time from loading the page to its first translation
(cold, and warm from the browser's cache) and the latency of one sentence.

Usage::

    python -m bench.web_speed EXPORT_DIR [--site FOLDER] [--sentences FILE] [--count 500] \\
        [--beam 5] [--batch-size 32] [--latency-runs 20] [--json bench-web.json]

``--site``: a folder ``keras-nmt web EXPORT_DIR`` wrote (default: one written into a
temporary folder). The page is served from loopback by Python's static file server, with
the COOP and COEP headers for the run of 2 threads (its service worker adds them too, once
it controls the page; ``?threads=1`` keeps that run to one). Each path translates its first
batch once, untimed (session warm-up), then every sentence timed; the page's and Node's
times exclude loading. The latency sentence is the first of ``--sentences`` with the most
source tokens up to 20 (in the export's source language). Needs ``node``, and Chromium with
chromedriver for the page (``apt-get install chromium chromium-driver``).
"""

from __future__ import annotations

import functools
import http.server
import json
import pathlib
import shutil
import statistics
import subprocess
import tempfile
import threading

from bench import _common

PROG = "web_speed"
# Times translate() in Node after loading, as the page is timed: argv = folder, options JSON.
NODE_TIMER = """
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
const [folder, threads, options] = process.argv.slice(1);
const base = new URL(`file://${folder}/`);
const { loadTranslator } = await import(new URL('translator.mjs', base));
const ort = await import(new URL('ort/ort.wasm.min.mjs', base));
ort.env.wasm.numThreads = Number(threads);
const translator = await loadTranslator({ ort, read: async (p) => new Uint8Array(await readFile(new URL(p, base))) });
const lines = JSON.parse(readFileSync(0, 'utf-8'));
const settings = JSON.parse(options);
await translator.translate(lines.slice(0, settings.batchSize), settings);
const started = performance.now();
const found = await translator.translate(lines, settings);
const seconds = (performance.now() - started) / 1000;
process.stdout.write(JSON.stringify({ seconds, texts: found.map((t) => t.text) }));
"""
PAGE_TIMER = """
const [lines, settings, done] = arguments;
const { translator } = window.kerasNmt;
translator.translate(lines.slice(0, settings.batchSize), settings).then(async () => {
  const started = performance.now();
  const found = await translator.translate(lines, settings);
  done({ seconds: (performance.now() - started) / 1000, texts: found.map((t) => t.text) });
}, (error) => done({ error: String(error) }));
"""
LATENCY = """
const [sentence, runs, settings, done] = arguments;
const { translator } = window.kerasNmt;
(async () => {
  const times = [];
  for (let k = 0; k < runs + 1; k += 1) {
    const started = performance.now();
    await translator.translate([sentence], settings);
    times.push(performance.now() - started);
  }
  done(times.slice(1));
})();
"""
FIRST = """
const [sentence, settings, done] = arguments;
const started = performance.now();
window.kerasNmt.translator.translate([sentence], settings).then(
  () => done({ ready_ms: window.kerasNmt.readyMs, first_ms: performance.now() - started }));
"""


class _Handler(http.server.SimpleHTTPRequestHandler):
    isolate = False

    def end_headers(self):
        if self.isolate:
            self.send_header("Cross-Origin-Opener-Policy", "same-origin")
            self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
        super().end_headers()

    def log_message(self, *args):
        pass


class StaticServer:
    """``folder`` on a free loopback port, with the isolation headers if ``isolate``."""

    def __init__(self, folder: pathlib.Path, isolate: bool):
        handler = type("Handler", (_Handler,), {"isolate": isolate})
        self.server = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(handler, directory=str(folder)))
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def native(export_dir, lines, settings) -> dict:
    from keras_nmt.decoding.onnx_translator import OnnxTranslator

    translator = OnnxTranslator.from_export_dir(export_dir, int8=True, threads=2)
    seconds, found = _common.warm_then_time(
        lambda part: translator.translate(part, beam_size=settings["beam"],
                                          batch_size=settings["batchSize"]),
        lines, settings["batchSize"])
    return {"seconds": seconds, "texts": [t.text for t in found]}


def node(site: pathlib.Path, lines, settings, threads: int) -> dict:
    done = subprocess.run(
        ["node", "--input-type=module", "-e", NODE_TIMER, str(site.resolve()), str(threads),
         json.dumps(settings)], input=json.dumps(lines), capture_output=True, text=True,
        check=True)
    return json.loads(done.stdout)


def page(site: pathlib.Path, lines, settings, threads: int, latency: str, runs: int) -> dict:
    from selenium.webdriver.support.ui import WebDriverWait

    server = StaticServer(site, isolate=threads > 1)
    driver = _common.headless_chromium()
    driver.set_script_timeout(3600)
    try:
        loads = []
        for _ in range(2):  # cold (a new profile), then warm (the browser's cache)
            driver.get(f"{server.url}/index.html?threads={threads}")
            WebDriverWait(driver, 300).until(lambda d: d.execute_script("return window.kerasNmt"))
            loads.append(driver.execute_async_script(FIRST, latency, settings))
        threads = driver.execute_script("return window.kerasNmt.threads")
        timed = driver.execute_async_script(PAGE_TIMER, lines, settings)
        times = driver.execute_async_script(LATENCY, latency, runs, settings)
    finally:
        driver.quit()
        server.stop()
    return {**timed, "threads": threads, "cold": loads[0], "warm": loads[1],
            "latency_ms_p50": statistics.median(times), "latency_ms": times}


def latency_sentence(lines, lang: str, tokens: int = 20) -> str:
    """The longest of ``lines`` with at most ``tokens`` tokens in the source language."""
    from keras_nmt.text import word

    lengths = [(len(word.tokenize(line, lang)), line) for line in lines]
    fitting = [pair for pair in lengths if pair[0] <= tokens]
    return max(fitting, key=lambda pair: pair[0])[1] if fitting else lines[0]


def main(argv=None) -> int:
    parser = _common.parser(PROG, __doc__)
    parser.add_argument("export_dir")
    parser.add_argument("--site", type=pathlib.Path)
    parser.add_argument("--sentences")
    parser.add_argument("--count", type=int, default=500)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--latency-runs", type=int, default=20)
    args = parser.parse_args(argv)
    if shutil.which("node") is None:
        parser.error("needs node (Node.js 20)")
    bench = _common.Bench(PROG, args, argv)
    lines = _common.sentences(args.sentences, args.count, parser=parser)
    settings = {"beam": args.beam, "batchSize": args.batch_size}
    with tempfile.TemporaryDirectory() as temporary:
        site = args.site
        if site is None:
            from keras_nmt.web.folder import write_web_folder

            site = write_web_folder(args.export_dir, pathlib.Path(temporary) / "site").path
        source = json.loads((site / "model" / "web.json").read_text(encoding="utf-8"))["src"]
        sentence = latency_sentence(lines, source)
        rows = {"native, 2 threads": native(args.export_dir, lines, settings)}
        rows["node, 1 thread"] = node(site, lines, settings, 1)  # Node: one thread (cli.mjs)
        for threads in (1, 2):
            found = page(site, lines, settings, threads, sentence, args.latency_runs)
            rows[f"page, {found['threads']} thread{'s' * (found['threads'] > 1)}"] = found
    baseline = rows["native, 2 threads"]
    results = []
    for name, row in rows.items():
        results.append({
            "path": name, "seconds": row["seconds"],
            "sentences_per_s": len(lines) / row["seconds"],
            "vs_native": baseline["seconds"] / row["seconds"],
            "equal_to_native": sum(a == b for a, b in zip(row["texts"], baseline["texts"])),
            "equal_to_node": sum(a == b for a, b in zip(row["texts"], rows["node, 1 thread"]["texts"])),
            **{key: row[key] for key in ("cold", "warm", "latency_ms_p50") if key in row},
        })
    print(_common.table(results, [("path", "path", ""), ("sentences_per_s", "sent/s", ".1f"),
                                  ("vs_native", "x native", ".3f"),
                                  ("equal_to_native", "= native", "d"),
                                  ("equal_to_node", "= node", "d"),
                                  ("latency_ms_p50", "p50 ms", ".0f")]))
    for row in results:
        if "cold" in row:
            print(f"{row['path']}: page ready {row['cold']['ready_ms']:.0f} ms cold, "
                  f"{row['warm']['ready_ms']:.0f} ms warm; first sentence "
                  f"{row['cold']['first_ms']:.0f} / {row['warm']['first_ms']:.0f} ms")
    bench.write(results, {**settings, "count": len(lines), "latency_sentence": sentence})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
