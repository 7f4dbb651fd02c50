"""The web export (``keras-nmt web``): its folder, the Node.js command against
``keras-nmt onnx-translate`` on the built-in corpus's exported run, its refusals, and the
page in headless Chromium. The JavaScript text rules against the Python ones are
tests/test_web_rules.py. Skipped, with the reason, where ``node`` (or Chromium) is absent;
CI installs both."""

import functools
import http.server
import json
import shutil
import subprocess
import threading

import pytest

from support import CHROMEDRIVER, CHROMIUM, headless_chromium, page_wait
from keras_nmt.cli import web as web_cli
from keras_nmt.core.errors import ExportError
from keras_nmt.decoding.onnx_translator import OnnxTranslator
from keras_nmt.web import folder as web_folder, runtime

NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed (the web export "
                                "runs in Node.js and the browser)")

LINES = [
    "the cat sat on the mat .",
    "",
    "   \t ",
    "a dog runs . the cat sleeps !",
    "the 🐈 sat 👍🏽 on ZWJ 👨‍👩‍👧",
    "e\u0301te\u0301 cafe\u0301",
    "cat " * 150,  # beyond max_source_len: cut, as every path cuts it
    "القط جلس",
    "the\x00cat\x07sat\x1b[31m",
]


@pytest.fixture(scope="module")
def selecting_folder(tiny_web_export, tmp_path_factory):
    """The web folder of the int8 export with vocabulary selection and <unk> replacement."""
    return web_folder.write_web_folder(tiny_web_export,
                                       tmp_path_factory.mktemp("web") / "site")


@pytest.fixture(scope="module")
def nbest_folder(tiny_export, tmp_path_factory):
    """The web folder of the float export with 2-best lists."""
    return web_folder.write_web_folder(tiny_export, tmp_path_factory.mktemp("web") / "site")


def node_cli(folder, lines, *args):
    """``node FOLDER/cli.mjs ARGS`` on ``lines`` -> (status, stdout lines, stderr)."""
    stdin = "".join(line + "\n" for line in lines).encode("utf-8")
    done = subprocess.run([NODE, folder / "cli.mjs", *args], input=stdin,
                          capture_output=True, timeout=300)
    return (done.returncode, done.stdout.decode("utf-8").splitlines(),
            done.stderr.decode("utf-8"))


def python_lines(export, lines, **options):
    translator = OnnxTranslator.from_export_dir(export, int8=options.pop("int8", False))
    return translator.translate(lines, **options)


def test_the_folder_holds_the_model_rules_module_and_runtime(selecting_folder):
    path = selecting_folder.path
    web = json.loads((path / "model" / "web.json").read_text(encoding="utf-8"))
    assert selecting_folder.int8 and web["int8"] and web["files"]["model"].endswith(".int8.onnx")
    assert web["shortlist"] == [5, 2] and web["format"] == web_folder.FORMAT
    for name in (*web_folder.SCRIPTS, *web_folder.SHARED, *(f"ort/{f}" for f in runtime.FILES)):
        assert (path / name).is_file(), name
    # The service worker caches every file of the folder, and nothing else.
    files = sorted(p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file())
    assert sorted(web["assets"]) == files
    assert set(selecting_folder.sizes) == set(files)
    raw, packed = selecting_folder.sizes["ort/ort-wasm-simd-threaded.wasm"]
    assert 0 < packed < raw


def test_the_node_command_translates_as_onnx_translate(selecting_folder, tiny_web_export,
                                                       tiny_corpus):
    lines = LINES + (tiny_corpus / "test.en").read_text(encoding="utf-8").splitlines()[:200]
    status, out, err = node_cli(selecting_folder.path, lines, "--quiet")
    assert status == 0, err
    expected = [t.text for t in python_lines(tiny_web_export, lines, int8=True)]
    assert out == expected


def test_confidences_and_nbest_lists_are_onnx_translates(nbest_folder, tiny_export, tiny_corpus):
    from keras_nmt.decoding.confidence import line_fields

    lines = LINES[:6] + (tiny_corpus / "test.en").read_text(encoding="utf-8").splitlines()[:40]
    status, out, err = node_cli(nbest_folder.path, lines, "--confidence", "--quiet")
    assert status == 0, err
    found = python_lines(tiny_export, lines, confidence=True)
    assert [json.loads(line) for line in out] == [
        {"index": i, "text": t.text, **line_fields(
            t.confidence, [part.confidence for part in t.sentences or (t,)])}
        for i, t in enumerate(found)]
    status, out, err = node_cli(nbest_folder.path, lines, "--nbest", "2", "--quiet")
    assert status == 0, err
    assert out == [f"{i} ||| {h.text} ||| {h.score:.4f}"
                   for i, t in enumerate(python_lines(tiny_export, lines, nbest=2))
                   for h in t.hypotheses]


@pytest.mark.parametrize("args, stdin, message", [
    (["--beam", "0"], b"", "--beam: expected a positive integer, got '0'"),
    (["--nbest", "3"], b"", "at most 1 hypotheses per sentence"),
    (["--wat"], b"", "Unknown option '--wat'"),
    (["--threads", "2"], b"", "in Node.js the folder's WebAssembly build runs on one thread"),
    ([], b"ok\n\xff\xfe\n", "input: line 2 is not UTF-8 text"),
])
def test_bad_input_to_the_node_command_is_one_line(selecting_folder, args, stdin, message):
    done = subprocess.run([NODE, selecting_folder.path / "cli.mjs", *args], input=stdin,
                          capture_output=True, timeout=120)
    err = done.stderr.decode("utf-8")
    assert done.returncode == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_an_empty_input_gives_nothing(selecting_folder):
    assert node_cli(selecting_folder.path, []) == (0, [], "")


def test_sentencepiece_exports_are_refused_in_one_line(tiny_spm_export, tmp_path):
    with pytest.raises(ExportError, match="word-tokenized models only: SentencePiece"):
        web_folder.write_web_folder(tiny_spm_export, tmp_path / "site")
    assert not (tmp_path / "site").exists()


def test_a_folder_that_is_not_a_web_export_is_never_replaced(tiny_selecting_export, tmp_path):
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "notes.txt").write_text("mine")
    with pytest.raises(ExportError, match="exists and is not a web export"):
        web_folder.write_web_folder(tiny_selecting_export, tmp_path / "site")
    assert (tmp_path / "site" / "notes.txt").read_text() == "mine"
    assert [p.name for p in tmp_path.iterdir()] == ["site"]  # no half-made folder left


def test_without_npm_the_runtime_install_says_what_to_do(monkeypatch, tmp_path):
    monkeypatch.setattr(runtime, "HERE", tmp_path)  # no node_modules in the package
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(runtime.pathlib.Path(web_folder.__file__).parent / name, tmp_path / name)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(runtime.shutil, "which", lambda name: None)
    with pytest.raises(ExportError, match="npm is not installed: install Node.js 20 and npm"):
        runtime.runtime_dist()


def test_the_command_prints_each_parts_weight(tiny_selecting_export, tmp_path, cli_runner):
    ran = cli_runner("web", tiny_selecting_export, "--out", tmp_path / "site")
    assert ran.returncode == 0, ran.stderr
    assert "ort/ort-wasm-simd-threaded.wasm" in ran.stderr and "total" in ran.stderr
    assert (tmp_path / "site" / "index.html").is_file()
    assert web_cli.size_table({"a": (2_000_000, 1_000_000)})[-1].split() == ["total", "2.00", "1.00"]


# ---- the page in a browser --------------------------------------------------------------


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # the test reads the browser's own log
        pass


class StaticServer:
    """A folder on a static file server on loopback, as ``python -m http.server``."""

    def __init__(self, folder):
        handler = functools.partial(_Quiet, directory=str(folder))
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self):
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


@pytest.fixture
def served_folder(selecting_folder):
    server = StaticServer(selecting_folder.path)
    yield server.url
    server.stop()


@pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER), reason="Chromium and its driver are not "
                    "installed (Debian: apt-get install chromium chromium-driver)")
def test_the_page_translates_in_the_browser_as_node_does(served_folder, selecting_folder,
                                                         tiny_corpus):
    from selenium.webdriver.common.by import By

    lines = (tiny_corpus / "test.en").read_text(encoding="utf-8").splitlines()[:30]
    _, expected, _ = node_cli(selecting_folder.path, lines, "--quiet")
    driver = headless_chromium()
    try:
        driver.get(served_folder + "/index.html")
        wait = page_wait(driver, 120)
        wait.until(lambda d: d.execute_script("return window.kerasNmt"))
        assert "error" not in driver.execute_script("return window.kerasNmt"), \
            driver.execute_script("return window.kerasNmt.error")
        texts = driver.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "window.kerasNmt.translator.translate(arguments[0])"
            ".then((ts) => done(ts.map((t) => t.text)), (e) => done(String(e)));", lines)
        assert texts == expected
        driver.find_element(By.ID, "text").send_keys(lines[0])
        driver.find_element(By.ID, "translate").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".sentence .best"))
        # Alone, not in a batch of 30: a barely trained model's near ties can fall apart.
        _, alone, _ = node_cli(selecting_folder.path, lines[:1], "--quiet")
        assert driver.find_element(By.CSS_SELECTOR, ".sentence .best").text == alone[0]
        rows = driver.find_elements(By.CSS_SELECTOR, "table.heatmap tbody tr")
        tokens = driver.execute_script(
            "return window.kerasNmt.translator.translate([arguments[0]], {attention: true})"
            ".then((ts) => ts[0].tokens)", lines[0])
        assert [r.find_element(By.CSS_SELECTOR, "th").text for r in rows] == [*tokens, "</s>"]
        resources = driver.execute_script(
            "return performance.getEntriesByType('resource').map((e) => e.name)")
        assert resources and all(url.startswith(served_folder + "/") for url in resources)
        assert "1 thread" in driver.find_element(By.ID, "runtime").text
        assert not driver.find_element(By.ID, "loading").is_displayed()
    finally:
        driver.quit()


@pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER), reason="Chromium and its driver are not "
                    "installed (Debian: apt-get install chromium chromium-driver)")
def test_the_page_says_what_is_wrong_with_its_input(served_folder):
    from selenium.webdriver.common.by import By

    driver = headless_chromium()
    try:
        driver.get(served_folder + "/index.html")
        wait = page_wait(driver, 120)
        wait.until(lambda d: d.find_element(By.ID, "translate").is_enabled())
        driver.find_element(By.ID, "translate").click()
        wait.until(lambda d: "Nothing to translate" in d.find_element(By.ID, "status").text)
        driver.execute_script("document.getElementById('text').value = arguments[0]",
                              "cat " * 150 + "\n\x00\x07 🇫🇷 ǅ \u2028 e\u0301")
        driver.find_element(By.ID, "translate").click()
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, ".sentence")) == 2)
        assert "not translated" in driver.find_element(By.CSS_SELECTOR, ".sentence .error").text
        assert "error" not in driver.find_element(By.ID, "status").get_attribute("class")
        driver.execute_script("document.getElementById('text').value = 'a'.repeat(20001)")
        driver.find_element(By.ID, "translate").click()
        wait.until(lambda d: "at most 20000" in d.find_element(By.ID, "status").text)
    finally:
        driver.quit()


@pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER), reason="Chromium and its driver are not "
                    "installed (Debian: apt-get install chromium chromium-driver)")
def test_once_loaded_the_page_translates_with_its_server_gone(selecting_folder, tiny_corpus):
    """The service worker caches every file the manifest lists: with the server stopped,
    the page loads again from the cache, cross-origin isolated by it (one thread asked
    for, so that the bytes are Node's)."""
    line = (tiny_corpus / "test.en").read_text(encoding="utf-8").splitlines()[0]
    _, expected, _ = node_cli(selecting_folder.path, [line], "--quiet")
    assets = json.loads((selecting_folder.path / web_folder.MARK).read_text())["assets"]
    server = StaticServer(selecting_folder.path)
    driver = headless_chromium()
    try:
        driver.get(server.url + "/index.html?threads=1")
        wait = page_wait(driver, 120)
        wait.until(lambda d: d.execute_script("return window.kerasNmt"))
        wait.until(lambda d: d.execute_async_script(
            "const done = arguments[0];"
            "caches.keys().then(async (names) => { let n = 0;"
            "  for (const name of names) n += (await (await caches.open(name)).keys()).length;"
            "  done(n); });") >= len(assets))
        server.stop()
        driver.refresh()
        wait.until(lambda d: d.execute_script("return window.kerasNmt"))
        assert "error" not in driver.execute_script("return window.kerasNmt")
        texts = driver.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "window.kerasNmt.translator.translate([arguments[0]])"
            ".then((ts) => done(ts.map((t) => t.text)), (e) => done(String(e)));", line)
        assert texts == expected
        assert driver.execute_script("return self.crossOriginIsolated")
    finally:
        driver.quit()
        server.stop()
