"""Serving: the TF Serving client (against a loopback stand-in, tests/fake_model_server.py)
and onnx_translate.

Protocol tests use two small fixtures of our own: an "echo" SavedModel with the export
contract's serving_default signature (its translation is the first three words of the
sentence, score minus the word count, truncated the words beyond three), and an "echo"
ONNX model with the translate_ids interface (it returns the source ids as the only
hypothesis). The end-to-end tests at the bottom use a real export of ``tiny_run``.
"""

from __future__ import annotations

import contextlib
import http.server
import io
import json
import math
import pathlib
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

from keras_nmt.export import EXPORT_ALPHA
from keras_nmt.core.constants import RESERVED, UNK
from keras_nmt.text import word as tokenizer
from keras_nmt.cli import onnx_translate as onnx_cli, tfserving_client as client_cli
from keras_nmt.decoding import onnx_translator
from keras_nmt.core.errors import ExportError, ServingError, Unreachable
from keras_nmt.serving.client import GrpcTransport, RestTransport, TFServingClient
from keras_nmt.decoding.translation import Translation
from support import HARD_LINES, ROOT, StreamProbe, child_env, onnx_files, onnx_translate_probe

CLIENT = ROOT / "serving" / "tfserving_client.py"
ONNX_TRANSLATE = ROOT / "serving" / "onnx_translate.py"
ENV = child_env(TF_CPP_MIN_LOG_LEVEL="3")
ECHO_WORDS = 3
def _run(script: pathlib.Path, args: list[str], stdin: str, timeout: float = 60):
    return subprocess.run(
        [sys.executable, str(script), *args], input=stdin.encode("utf-8"),
        capture_output=True, env=ENV, cwd=ROOT, timeout=timeout,
    )


@contextlib.contextmanager
def _refusing_port():
    """A loopback port held, for the duration, by a socket that is bound but never
    listens: connecting to it is refused, and no other process can take it meanwhile (as
    it could a port found free and closed again before use)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


# ---- onnx_translate on an echo ONNX model ----------------------------------------------

ECHO_VOCAB = list(RESERVED) + ["the", "cat", "sat", "on", "mat", ".", "🐈"]
ECHO_MAX_SOURCE_LEN = 5


def _write_echo_onnx(path: pathlib.Path) -> None:
    """translate_ids' interface; the one hypothesis is the source itself, scored
    -alpha * (tokens + EOS)."""
    import onnx
    from onnx import TensorProto, helper

    def scalar(name, dtype):
        return helper.make_tensor_value_info(name, dtype, [])

    nodes = [
        helper.make_node("Constant", [], ["axis1"], value=helper.make_tensor(
            "axis1", TensorProto.INT64, [1], [1])),
        helper.make_node("Unsqueeze", ["source_ids", "axis1"], ["ids"]),
        helper.make_node("Constant", [], ["zero"], value=helper.make_tensor(
            "zero", TensorProto.INT32, [], [0])),
        helper.make_node("Greater", ["source_ids", "zero"], ["real"]),
        helper.make_node("Cast", ["real"], ["real_i"], to=TensorProto.INT32),
        helper.make_node("ReduceSum", ["real_i", "axis1"], ["lengths"], keepdims=1),
        helper.make_node("Cast", ["lengths"], ["lengths_f"], to=TensorProto.FLOAT),
        helper.make_node("Neg", ["alpha"], ["minus_alpha"]),
        helper.make_node("Mul", ["lengths_f", "minus_alpha"], ["scores"]),
        helper.make_node("Identity", ["scores"], ["log_probs"]),
    ]
    graph = helper.make_graph(
        nodes, "echo",
        [helper.make_tensor_value_info("source_ids", TensorProto.INT32, ["B", "T"]),
         scalar("beam_size", TensorProto.INT32), scalar("alpha", TensorProto.FLOAT),
         scalar("forbid_unk", TensorProto.BOOL), scalar("max_length", TensorProto.INT32)],
        [helper.make_tensor_value_info("ids", TensorProto.INT32, ["B", 1, "T"]),
         helper.make_tensor_value_info("lengths", TensorProto.INT32, ["B", 1]),
         helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["B", 1]),
         helper.make_tensor_value_info("log_probs", TensorProto.FLOAT, ["B", 1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                             ir_version=8)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


@pytest.fixture(scope="module")
def echo_onnx_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("echo_onnx")
    _write_echo_onnx(out / "echo.onnx")
    for lang in ("en", "fr"):
        (out / f"echo.vocab.{lang}.txt").write_text("\n".join(ECHO_VOCAB) + "\n", "utf-8")
    (out / "echo.onnx.json").write_text(json.dumps({
        "src": "en", "tgt": "fr", "tokenizer": "word",
        "source_vocab": "echo.vocab.en.txt", "target_vocab": "echo.vocab.fr.txt",
        "max_source_len": ECHO_MAX_SOURCE_LEN, "beam_size": 2, "alpha": 1.0,
        "inputs": list(onnx_translator.INPUTS), "outputs": ["ids", "lengths", "scores", "log_probs"],
    }), "utf-8")
    return out


def _echo_expected(line: str) -> str:
    tokens = tokenizer.tokenize(line, "en")[:ECHO_MAX_SOURCE_LEN]
    known = [t if t in ECHO_VOCAB else UNK for t in tokens]
    return tokenizer.detokenize(known, "fr")


def test_onnx_translate_hard_lines_in_a_subprocess_without_tensorflow(echo_onnx_dir):
    lines = HARD_LINES * 3  # 27 lines, batches of 4: order kept across sorted batches
    out, stderr, heavy = onnx_translate_probe(
        [str(echo_onnx_dir), "--name", "echo", "--batch-size", "4", "--quiet"], lines
    )
    assert heavy == []
    assert out == [_echo_expected(line) for line in lines]
    # Spot checks that do not go through the tokenizer: known words, <unk>, emoji, blanks.
    assert out[0] == "the cat sat on the"
    assert out[1] == out[2] == ""
    assert out[3] == "the cat sat <unk> <unk>"  # [ and 31m
    assert out[4] == "the 🐈 sat <unk> <unk>"
    assert out[6] == "cat cat cat cat cat"
    # Truncated: the first line (7 tokens), the emoji line (12), the 2,500-token line.
    assert stderr == [f"onnx_translate: warning: 9 sentence(s) longer than {ECHO_MAX_SOURCE_LEN} "
                      f"tokens were truncated to their first {ECHO_MAX_SOURCE_LEN} tokens"]


def test_onnx_translate_streams_its_input_a_chunk_at_a_time(echo_onnx_dir):
    """A pipe that stays open: the first chunk's translations (64 lines at --batch-size 1)
    come out, flushed, while the input has not ended, as they would for a file of any size.
    Memory holds one chunk, whatever the input's size: the command reads a chunk, writes its
    translations and only then reads the next (translating.translate_in_chunks; its test in
    test_cli_translate.py counts the lines read before the first line is written)."""
    import queue

    from keras_nmt.cli.streaming import CHUNK_BATCHES

    lines = [f"the cat sat {i % 7} on the mat" for i in range(CHUNK_BATCHES)]
    process = subprocess.Popen(
        [sys.executable, "-m", "keras_nmt.cli", "onnx-translate", str(echo_onnx_dir),
         "--name", "echo", "--batch-size", "1"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, cwd=ROOT)
    output: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [output.put(line) for line in process.stdout],
                     daemon=True).start()
    try:
        process.stdin.write("".join(line + "\n" for line in lines).encode())
        process.stdin.flush()
        first = [output.get(timeout=60).decode() for _ in lines]  # stdin still open
        assert first == [_echo_expected(line) + "\n" for line in lines]
        assert process.poll() is None
        process.stdin.write(b"the mat\n")
        process.stdin.close()
        assert process.wait(timeout=60) == 0, process.stderr.read().decode()
    finally:
        process.kill()
        process.wait()
    assert output.get(timeout=10) == b"the mat\n"
    stderr = process.stderr.read().decode().splitlines()
    # Progress without a total or an ETA: the length of a stream is not known.
    progress = [line for line in stderr if line.startswith("translating: ")]
    assert progress and all(re.fullmatch(r"translating: \d+ sentences  elapsed [\d:]+", line)
                            for line in progress), stderr
    assert [line for line in stderr if line.startswith("translated ")][0].startswith(
        "translated 65 sentences in ")


def test_onnx_translator_api_options_and_nbest_format(echo_onnx_dir, capsys):
    translator = onnx_translator.OnnxTranslator.from_export_dir(echo_onnx_dir, "echo")
    assert (translator.max_source_len, translator.beam_size, translator.max_nbest) == (5, 2, 1)
    assert translator.translate([]) == []
    results = translator.translate(["cat", "", "the cat sat"], alpha=0.5, batch_size=1)
    assert [r.text for r in results] == ["cat", "", "the cat sat"]
    assert [r.score for r in results] == [-1.0, 0.0, -2.0]  # -alpha * (tokens + EOS)
    assert results[2].hypotheses == (Translation("the cat sat", ("the", "cat", "sat"), -2.0,
                                                 ("the", "cat", "sat")),)
    with pytest.raises(ValueError, match="at most 1 hypotheses"):
        translator.translate(["cat"], nbest=2)

    stdout, stderr = io.StringIO(), io.StringIO()
    code = onnx_cli.main(
        [str(echo_onnx_dir), "--name", "echo", "--nbest", "1", "--quiet"],
        stdin=io.BytesIO("the mat\n\n".encode()), stdout=stdout, stderr=stderr,
    )
    assert code == 0, stderr.getvalue()
    assert stdout.getvalue() == "0 ||| the mat ||| -3.0000\n1 |||  ||| 0.0000\n"
    stdout = io.StringIO()
    assert onnx_cli.main([str(echo_onnx_dir), "--name", "echo"], stdin=io.BytesIO(b""),
                               stdout=stdout, stderr=stderr) == 0
    assert stdout.getvalue() == ""  # no input, no output, no error


def test_onnx_translator_splits_sentences_as_the_export_says(echo_onnx_dir, tmp_path):
    """The echo model's translation of a sentence is its first 5 tokens, scored -(tokens
    + EOS): a line's translation joins its sentences' exactly."""
    line = "The cat sat. The mat sat on the cat cat cat."
    first, second = "The cat sat.", "The mat sat on the cat cat cat."
    translator = onnx_translator.OnnxTranslator.from_export_dir(echo_onnx_dir, "echo")
    assert translator.split_sentences is False  # no "split_sentences": an older export
    [whole] = translator.translate([line])
    assert (whole.text, whole.score, whole.truncated) == (_echo_expected(line), -6.0, 8)
    [split] = translator.translate([line, ""], split_sentences=True)[:1]
    assert split.text == f"{_echo_expected(first)} {_echo_expected(second)}" == (
        "<unk> cat sat. <unk> mat sat on the")
    assert split.tokens == ("<unk>", "cat", "sat", ".", "<unk>", "mat", "sat", "on", "the")
    # The score: the sentences' (-5, -6) weighted by their source tokens + EOS (5, 6).
    assert (split.score, split.truncated, len(split.sentences)) == (
        pytest.approx((5 * -5.0 + 6 * -6.0) / 11), 4, 2)
    assert split.hypotheses == (split,) and split.alternatives == ()
    assert [t.text for t in split.sentences] == [_echo_expected(first), _echo_expected(second)]
    assert translator.translate([first], split_sentences=True) == translator.translate([first])

    export = tmp_path / "echo"
    shutil.copytree(echo_onnx_dir, export)
    metadata = json.loads((export / "echo.onnx.json").read_text("utf-8"))
    (export / "echo.onnx.json").write_text(json.dumps({**metadata, "split_sentences": True}))
    lines = (line + "\n\n" + first + "\n").encode()
    for options, expected in ((["--name", "echo"], [split.text, "", _echo_expected(first)]),
                              (["--name", "echo", "--no-split-sentences"],
                               [whole.text, "", _echo_expected(first)])):
        stdout, stderr = io.StringIO(), io.StringIO()
        assert onnx_cli.main([str(export), "--quiet", *options], stdin=io.BytesIO(lines),
                             stdout=stdout, stderr=stderr) == 0
        assert stdout.getvalue().split("\n")[:-1] == expected
        # One sentence of 9 tokens cut, split or not (the whole line has 13).
        assert stderr.getvalue().startswith("keras-nmt onnx-translate: warning: 1 sentence(s) longer")
    (export / "echo.onnx.json").write_text(json.dumps({**metadata, "split_sentences": "yes"}))
    with pytest.raises(ExportError, match="split_sentences must be true or false"):
        onnx_translator.OnnxTranslator.from_export_dir(export, "echo")


def test_onnx_translate_bad_export_dir_is_one_line(tmp_path, echo_onnx_dir):
    result = _run(ONNX_TRANSLATE, [str(tmp_path)], "hello\n")
    assert result.returncode == 2
    assert result.stderr.decode().count("\n") == 1
    assert "onnx_translate: error:" in result.stderr.decode()
    assert "was the model exported with --onnx?" in result.stderr.decode()
    broken = tmp_path / "broken"
    broken.mkdir()
    for name in ("echo.onnx.json", "echo.vocab.en.txt", "echo.vocab.fr.txt"):
        (broken / name).write_bytes((echo_onnx_dir / name).read_bytes())
    (broken / "echo.onnx").write_bytes(b"not a model")
    result = _run(ONNX_TRANSLATE, [str(broken), "--name", "echo"], "hello\n")
    assert result.returncode == 2 and b"Traceback" not in result.stderr
    assert result.stderr.decode().startswith("onnx_translate: error: cannot load")


# ---- the TF Serving client against the stand-in ---------------------------------------

@pytest.fixture(scope="module")
def echo_savedmodel(tmp_path_factory):
    """EXPORT_DIR/echo/1: an ExportArchive with the contract's serving_default signature
    and a ``translate`` signature that also takes beam_size (words kept) and alpha."""
    import keras
    import tensorflow as tf

    def translate(sentences, beam_size, alpha):
        words = tf.strings.split(sentences)
        count = tf.cast(words.row_lengths(), tf.int32)
        return {
            "translations": tf.strings.reduce_join(words[:, :beam_size], axis=1, separator=" "),
            "scores": -tf.cast(count, tf.float32) * alpha,
            "truncated": tf.maximum(count - beam_size, 0),
        }

    sentences = tf.TensorSpec([None], tf.string, name="sentences")
    archive = keras.export.ExportArchive()
    archive.track(tf.Module())
    archive.add_endpoint("serving_default", lambda s: translate(s, ECHO_WORDS, 1.0),
                         input_signature=[sentences])
    archive.add_endpoint("translate", translate, input_signature=[
        sentences, tf.TensorSpec([], tf.int32, name="beam_size"),
        tf.TensorSpec([], tf.float32, name="alpha"),
    ])
    archive.add_endpoint(  # one output: TF Serving answers plain values, not objects
        "text_only", lambda s: {"translations": translate(s, ECHO_WORDS, 1.0)["translations"]},
        input_signature=[sentences],
    )
    export_dir = tmp_path_factory.mktemp("echo_savedmodel")
    archive.write_out(str(export_dir / "echo" / "1"), verbose=False)
    return export_dir


@pytest.fixture(scope="module")
def standin(echo_savedmodel):
    from fake_model_server import ModelRegistry, StandInServer

    registry = ModelRegistry()
    registry.add("echo", echo_savedmodel / "echo")
    with StandInServer(registry) as server:
        yield server
    registry.close()


@pytest.fixture
def faults(standin):
    standin.faults.drop, standin.faults.delay, standin.faults.requests = 0, 0.0, 0
    yield standin.faults
    standin.faults.drop, standin.faults.delay = 0, 0.0


def _echo(line: str, beam: int = ECHO_WORDS, alpha: float = 1.0):
    words = line.split()
    return " ".join(words[:beam]), -float(len(words)) * alpha, max(0, len(words) - beam)


LINES = ["a b c d e", "", "  ", "héllo wörld 🐈", "x\ty", "one two three four", "z"]


def _check_echo(predictions, lines=LINES, **search):
    assert [(p.text, p.score, p.truncated) for p in predictions] == [
        _echo(x, **search) for x in lines
    ]


@pytest.mark.parametrize("form", ["instances", "inputs"])
def test_rest_client_both_request_forms(standin, faults, form):
    client = TFServingClient(RestTransport(standin.rest_url, "echo", form=form), batch_size=3)
    _check_echo(client.translate(LINES))
    assert faults.requests == 3  # 7 lines in batches of 3


def test_grpc_client_batches_in_order(standin, faults):
    transport = GrpcTransport(standin.grpc_target, "echo")
    try:
        client = TFServingClient(transport, batch_size=2)
        _check_echo(client.translate(LINES))
        assert faults.requests == 4
        assert client.translate([]) == []
        assert faults.requests == 4  # nothing to send, nothing sent
    finally:
        transport.close()


def test_beam_and_alpha_go_to_the_translate_signature(standin, capsys):
    search = dict(signature="translate", beam=2, alpha=0.5)
    rest = RestTransport(standin.rest_url, "echo", form="inputs", **search)
    _check_echo(TFServingClient(rest).translate(LINES), beam=2, alpha=0.5)
    grpc_transport = GrpcTransport(standin.grpc_target, "echo", **search)
    try:
        _check_echo(TFServingClient(grpc_transport).translate(LINES), beam=2, alpha=0.5)
    finally:
        grpc_transport.close()
    with pytest.raises(ValueError, match="--beam needs the columnar form"):
        RestTransport(standin.rest_url, "echo", form="instances", **search)
    with pytest.raises(SystemExit):
        client_cli.main(["--url", standin.rest_url, "--alpha", "0.5"])
    assert "--alpha needs --beam" in capsys.readouterr().err
    stdout = io.StringIO()
    code = client_cli.main(["--url", standin.rest_url, "--name", "echo", "--beam", "1"],
                                 stdin=io.BytesIO(b"a b c\n\n"), stdout=stdout)
    assert code == 0 and stdout.getvalue() == "a\n\n"


def test_the_client_writes_a_chunk_before_it_reads_the_next(standin):
    """tfserving-client streams its input: on one that ends once an answer has come out,
    the first translations are written when the first chunk, and not a line more, has
    been read."""
    from keras_nmt.cli.streaming import CHUNK_BATCHES

    probe = StreamProbe("a b c", limit=4 * 2 * CHUNK_BATCHES)
    code = client_cli.main(["--url", standin.rest_url, "--name", "echo", "--batch-size", "2"],
                           stdin=probe.stdin, stdout=probe.stdout)
    assert code == 0
    assert probe.read_at_first_output == 2 * CHUNK_BATCHES
    assert probe.stdout.getvalue() == "a b c\n" * (2 * CHUNK_BATCHES)


def test_beam_without_alpha_sends_the_exports_alpha(standin):
    """No --alpha: alpha -1 goes out, which the signature reads as the export's alpha (the
    echo model has no export alpha: it multiplies, so -1 shows in the scores)."""
    search = dict(signature="translate", beam=2)
    for transport in (RestTransport(standin.rest_url, "echo", form="inputs", **search),
                      GrpcTransport(standin.grpc_target, "echo", **search)):
        assert transport.search == {"beam_size": 2, "alpha": EXPORT_ALPHA} and EXPORT_ALPHA < 0
        try:
            _check_echo(TFServingClient(transport).translate(LINES), beam=2, alpha=EXPORT_ALPHA)
        finally:
            getattr(transport, "close", lambda: None)()


def test_old_option_spellings_still_work_with_a_notice(standin, capsys):
    def translate(*options):
        stdout = io.StringIO()
        code = client_cli.main(["--url", standin.rest_url, *options, "--scores"],
                               stdin=io.BytesIO(b"a b c\n"), stdout=stdout)
        return code, stdout.getvalue(), capsys.readouterr().err

    new = translate("--name", "echo", "--model-version", "1")
    assert new == (0, "-3.0000\ta b c\n", "")
    code, out, err = translate("--model", "echo", "--version", "1")
    assert (code, out) == new[:2]
    assert err.splitlines() == [
        "keras-nmt tfserving-client: warning: --model is deprecated, use --name (the old "
        "spelling goes in the next release)",
        "keras-nmt tfserving-client: warning: --version is deprecated, use --model-version "
        "(the old spelling goes in the next release)"]


def test_rest_client_script_in_a_subprocess_with_a_version(standin):
    result = _run(CLIENT, ["--url", standin.rest_url, "--name", "echo", "--model-version", "1",
                           "--form", "inputs", "--batch-size", "2", "--scores"],
                  "\n".join(LINES) + "\n")
    assert result.returncode == 0, result.stderr.decode()
    expected = [f"{score:.4f}\t{text}" for text, score, _ in map(_echo, LINES)]
    assert result.stdout.decode("utf-8").split("\n") == expected + [""]
    assert "truncated 2 over-long sentence(s)" in result.stderr.decode()


def test_timeout_is_a_clear_error_without_retries(standin, faults):
    for transport in (RestTransport(standin.rest_url, "echo", timeout=30.0),
                      GrpcTransport(standin.grpc_target, "echo", timeout=30.0)):
        client = TFServingClient(transport, retries=2, backoff=0.01)
        # A first answered call opens the connection and builds a request once, so the
        # time below is the wait alone. It gets a long timeout of its own: cold, on a
        # loaded machine, it has taken 1.57 s.
        _check_echo(client.predict(LINES))
        transport.timeout = 0.3
        faults.delay, faults.requests = 1.5, 0
        start = time.monotonic()
        with pytest.raises(ServingError, match=r"no answer from .* within 0.3 s") as error:
            client.predict(["a b"])
        assert time.monotonic() - start < 1.2  # gave up at 0.3 s, not at the 1.5 s answer
        assert not isinstance(error.value, Unreachable)
        assert faults.requests == 1  # one try: a slow server is not hammered
        faults.delay = 0.0


@pytest.mark.parametrize("protocol", ["rest", "grpc"])
def test_dropped_connection_is_retried(standin, faults, protocol):
    transport = (RestTransport(standin.rest_url, "echo") if protocol == "rest"
                 else GrpcTransport(standin.grpc_target, "echo"))
    retried = []
    client = TFServingClient(transport, retries=2, backoff=0.01,
                             on_retry=lambda error, delay: retried.append(str(error)))
    faults.drop = 1
    _check_echo(client.predict(LINES))
    assert faults.requests == 2 and len(retried) == 1
    faults.drop = 5
    with pytest.raises(Unreachable, match="gave up after 3 tries"):
        client.predict(["a"])


def test_server_started_after_the_first_failed_try(echo_savedmodel):
    from fake_model_server import ModelRegistry, StandInServer

    registry = ModelRegistry()
    registry.add("echo", echo_savedmodel / "echo")
    # Bound to a port of its own from here on, listening only once started.
    server = StandInServer(registry, rest_port=0, grpc_port=None)
    started = []

    def start_server(error, delay):
        assert "cannot connect" in str(error)
        if not started:
            started.append(server.start())

    client = TFServingClient(RestTransport(server.rest_url, "echo"), retries=3,
                             backoff=0.05, on_retry=start_server)
    try:
        _check_echo(client.predict(LINES))
        assert len(started) == 1
    finally:
        server.stop()
        registry.close()


def test_server_down_is_one_line():
    with _refusing_port() as port:
        result = _run(CLIENT, ["--url", f"http://127.0.0.1:{port}", "--retries", "1",
                               "--backoff", "0.05", "--quiet"], "hello\n")
    stderr = result.stderr.decode()
    assert result.returncode == 2 and result.stdout == b""
    assert stderr.count("\n") == 1 and "Traceback" not in stderr
    assert stderr.startswith(f"tfserving_client: error: cannot connect to http://127.0.0.1:{port}")
    assert "gave up after 2 tries; is the server up?" in stderr


def test_grpc_server_down_is_one_line_with_retry_notices():
    stdout, stderr = io.StringIO(), io.StringIO()
    with _refusing_port() as port:
        target = f"127.0.0.1:{port}"
        code = client_cli.main(["--grpc", target, "--retries", "2", "--backoff", "0.05"],
                               stdin=io.BytesIO(b"hello\n"), stdout=stdout, stderr=stderr)
    lines = stderr.getvalue().splitlines()
    assert code == 2 and stdout.getvalue() == "" and len(lines) == 3
    assert lines[0].startswith(f"keras-nmt tfserving-client: cannot reach {target}")
    assert lines[0].endswith("trying again in 0.05 s") and lines[1].endswith("in 0.1 s")
    assert lines[2].startswith(f"keras-nmt tfserving-client: error: cannot reach {target}")
    assert lines[2].endswith("(gave up after 3 tries; is the server up?)")


class _BadServer(http.server.BaseHTTPRequestHandler):
    answers: list[tuple[int, bytes]] = []

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        status, body = self.answers.pop(0)
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_bad_server_answers_are_clear_errors():
    answers = [
        (200, b"<html>proxy</html>"),
        (200, b'{"predictions": [{"translations": "x", "scores": 0, "truncated": 0}]}'),
        (200, b'{"outputs": {"scores": [1.0, 2.0]}}'),
        (200, b'{"predictions": [{"translations": "x"}, {"scores": 1.0}]}'),
        (500, b'{"error": "Internal: the sky fell"}'),
        (502, b"Bad Gateway"),
    ]
    handler = type("Handler", (_BadServer,), {"answers": list(answers)})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    expected = [
        r"bad answer from server: not JSON \('<html>proxy</html>'\)",
        r"bad answer from server: translations holds 1 values for 2 sentences",
        r"bad answer from server: no 'translations' output",
        r"bad answer from server: a translation that is not a string",
        r"server answered HTTP 500: Internal: the sky fell",
        r"server answered HTTP 502: Bad Gateway",
    ]
    try:
        for form, pattern in zip(["instances", "instances", "inputs", "instances", "inputs",
                                  "inputs"],
                                 expected):
            client = TFServingClient(RestTransport(url, "nmt", form=form), retries=3)
            with pytest.raises(ServingError, match=pattern) as error:
                client.predict(["a", "b"])
            assert not isinstance(error.value, Unreachable)
    finally:
        server.shutdown()
        server.server_close()


def test_server_side_errors_reach_the_user(standin, faults):
    rest = TFServingClient(RestTransport(standin.rest_url, "echo", signature="nope"))
    with pytest.raises(ServingError, match='HTTP 400: Serving signature name: "nope" not found'):
        rest.predict(["a"])
    missing = TFServingClient(RestTransport(standin.rest_url, "nmt"))
    with pytest.raises(ServingError, match=r"HTTP 404: Servable not found .*Latest\(nmt\)"):
        missing.predict(["a"])
    transport = GrpcTransport(standin.grpc_target, "nmt")
    try:
        with pytest.raises(ServingError, match=r"NOT_FOUND: Servable not found"):
            TFServingClient(transport).predict(["a"])
    finally:
        transport.close()


def test_client_usage_errors_are_one_line(capsys):
    for args in (["--grpc", "localhost:8500", "--form", "inputs"], ["--grpc", "nohost"],
                 ["--url", "localhost:8501"], ["--batch-size", "0", "--url", "http://h:1"], []):
        with pytest.raises(SystemExit) as stop:
            client_cli.main(args)
        stderr = capsys.readouterr().err
        assert stop.value.code == 2 and stderr.count("\n") == 1, (args, stderr)
        assert stderr.startswith("keras-nmt tfserving-client: error:")


def _http(method: str, url: str, body: bytes | None = None):
    request = urllib.request.Request(url, data=body, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_standin_speaks_tf_serving_rest_json(standin):
    base = f"{standin.rest_url}/v1/models/echo"
    assert _http("GET", base) == (200, {"model_version_status": [
        {"version": "1", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}
    ]})
    assert _http("GET", base + "/versions/2")[0] == 404
    ok = json.dumps({"instances": ["a b c d", {"b64": "eA=="}]}).encode()
    assert _http("POST", base + "/versions/1:predict", ok) == (200, {"predictions": [
        {"translations": "a b c", "scores": -4.0, "truncated": 1},
        {"translations": "x", "scores": -1.0, "truncated": 0},
    ]})
    rows = json.dumps({"instances": [{"sentences": "p q"}]}).encode()
    assert _http("POST", base + ":predict", rows)[1]["predictions"][0]["translations"] == "p q"
    columns = json.dumps({"inputs": ["p q", ""]}).encode()
    assert _http("POST", base + ":predict", columns) == (200, {"outputs": {
        "translations": ["p q", ""], "scores": [-2.0, -0.0], "truncated": [0, 0]}})
    one_output = {"signature_name": "text_only", "instances": ["a b c d", "e"]}
    assert _http("POST", base + ":predict", json.dumps(one_output).encode()) == (
        200, {"predictions": ["a b c", "e"]})
    one_output = {"signature_name": "text_only", "inputs": {"sentences": ["a b c d"]}}
    assert _http("POST", base + ":predict", json.dumps(one_output).encode()) == (
        200, {"outputs": ["a b c"]})
    for form in ("instances", "inputs"):
        client = TFServingClient(RestTransport(standin.rest_url, "echo", "text_only", form=form))
        assert client.predict(["a b c d"]) == [Translation("a b c", score=None)]
    for bad in (b"{not json", b'{"instances": ["a"], "inputs": ["a"]}', b'{"instances": "a"}',
                b'{"instances": [{"text": "a"}]}'):
        status, answer = _http("POST", base + ":predict", bad)
        assert status == 400 and set(answer) == {"error"}, bad


def test_standin_serves_a_models_config_with_tf_servings_proto(echo_savedmodel, tmp_path):
    from fake_model_server import ModelRegistry

    config = tmp_path / "models.config"
    config.write_text(
        'model_config_list {\n  config {\n    name: "echo"\n    base_path: "/models/echo"\n'
        '    model_platform: "tensorflow"\n  }\n}\n', "utf-8")
    registry = ModelRegistry.from_models_config(config, {"/models/echo": echo_savedmodel / "echo"})
    try:
        servable = registry.find("echo")
        assert servable.version == 1
        out = servable.run("", {"sentences": np.array([b"a b c d"], dtype=object)})
        assert out["translations"].tolist() == [b"a b c"]
        assert out["truncated"].tolist() == [1]
    finally:
        registry.close()


# ---- end to end on a real export of tiny_run -------------------------------------------

@pytest.fixture(scope="module")
def tiny_expected(tiny_export, tiny_run, tiny_corpus):
    """Sentences (test set + hard lines + lines of 2 and 3 test sentences) and Translator's
    translations of them at the export's beam and alpha: what every serving path must
    give (the SavedModel and the onnxruntime path split lines as Translator does)."""
    from keras_nmt.decoding.keras_translator import Translator

    metadata = json.loads((onnx_files(tiny_export) / "nmt.onnx.json").read_text("utf-8"))
    test = (tiny_corpus / "test.en").read_text("utf-8").splitlines()
    sentences = test[:30] + HARD_LINES + [" ".join(test[:2]), " ".join(test[2:5])]
    translations = Translator.from_run_dir(tiny_run).translate(
        sentences, beam_size=metadata["beam_size"], alpha=metadata["alpha"]
    )
    return sentences, translations


@pytest.fixture(scope="module")
def tiny_standin(tiny_export):
    """The export served as TF Serving would: the model named in its models.config, from
    that config's base path (/models/nmt, mapped to EXPORT_DIR/nmt)."""
    from google.protobuf import text_format
    from tensorflow_serving.config import model_server_config_pb2
    from fake_model_server import ModelRegistry, StandInServer

    config = model_server_config_pb2.ModelServerConfig()
    text_format.Parse((tiny_export / "models.config").read_text("utf-8"), config)
    [entry] = config.model_config_list.config
    registry = ModelRegistry.from_models_config(
        tiny_export / "models.config", {entry.base_path: tiny_export / entry.name}
    )
    assert list(registry.models) == [entry.name] == ["nmt"]
    with StandInServer(registry) as server:
        yield server
    registry.close()


def _assert_same(got, expected):
    assert [g.text for g in got] == [t.text for t in expected]
    assert [g.truncated for g in got] == [t.truncated for t in expected]
    np.testing.assert_allclose([g.score for g in got], [t.score for t in expected], atol=1e-4)


@pytest.mark.parametrize("path", ["rest-instances", "rest-inputs", "grpc"])
def test_served_export_equals_translator(tiny_standin, tiny_expected, path):
    sentences, expected = tiny_expected
    if path == "grpc":
        transport = GrpcTransport(tiny_standin.grpc_target, "nmt")
    else:
        transport = RestTransport(tiny_standin.rest_url, "nmt", form=path.split("-")[1])
    _assert_same(TFServingClient(transport, batch_size=8).translate(sentences), expected)
    assert any(t.truncated for t in expected)  # the 2,500-word line


def test_served_export_at_another_beam_equals_translator(tiny_standin, tiny_expected, tiny_run):
    from keras_nmt.decoding.keras_translator import Translator

    sentences, _ = tiny_expected
    expected = Translator.from_run_dir(tiny_run).translate(sentences, beam_size=2, alpha=0.5)
    rest = RestTransport(tiny_standin.rest_url, "nmt", signature="translate", form="inputs",
                         beam=2, alpha=0.5)
    _assert_same(TFServingClient(rest, batch_size=16).translate(sentences), expected)
    grpc_transport = GrpcTransport(tiny_standin.grpc_target, "nmt", signature="translate",
                                   beam=2, alpha=0.5)
    # Only what is read comes back, not the export's n-best lists and attention.
    assert list(grpc_transport.request(["a"]).output_filter) == [
        "translations", "scores", "truncated"]
    try:
        _assert_same(TFServingClient(grpc_transport, batch_size=16).translate(sentences),
                     expected)
    finally:
        grpc_transport.close()


def test_served_export_at_another_beam_keeps_the_exports_alpha(tiny_standin, tiny_expected,
                                                               tiny_run, tiny_export):
    """--beam without --alpha: the SavedModel's translate signature reads the client's alpha
    -1 as its own (here the config's 1.0); at -1 itself the scores would be far off."""
    from keras_nmt.decoding.keras_translator import Translator

    sentences, _ = tiny_expected
    alpha = json.loads((onnx_files(tiny_export) / "nmt.onnx.json").read_text("utf-8"))["alpha"]
    expected = Translator.from_run_dir(tiny_run).translate(sentences, beam_size=2, alpha=alpha)
    stdout = io.StringIO()
    assert client_cli.main(["--url", tiny_standin.rest_url, "--beam", "2", "--scores"],
                           stdin=io.BytesIO(("\n".join(sentences) + "\n").encode()),
                           stdout=stdout, stderr=io.StringIO()) == 0
    got = [line.split("\t", 1) for line in stdout.getvalue().split("\n")[:-1]]
    assert [text for _, text in got] == [t.text for t in expected]
    np.testing.assert_allclose([float(score) for score, _ in got],
                               [t.score for t in expected], atol=1e-4)


def test_onnx_translate_equals_translator_without_tensorflow(tiny_export, tiny_expected):
    sentences, expected = tiny_expected
    api_call = (  # the Python API too: tokens and unrounded scores
        "from keras_nmt.decoding.onnx_translator import OnnxTranslator\n"
        f"lines = json.loads({json.dumps(json.dumps(sentences))})\n"
        f"results = OnnxTranslator.from_export_dir({str(tiny_export)!r}).translate(lines)\n"
        "print(json.dumps([[r.tokens, r.score, r.truncated] for r in results]), file=sys.stderr)\n"
    )
    out, stderr, heavy = onnx_translate_probe(
        [str(tiny_export), "--batch-size", "8", "--quiet"], sentences, then=api_call
    )
    assert heavy == []
    assert stderr[0].startswith("onnx_translate: warning: 1 sentence(s) longer than 100 tokens")
    api = json.loads(stderr[1])
    assert [truncated for _, _, truncated in api] == [t.truncated for t in expected]
    np.testing.assert_allclose([s for _, s, _ in api], [t.score for t in expected], atol=1e-4)
    # The same tokens, except where two hypotheses score the same to rounding: the barely
    # trained model repeats ".", and at alpha 1 some lengths tie to 1e-6 (onnxruntime and
    # TensorFlow round differently; the scores above agree). The command prints the API's.
    differ = [i for i, ((tokens, _, _), t) in enumerate(zip(api, expected)) if tuple(tokens) != t.tokens]
    assert len(differ) <= 2, differ
    assert [t.text for i, t in enumerate(expected) if i not in differ] == [
        line for i, line in enumerate(out) if i not in differ]


def test_the_savedmodel_gives_each_lines_confidence(tiny_standin, tiny_expected, tiny_run,
                                                    tiny_export):
    """serving_default's ``confidence`` (TF Serving users' only way to it) is the line's
    figure the Python API gives: exp of the mean log-probability of all its sentences'
    tokens; NaN for a line without tokens, never a made-up number. Its ``words`` and
    ``word_confidence`` are the API's words and their figures, a line's sentences' one
    after the other, padded with "" and 0."""
    import urllib.request

    from keras_nmt.decoding.keras_translator import Translator

    sentences, expected = tiny_expected
    with urllib.request.urlopen(urllib.request.Request(
            f"{tiny_standin.rest_url}/v1/models/nmt:predict",
            json.dumps({"inputs": {"sentences": sentences}}).encode(),
            {"Content-Type": "application/json"}), timeout=120) as answer:
        outputs = json.loads(answer.read())["outputs"]
    metadata = json.loads((onnx_files(tiny_export) / "nmt.onnx.json").read_text("utf-8"))
    ours = Translator.from_run_dir(tiny_run).translate(
        sentences, beam_size=metadata["beam_size"], alpha=metadata["alpha"], confidence=True)
    assert [t.text for t in ours] == [t.text for t in expected] == outputs["translations"]
    for got, translation in zip(outputs["confidence"], ours):
        if translation.confidence is None:
            assert math.isnan(got), translation
        else:
            assert got == pytest.approx(translation.confidence.sentence, abs=1e-4)
    assert sum(math.isnan(got) for got in outputs["confidence"]) == 2  # the empty lines
    assert sum(len(t.sentences) > 1 for t in ours) >= 2  # lines joined from sentences
    width = max(len(t.confidence.words) for t in ours if t.confidence is not None)
    assert {len(row) for row in outputs["words"]} == {width}
    for words, figures, translation in zip(outputs["words"], outputs["word_confidence"], ours):
        found = translation.confidence
        count = 0 if found is None else len(found.words)
        assert words[count:] == [""] * (width - count) and figures[count:] == [0.0] * (width - count)
        if found is not None:
            assert tuple(words[:count]) == found.words == tuple(translation.text.split())
            np.testing.assert_allclose(figures[:count], found.word_confidences, rtol=1e-4)
    for figures, translation in zip(outputs["sentence_confidence"], ours):
        parts = ([] if translation.confidence is None else
                 [translation.confidence] if not translation.sentences else
                 [part.confidence for part in translation.sentences if part.confidence])
        assert figures[len(parts):] == [0.0] * (len(figures) - len(parts))
        np.testing.assert_allclose(figures[:len(parts)], [c.sentence for c in parts], rtol=1e-4)
    # Words of several tokens get their least sure token's figure, not the mean.
    assert any(len(t.tokens) > len(t.text.split()) for t in ours)
    # tfserving-client --confidence reads it: the line's figure and its words'.
    client = TFServingClient(RestTransport(tiny_standin.rest_url, "nmt", confidence=True),
                             batch_size=8)
    for got, translation in zip(client.translate(sentences), ours):
        assert (got.confidence is None) == (translation.confidence is None)
        if got.confidence is not None:
            assert got.confidence.sentence == pytest.approx(translation.confidence.sentence,
                                                            abs=1e-4)
            assert got.confidence.words == translation.confidence.words
            assert len(got.sentences) == len([p for p in translation.sentences if p.confidence])
            np.testing.assert_allclose(got.confidence.word_confidences,
                                       translation.confidence.word_confidences, rtol=1e-4)
