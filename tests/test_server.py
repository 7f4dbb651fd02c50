"""``keras-nmt serve``: a real server on loopback (port 0) over the tiny exports.

What it answers must be what :class:`OnnxTranslator` gives for the same sentences, in
TF Serving's REST formats (``keras-nmt tfserving-client`` works against it) and in the
plain JSON API; requests that arrive together share a batch; a full queue answers 503 at
once; bad requests get a 4xx with a one-line reason (and a fuzz run finds no 5xx); SIGTERM
and SIGINT stop it gracefully; and it runs without the training install's packages.
"""

from __future__ import annotations

import base64
import http.client
import io
import json
import pathlib
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.parse

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from support import ServerThread, call, call_raw, child_env, edit_json, onnx_files
from keras_nmt.cli import serve as serve_cli
from keras_nmt.serving.onnx_translator import OnnxTranslator
from keras_nmt.serving.registry import Registry
from keras_nmt.serving.tfserving_rest import float32_json

LINES = [
    "the cat sat on the mat .",
    "",
    "   \t ",
    "a dog runs .",
    "the 🐈 sat 👍🏽 on ZWJ 👨‍👩‍👧",
    "e\u0301te\u0301 cafe\u0301",
    "cat " * 150,  # beyond max_source_len (100): truncated
    "القط جلس",
    "the\x00cat\x07sat\x1b[31m",
]


@pytest.fixture(scope="module")
def registry(tiny_export):
    return Registry.from_export_dir(tiny_export)


@pytest.fixture(scope="module")
def translator(tiny_export):
    return OnnxTranslator.from_export_dir(tiny_export)


@pytest.fixture(scope="module")
def served(registry):
    with ServerThread(registry, batch_size=8) as server:
        yield server


def _float32(values):
    return np.asarray(values, np.float32)


def _expected(translator, lines, **search):
    return translator.translate(lines, nbest=2, batch_size=8, **search)


# ---- TF Serving's REST API -------------------------------------------------------------

@pytest.mark.parametrize("form", ["instances", "inputs", "bare", "b64"])
def test_predict_equals_the_onnx_translator(served, translator, form):
    expected = _expected(translator, LINES)
    body = {"instances": LINES} if form == "instances" else {
        "inputs": {"sentences": LINES}} if form == "inputs" else {"inputs": LINES}
    if form == "b64":
        body = {"instances": [{"sentences": {"b64": base64.b64encode(line.encode()).decode()}}
                              for line in LINES]}
    status, answer = served.call("/v1/models/nmt:predict", body)
    assert status == 200, answer
    if "predictions" in answer:
        columns = {key: [row[key] for row in answer["predictions"]]
                   for key in answer["predictions"][0]}
    else:
        columns = answer["outputs"]
    assert sorted(columns) == ["nbest_scores", "nbest_translations", "scores", "translations",
                               "truncated"]
    assert columns["translations"] == [t.text for t in expected]
    assert columns["truncated"] == [t.truncated for t in expected] and columns["truncated"][6] == 50
    np.testing.assert_array_equal(_float32(columns["scores"]), _float32([t.score for t in expected]))
    assert columns["nbest_translations"] == [
        [h.text for h in t.hypotheses] + [""] * (2 - len(t.hypotheses)) for t in expected]
    # An empty line: "" scored 0, its second slot unfilled (-Infinity), as the SavedModel.
    assert columns["nbest_translations"][1] == ["", ""]
    assert columns["nbest_scores"][1] == [0.0, -np.inf]
    np.testing.assert_array_equal(_float32([row[0] for row in columns["nbest_scores"]]),
                                  _float32([t.score for t in expected]))


def test_translate_signature_takes_beam_and_alpha(served, translator):
    expected = _expected(translator, LINES, beam_size=3, alpha=0.5)
    body = {"signature_name": "translate",
            "inputs": {"sentences": LINES, "beam_size": 3, "alpha": 0.5}}
    status, answer = served.call("/v1/models/nmt/versions/1:predict", body)
    assert status == 200, answer
    assert answer["outputs"]["translations"] == [t.text for t in expected]
    np.testing.assert_array_equal(_float32(answer["outputs"]["scores"]),
                                  _float32([t.score for t in expected]))
    status, answer = served.call("/v1/models/nmt:predict", {
        "signature_name": "translate", "instances": [{"sentences": "a", "beam_size": 3}]})
    assert status == 400 and "columnar" in answer["error"]


def test_tfserving_client_works_against_the_server(served, translator):
    from keras_nmt.cli import tfserving_client as client_cli
    from keras_nmt.serving.tfserving_client import RestTransport, TFServingClient

    expected = translator.translate(LINES, batch_size=8)
    for form in ("instances", "inputs"):
        client = TFServingClient(RestTransport(served.url, "nmt", form=form), batch_size=3)
        got = client.translate(LINES)
        assert [(p.text, p.truncated) for p in got] == [(t.text, t.truncated) for t in expected]
        np.testing.assert_array_equal(_float32([p.score for p in got]),
                                      _float32([t.score for t in expected]))
    stdout, stderr = io.StringIO(), io.StringIO()
    lines = [line for line in LINES if "\n" not in line]
    code = client_cli.main(
        ["--url", served.url, "--name", "nmt", "--model-version", "1", "--form", "inputs",
         "--beam", "2", "--alpha", "0.5", "--batch-size", "4"],
        stdin=io.BytesIO(("\n".join(lines) + "\n").encode()), stdout=stdout, stderr=stderr,
    )
    assert code == 0, stderr.getvalue()
    assert stdout.getvalue().splitlines() == [
        t.text for t in translator.translate(lines, beam_size=2, alpha=0.5)]


def test_tfserving_client_beam_without_alpha_keeps_the_exports_alpha(tiny_export, tmp_path):
    """--beam alone: the client sends alpha -1, which the server (as the SavedModel's
    ``translate`` signature) reads as the export's alpha; here 0.3, not the config's 1.0."""
    from keras_nmt.cli import tfserving_client as client_cli

    export = tmp_path / "export"
    shutil.copytree(tiny_export, export)
    metadata = onnx_files(export) / "nmt.onnx.json"
    edit_json(metadata, alpha=0.3)
    tuned = OnnxTranslator.from_export_dir(export)
    assert tuned.alpha == pytest.approx(0.3)
    lines = ["the cat sat on the mat .", "a dog runs .", "the cat"]
    with ServerThread(Registry.from_export_dir(export)) as server:
        stdout, stderr = io.StringIO(), io.StringIO()
        code = client_cli.main(["--url", server.url, "--beam", "2", "--scores"],
                               stdin=io.BytesIO(("\n".join(lines) + "\n").encode()),
                               stdout=stdout, stderr=stderr)
        status, answer = server.call("/v1/models/nmt:predict", {
            "signature_name": "translate",
            "inputs": {"sentences": lines, "beam_size": 2, "alpha": -1}})
    assert code == 0, stderr.getvalue()
    got = [line.split("\t") for line in stdout.getvalue().splitlines()]
    expected = tuned.translate(lines, beam_size=2, alpha=0.3)
    assert [text for _, text in got] == [t.text for t in expected]
    np.testing.assert_allclose([float(score) for score, _ in got],
                               [t.score for t in expected], atol=1e-4)
    # At the old fixed alpha of 1.0 the translations differ: the test tells the two apart.
    at_one = tuned.translate(lines, beam_size=2, alpha=1.0)
    assert any(a.text != b.text or abs(a.score - b.score) > 1e-3
               for a, b in zip(at_one, expected))
    assert status == 200 and answer["outputs"]["translations"] == [t.text for t in expected]


def test_status_metadata_health_models_stats(served):
    assert served.call("/v1/models/nmt") == (200, {"model_version_status": [
        {"version": "1", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}]})
    assert served.call("/v1/models/nmt/versions/1")[0] == 200
    status, metadata = served.call("/v1/models/nmt/metadata")
    assert status == 200 and metadata["model_spec"] == {
        "name": "nmt", "signature_name": "", "version": "1"}
    signatures = metadata["metadata"]["signature_def"]["signature_def"]
    assert sorted(signatures) == ["serving_default", "translate"]
    assert sorted(signatures["translate"]["inputs"]) == ["alpha", "beam_size", "sentences"]
    assert signatures["serving_default"]["outputs"]["nbest_scores"]["tensor_shape"]["dim"] == [
        {"size": "-1", "name": ""}, {"size": "2", "name": ""}]
    assert served.call("/health") == (200, {"status": "serving", "models": {"nmt": [1]}})
    status, models = served.call("/models")
    assert status == 200 and models["models"][0] == {
        "name": "nmt", "version": 1, "src": "en", "tgt": "fr", "beam": 5, "alpha": 1.0,
        "max_nbest": 2, "max_source_len": 100, "int8": False, "shortlist": None,
        "alignment": True, "split_sentences": True}
    status, stats = served.call("/stats")
    assert status == 200 and stats["batch_size"] == 8 and stats["waiting"] == 0
    for path, reason in [("/v1/models/other", "Servable not found for request: Latest(other)"),
                         ("/v1/models/nmt/versions/2/metadata",
                          "Servable not found for request: Specific(nmt, 2)"),
                         ("/v2/nowhere", "Malformed request: GET /v2/nowhere")]:
        assert served.call(path) == (404, {"error": reason})


# ---- the JSON API ----------------------------------------------------------------------

def test_json_api_nbest_scores_and_tokens(served, translator):
    expected = translator.translate(LINES, beam_size=4, alpha=0.5, nbest=2, batch_size=8)
    status, answer = served.call("/translate", {"text": LINES, "beam": 4, "alpha": 0.5,
                                                "nbest": 2})
    assert status == 200, answer
    assert (answer["model"], answer["version"], answer["beam"], answer["alpha"]) == (
        "nmt", 1, 4, 0.5)
    assert [t["text"] for t in answer["translations"]] == [t.text for t in expected]
    assert [[h["tokens"] for h in t["nbest"]] for t in answer["translations"]] == [
        [list(h.tokens) for h in t.hypotheses] for t in expected]
    np.testing.assert_array_equal(
        _float32([h["score"] for t in answer["translations"] for h in t["nbest"]]),
        _float32([h.score for t in expected for h in t.hypotheses]))
    # The defaults: the export's beam (5) and alpha, the best hypothesis only.
    status, answer = served.call("/translate", {"text": ["a dog runs ."]})
    [t] = translator.translate(["a dog runs ."])
    assert status == 200 and answer["beam"] == 5
    score = float32_json(t.score)  # the shortest decimal of the float32, as TF Serving's
    assert str(score) == str(np.float32(t.score))
    assert answer["translations"] == [{"text": t.text, "score": score, "truncated": 0,
                                       "nbest": [{"text": t.text, "tokens": list(t.tokens),
                                                  "score": score}]}]


def test_json_api_alignment_of_the_best_translation(served, translator):
    lines = ["a dog runs .", "", "the cat sleeps near the big house ."]
    expected = translator.translate(lines, beam_size=3, align=True)
    status, answer = served.call("/translate", {"text": lines, "beam": 3, "alignment": True})
    assert status == 200, answer
    assert answer["translations"][1]["alignment"] is None  # an empty line
    for t, got in zip(expected, answer["translations"]):
        if t.alignment is None:
            continue
        alignment = got["alignment"]
        assert alignment["source_tokens"] == list(t.alignment.source_tokens)
        assert alignment["target_tokens"] == list(t.tokens) == got["nbest"][0]["tokens"]
        attention = _float32(alignment["attention"])
        assert attention.shape == (len(t.tokens) + 1, len(t.alignment.source_tokens) + 1)
        np.testing.assert_array_equal(attention, t.alignment.attention)
        np.testing.assert_array_equal(_float32(alignment["token_logprobs"]),
                                      t.alignment.token_logprobs)
    assert answer["translations"][0]["alignment"]["source_tokens"] == ["a", "dog", "runs", "."]
    # Without the key, nothing changes.
    status, answer = served.call("/translate", {"text": lines, "beam": 3})
    assert status == 200 and "alignment" not in answer["translations"][0]


def test_a_line_of_sentences_is_split_as_the_export_says_unless_told(served, translator,
                                                                     tiny_run):
    lines = ["the cat sat on the mat . A dog runs near the house .", "a dog runs ."]
    split = translator.translate(lines, beam_size=3, nbest=2, align=True)
    whole = translator.translate(lines, beam_size=3, nbest=2, align=True, split_sentences=False)
    assert translator.split_sentences and len(split[0].sentences) == 2 and not split[1].sentences
    for body, expected in (({}, split), ({"split_sentences": False}, whole)):
        status, answer = served.call("/translate", {"text": lines, "beam": 3, "nbest": 2,
                                                    "alignment": True, **body})
        assert status == 200, answer
        got = answer["translations"]
        assert [t["text"] for t in got] == [t.text for t in expected]
        assert [[h["tokens"] for h in t["nbest"]] for t in got] == [
            [list(h.tokens) for h in t.hypotheses] for t in expected]
        np.testing.assert_array_equal(_float32([t["score"] for t in got]),
                                      _float32([t.score for t in expected]))
        alignment = got[0]["alignment"]
        assert alignment["source_tokens"] == list(expected[0].alignment.source_tokens)
        assert _float32(alignment["attention"]).shape == (
            len(alignment["target_tokens"]) + 1, len(alignment["source_tokens"]) + 1)
    # Split: EOS between the sentences on both sides of the matrix, block-diagonal.
    pair, first = split[0].alignment, split[0].sentences[0]
    assert pair.source_tokens == ("the", "cat", "sat", "on", "the", "mat", ".", "</s>", "A",
                                  "dog", "runs", "near", "the", "house", ".")
    assert not pair.attention[: len(first.tokens) + 1, 8:].any()
    assert not pair.attention[len(first.tokens) + 1:, :8].any()
    # TF Serving's predict splits as the export's SavedModel does.
    status, answer = served.call("/v1/models/nmt:predict", {"instances": lines})
    assert [row["translations"] for row in answer["predictions"]] == [
        t.text for t in translator.translate(lines)]
    # And the Python Translator agrees (scores; the barely trained model's tied hypotheses
    # may differ between onnxruntime and TensorFlow).
    from keras_nmt.translator import Translator

    reference = Translator.from_run_dir(tiny_run).translate(lines, beam_size=3)
    assert [len(t.sentences) for t in reference] == [2, 0]
    np.testing.assert_allclose([t.score for t in split], [t.score for t in reference], atol=1e-4)


def test_alignment_of_an_export_without_the_forced_model_is_a_400(tiny_export, tmp_path):
    copy = tmp_path / "export"
    shutil.copytree(tiny_export, copy)
    metadata = copy / "nmt" / "1" / "onnx" / "nmt.onnx.json"
    values = json.loads(metadata.read_text(encoding="utf-8"))
    del values["forced"]
    metadata.write_text(json.dumps(values), encoding="utf-8")
    with ServerThread(Registry.from_export_dir(copy)) as server:
        assert server.call("/models")[1]["models"][0]["alignment"] is False
        status, answer = server.call("/translate", {"text": ["a"], "alignment": True})
        assert status == 400 and answer["error"] == (
            "model 'nmt' version 1 has no force-decoding model (written by an older "
            "keras-nmt): export it again with --onnx for alignments")
        assert server.call("/translate", {"text": ["a"]})[0] == 200


# ---- bad requests ----------------------------------------------------------------------

BAD = [  # path, body, status, a phrase of the reason
    ("/translate", b"\xff\xfe{}", 400, "not UTF-8"),
    ("/translate", b"{\"text\": [", 400, "JSON Parse error"),
    ("/translate", b"[" * 100_000 + b"]" * 100_000, 400, "JSON Parse error"),
    ("/translate", ["a"], 400, "JSON object"),
    ("/translate", {"txt": ["a"]}, 400, "unknown key 'txt'"),
    ("/translate", {"text": "a"}, 400, "must be a list of strings"),
    ("/translate", {"text": [1]}, 400, "text[0]: expected a string"),
    ("/translate", {"text": []}, 400, "no sentences"),
    ("/translate", {"text": ["a"] * 257}, 400, "at most 256"),
    ("/translate", {"text": ["a"], "beam": 0}, 400, "between 1 and 32"),
    ("/translate", {"text": ["a"], "beam": -3}, 400, "between 1 and 32"),
    ("/translate", {"text": ["a"], "beam": 10**40}, 400, "between 1 and 32"),
    ("/translate", {"text": ["a"], "beam": 2.0}, 400, "beam must be an integer"),
    ("/translate", {"text": ["a"], "beam": True}, 400, "beam must be an integer"),
    ("/translate", {"text": ["a"], "beam": 1, "nbest": 2}, 400, "cannot exceed the beam"),
    ("/translate", {"text": ["a"], "nbest": 3}, 400, "between 1 and 2"),
    ("/translate", {"text": ["a"], "alpha": -1}, 400, "alpha must be between"),
    ("/translate", b'{"text": ["a"], "alpha": NaN}', 400, "finite"),
    ("/translate", {"text": ["a"], "alpha": 1e308 * 10}, 400, "finite"),
    ("/translate", {"text": ["a"], "model": "other"}, 404, "Servable not found"),
    ("/translate", {"text": ["a"], "model": "x\ny\u2028"}, 404, "Latest(x\\ny\\u2028)"),
    ("/translate", {"text": ["a"], "version": 7}, 404, "Specific(nmt, 7)"),
    ("/translate", {"text": ["a"], "no_unk": "yes"}, 400, "true or false"),
    ("/translate", {"text": ["a"], "alignment": 1}, 400, "alignment must be true or false"),
    ("/translate", {"text": ["a"], "split_sentences": None}, 400,
     "split_sentences must be true or false"),
    ("/v1/models/nmt:predict", {"instances": ["a"], "inputs": ["a"]}, 400, "either"),
    ("/v1/models/nmt:predict", {"instances": "a"}, 400, "must be a list"),
    ("/v1/models/nmt:predict", {"inputs": {"sentences": ["a"], "beam_size": 2}}, 400,
     "exactly the inputs"),
    ("/v1/models/nmt:predict", {"signature_name": "translate_ids", "instances": ["a"]}, 400,
     'Serving signature name: "translate_ids" not found'),
    ("/v1/models/nmt:predict", {"instances": [{"b64": "***"}]}, 400, "base64"),
    ("/v1/models/nmt:predict", {"instances": [{"b64": base64.b64encode(b"\xff").decode()}]},
     400, "not UTF-8"),
    ("/v1/models/nmt:predict", {"signature_name": "translate", "inputs": {
        "sentences": ["a"], "beam_size": 100, "alpha": 1.0}}, 400, "between 1 and 32"),
    ("/v1/models/nmt:predict", {"signature_name": "translate", "inputs": {
        "sentences": ["a"], "beam_size": 1, "alpha": "x"}}, 400, "alpha must be a number"),
    ("/v1/models/nmt/versions/3:predict", {"instances": ["a"]}, 404, "Specific(nmt, 3)"),
    ("/v1/models/nmt/versions/99999999999999999999999:predict", {"instances": ["a"]}, 404,
     "Servable not found"),
    ("/v1/models/nmt/labels/stable:predict", {"instances": ["a"]}, 404, "label: stable"),
    ("/v1/models/nmt:classify", {"instances": ["a"]}, 404, "Malformed request"),
    ("/translate", b"x" * ((1 << 20) + 1), 413, "larger than 1048576 bytes"),
]


@pytest.mark.parametrize("path, body, status, reason", BAD,
                         ids=[f"{i}-{case[3][:20]}" for i, case in enumerate(BAD)])
def test_bad_requests_get_a_4xx_with_one_line(served, path, body, status, reason):
    got, answer = served.call(path, body)
    assert (got, list(answer)) == (status, ["error"]), answer
    assert reason in answer["error"] and "\n" not in answer["error"]


def test_wrong_method_is_405(served):
    got, answer = served.call("/translate")
    assert got == 405 and "\n" not in answer["error"]


PATHS = ["/translate", "/v1/models/nmt:predict", "/v1/models/nmt/versions/1:predict",
         "/v1/models/nmt", "/v1/models/nmt/metadata", "/health", "/stats", "/models", "/",
         "/static/page.js"]
# Random paths under each prefix; up to 300 characters (file names longer than the file
# system allows included).
RANDOM_PATHS = st.sampled_from(["/", "/static/", "/v1/models/", "/v1/models/nmt/versions/"]).flatmap(
    lambda prefix: st.text(max_size=300).map(lambda rest: prefix + rest))
KEYS = ["text", "beam", "alpha", "nbest", "model", "version", "no_unk", "instances", "inputs",
        "signature_name", "sentences", "beam_size", "b64"]
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
)
BODIES = (JSON.map(lambda value: json.dumps(value).encode())
          | st.binary(max_size=64)
          | st.fixed_dictionaries({}, optional={key: JSON for key in KEYS}).map(
              lambda value: json.dumps(value).encode()))


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(method=st.sampled_from(["GET", "POST", "PUT", "DELETE"]),
       path=st.sampled_from(PATHS) | RANDOM_PATHS,
       body=BODIES)
def test_fuzzed_requests_never_get_a_5xx(served, method, path, body):
    quoted = urllib.parse.quote(path, safe="/:")
    status, kind, answer = call_raw(served.port, quoted, body, method=method)
    assert status < 500, (status, answer)
    if status >= 400:  # every refusal: {"error": one line}
        assert kind.startswith("application/json")
        reason = json.loads(answer.decode("utf-8"))
        assert list(reason) == ["error"] and "\n" not in reason["error"]


def test_fuzzed_server_still_answers_correctly(served, translator):
    # After the fuzz run above (same module, same server): the right answer still.
    status, answer = served.call("/v1/models/nmt:predict", {"instances": ["a dog runs ."]})
    assert status == 200
    assert answer["predictions"][0]["translations"] == translator.translate(["a dog runs ."])[0].text


# ---- batching and the bounded queue ----------------------------------------------------

def test_requests_that_arrive_together_share_one_batch(registry, translator):
    lines = ["a dog runs .", "the cat sat on the mat .", "a cat .", "the dog sat ."]
    answers: list = [None] * len(lines)
    # The batch closes when it holds 4 sentences, long before the 10 s wait.
    with ServerThread(registry, batch_size=4, max_wait=10.0) as server:
        def ask(i):
            answers[i] = server.call("/translate", {"text": [lines[i]], "nbest": 2})

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(lines))]
        start = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert time.monotonic() - start < 8
        stats = server.call("/stats")[1]
    assert (stats["requests"], stats["batches"], stats["largest_batch"]) == (4, 1, 4)
    expected = translator.translate(lines, nbest=2, batch_size=4)
    assert [a[1]["translations"][0]["text"] for a in answers] == [t.text for t in expected]
    np.testing.assert_allclose([a[1]["translations"][0]["score"] for a in answers],
                               [t.score for t in expected], rtol=1e-5)


def test_full_queue_answers_503_at_once(registry, translator):
    options = dict(batch_size=64, max_wait=3.0, queue_size=4, max_sentences=4)
    with ServerThread(registry, **options) as server:
        held = []
        waiting = threading.Thread(target=lambda: held.append(
            server.call("/translate", {"text": ["a dog runs ."] * 4})))
        waiting.start()
        deadline = time.monotonic() + 10
        while server.call("/stats")[1]["waiting"] < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        start = time.monotonic()
        status, answer = server.call("/translate", {"text": ["a cat ."]})
        elapsed = time.monotonic() - start
        assert status == 503 and "busy" in answer["error"], answer
        assert elapsed < 0.5, elapsed
        status, answer = server.call("/v1/models/nmt:predict", {"instances": ["a cat ."]})
        assert status == 503 and answer["error"].startswith("the server is busy")
        waiting.join(30)
        stats = server.call("/stats")[1]
    assert held[0][0] == 200
    assert [t["text"] for t in held[0][1]["translations"]] == [
        translator.translate(["a dog runs ."])[0].text] * 4
    assert (stats["rejected"], stats["batches"]) == (2, 1)


# ---- several models, versions, labels, int8 --------------------------------------------

def test_models_config_serves_several_models_versions_and_labels(tiny_export,
                                                                 tiny_selecting_export, tmp_path):
    shutil.copytree(tiny_export / "nmt" / "1", tmp_path / "nmt" / "1")
    shutil.copytree(tiny_export / "nmt" / "1", tmp_path / "nmt" / "2")
    (tmp_path / "models.config").write_text(f"""
model_config_list {{
  config {{ name: "nmt" base_path: "/models/nmt" model_platform: "tensorflow"
           model_version_policy {{ all {{}} }}
           version_labels {{ key: "stable" value: 1 }} }}
  config {{ name: "selecting" base_path: "{tiny_selecting_export / 'nmt'}"
           logging_config {{ sampling_config {{ sampling_rate: 0.5 }} }} }}
}}
""", "utf-8")
    registry = Registry.from_export_dir(tmp_path)
    selecting = OnnxTranslator.from_export_dir(tiny_selecting_export)
    assert selecting.shortlist == (5, 2)
    with ServerThread(registry) as server:
        assert server.call("/health")[1]["models"] == {"nmt": [1, 2], "selecting": [1]}
        for path in ("/v1/models/nmt/labels/stable:predict", "/v1/models/nmt/versions/2:predict"):
            status, answer = server.call(path, {"instances": ["a dog runs ."]})
            assert status == 200, answer
        status, answer = server.call("/translate", {"text": LINES, "model": "selecting"})
        assert status == 200, answer
        assert [t["text"] for t in answer["translations"]] == [
            t.text for t in selecting.translate(LINES)]
        status, answer = server.call("/translate", {"text": ["a"]})
        assert status == 400 and "name the model: nmt, selecting" in answer["error"]
    int8 = Registry.from_export_dir(tiny_selecting_export, int8=True)
    expected = OnnxTranslator.from_export_dir(tiny_selecting_export, int8=True).translate(LINES)
    with ServerThread(int8) as server:
        assert server.call("/models")[1]["models"][0]["int8"] is True
        status, answer = server.call("/translate", {"text": LINES})
        assert [t["text"] for t in answer["translations"]] == [t.text for t in expected]


def test_models_config_is_read_as_tf_serving_reads_it(tmp_path):
    from google.protobuf import text_format
    from tensorflow_serving.config import model_server_config_pb2

    from keras_nmt.export.serving_files import read_models_config

    text = """# two models
model_config_list {
  config { name: "a" base_path: "/models/a" model_platform: "tensorflow"
           model_version_policy { specific { versions: 1 versions: 3 } }
           version_labels { key: "canary" value: 3 } version_labels { key: "stable" value: 1 } }
  config { name: "b" base_path: "relative/b" model_version_policy { latest { num_versions: 2 } } }
  config { name: "c" base_path: "/elsewhere/c" model_type: TENSORFLOW }
}
"""
    (tmp_path / "models.config").write_text(text, "utf-8")
    theirs = model_server_config_pb2.ModelServerConfig()
    text_format.Parse(text, theirs)
    ours = read_models_config(tmp_path / "models.config")
    assert [e.name for e in ours] == [c.name for c in theirs.model_config_list.config]
    assert [e.policy for e in ours] == ["specific", "latest", "latest"]
    assert ours[0].specific == (1, 3) and ours[1].count == 2 and ours[2].count == 1
    assert ours[0].labels == dict(theirs.model_config_list.config[0].version_labels)
    # /models/... is where SERVING.md's docker commands mount the export directory.
    assert [e.base_path for e in ours] == [tmp_path / "a", tmp_path / "relative" / "b",
                                           pathlib.Path("/elsewhere/c")]


# ---- the command line ------------------------------------------------------------------

@pytest.mark.parametrize("args, reason", [
    (["--queue-size", "10", "--max-sentences", "20"], "cannot exceed the queue size"),
    (["--name", "missing"], "holds no exported version"),
    (["--model-config-file", "nowhere.config"], "cannot read nowhere.config"),
])
def test_command_errors_are_one_line(tiny_export, args, reason, capsys):
    assert serve_cli.main([str(tiny_export), "--port", "0", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("keras-nmt serve: error:") and reason in err


def test_port_in_use_is_one_line(tiny_export, capsys):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert serve_cli.main([str(tiny_export), "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"keras-nmt serve: error: cannot listen on 127.0.0.1:{port}")
    assert err.count("\n") == 1


SERVE_WITHOUT_TRAINING_PACKAGES = """
import json, sys
from keras_nmt.cli import TRAINING_PACKAGES
for name in TRAINING_PACKAGES: sys.modules[name] = None
from keras_nmt.cli import main
code = main(["serve", *sys.argv[1:]])
heavy = sorted(m for m, module in sys.modules.items()
               if module is not None and m.split(".")[0] in ("tensorflow", "keras"))
print(json.dumps({"code": code, "heavy": heavy}), file=sys.stderr, flush=True)
sys.exit(code)
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_stops_gracefully_without_tensorflow(tiny_export, translator, signum):
    """The command in a fresh interpreter where the training packages cannot be
    imported: it serves; a signal while a request waits for its batch still answers
    that request; then it exits 0, having loaded no TensorFlow or Keras."""
    child = subprocess.Popen(
        [sys.executable, "-c", SERVE_WITHOUT_TRAINING_PACKAGES, str(tiny_export), "--port", "0",
         "--max-wait-ms", "3000", "--batch-size", "64"],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=child_env(), text=True,
    )
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in child.stderr], daemon=True).start()
    try:
        first = lines.get(timeout=60)
        assert first.startswith("keras-nmt serve: serving nmt (version 1) on http://127.0.0.1:"), first
        port = int(first.rsplit(":", 1)[1])
        held = []
        request = threading.Thread(target=lambda: held.append(
            call(port, "/translate", {"text": ["a dog runs ."]})))
        request.start()
        deadline = time.monotonic() + 10
        while call(port, "/stats")[1]["waiting"] < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        child.send_signal(signum)
        request.join(30)
        assert child.wait(30) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert held[0] == (200, held[0][1]) and held[0][1]["translations"][0]["text"] == (
        translator.translate(["a dog runs ."])[0].text)
    rest = []
    while not lines.empty():
        rest.append(lines.get())
    assert rest[0] == "keras-nmt serve: stopped\n", rest
    assert json.loads(rest[1]) == {"code": 0, "heavy": []}


# ---- the page at / ----------------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


def headless_chromium():
    """Debian's Chromium driven by selenium through Debian's chromedriver (no download)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=900,700", "--no-proxy-server"):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def test_page_files_are_in_the_package_and_fetch_nothing_from_elsewhere(served):
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
    try:
        for path, kind in (("/", "text/html"), ("/static/page.js", "javascript"),
                           ("/static/page.css", "text/css")):
            connection.request("GET", path)
            response = connection.getresponse()
            text = response.read().decode("utf-8")
            assert response.status == 200 and kind in response.getheader("Content-Type")
            assert "http://" not in text and "https://" not in text, path  # offline: no CDN
    finally:
        connection.close()
    for path in ("/static/../server.py", "/static/server.py", "/static/" + "a" * 5000,
                 "/static/%00", "/static/", "/static/page.js/x"):
        status, answer = served.call(path)
        assert status == 404 and "\n" not in answer["error"], (path, answer)


@pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER),
                    reason="needs Chromium and chromedriver (apt-get install chromium chromium-driver)")
def test_page_translates_in_a_headless_browser(served, translator, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    sentence = "a dog runs ."
    status, answer = served.call("/translate", {"text": [sentence], "beam": 5, "nbest": 2})
    expected = answer["translations"][0]
    assert expected["text"] == translator.translate([sentence])[0].text
    driver = headless_chromium()
    try:
        driver.get(served.url + "/")
        wait = WebDriverWait(driver, 30)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#model option"))
        assert driver.find_element(By.ID, "beam").get_attribute("value") == "5"  # the export's
        nbest = driver.find_element(By.ID, "nbest")
        nbest.clear()
        nbest.send_keys("2")
        driver.find_element(By.ID, "text").send_keys(sentence)
        driver.find_element(By.ID, "translate").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".sentence .best"))
        assert driver.find_element(By.CSS_SELECTOR, ".sentence .source").text == sentence
        assert driver.find_element(By.CSS_SELECTOR, ".sentence .best").text == expected["text"]
        rows = driver.find_elements(By.CSS_SELECTOR, "table.nbest tbody tr")
        assert [(r.find_element(By.CSS_SELECTOR, ".hyp").text,
                 r.find_element(By.CSS_SELECTOR, ".score").text) for r in rows] == [
            (h["text"], f"{h['score']:.4f}") for h in expected["nbest"]]
        # The heat map (Fig. 3): a column per source token, a row per target token of the
        # best translation, EOS ("</s>") last on both, each cell the weight in grey.
        def texts(selector):
            return [e.get_attribute("textContent")
                    for e in driver.find_elements(By.CSS_SELECTOR, selector)]

        status, aligned = served.call("/translate", {"text": [sentence], "beam": 5,
                                                     "alignment": True})
        alignment = aligned["translations"][0]["alignment"]
        assert alignment["source_tokens"] == ["a", "dog", "runs", "."]
        assert texts("table.heatmap th.column-label") == alignment["source_tokens"] + ["</s>"]
        assert texts("table.heatmap th.row-label") == alignment["target_tokens"] + ["</s>"]
        assert alignment["target_tokens"] == expected["nbest"][0]["tokens"]
        cells = driver.find_elements(By.CSS_SELECTOR, "table.heatmap tbody tr")
        weights = [[float(c.get_attribute("data-weight"))
                    for c in row.find_elements(By.CSS_SELECTOR, "td.cell")] for row in cells]
        np.testing.assert_allclose(weights, alignment["attention"], rtol=0, atol=1e-7)
        strongest = driver.find_elements(By.CSS_SELECTOR, "table.heatmap td.cell")[
            int(np.argmax(alignment["attention"]))]
        grey = round(255 * float(np.max(alignment["attention"])))
        assert strongest.value_of_css_property("background-color") in (
            f"rgba({grey}, {grey}, {grey}, 1)", f"rgb({grey}, {grey}, {grey})")
        # A refusal shows the server's one-line reason.
        beam = driver.find_element(By.ID, "beam")
        beam.clear()
        beam.send_keys("1")
        driver.find_element(By.ID, "translate").click()
        wait.until(lambda d: d.find_element(By.ID, "status").text)
        assert driver.find_element(By.ID, "status").text == "nbest (2) cannot exceed the beam size (1)"
        assert driver.save_screenshot(str(tmp_path / "page.png"))
    finally:
        driver.quit()
    assert (tmp_path / "page.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
