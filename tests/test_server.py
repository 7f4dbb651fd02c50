"""``keras-nmt serve``: a real server on loopback (port 0) over the tiny exports.

What it answers must be what :class:`OnnxTranslator` gives for the same sentences, in
TF Serving's REST formats (``keras-nmt tfserving-client`` works against it) and in the
plain JSON API; requests that arrive together share a batch; a full queue answers 503 at
once; bad requests get a 4xx with a one-line reason (and a fuzz run finds no 5xx); SIGTERM
and SIGINT stop it gracefully; and it runs without the training install's packages.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import http.client
import io
import itertools
import json
import pathlib
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from support import (
    CHROMEDRIVER, CHROMIUM, ServerThread, call, call_raw, child_env, edit_json,
    headless_chromium, onnx_files, page_wait,
)
from keras_nmt.cli import serve as serve_cli
from keras_nmt.decoding.constraints import Glossary, LineConstraints
from keras_nmt.core.errors import RequestError
from keras_nmt.serving import client as tfserving_client, priority
from keras_nmt.serving.batcher import Batcher
from keras_nmt.serving.metrics import PATH as METRICS_PATH
from keras_nmt.decoding.onnx_translator import OnnxTranslator
from keras_nmt.serving.registry import Registry
from keras_nmt.serving.options import ServerOptions
from keras_nmt.serving.rest_formats import float32_json

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
    from keras_nmt.serving.client import RestTransport, TFServingClient

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
        "alignment": True, "split_sentences": True, "constraints": False, "confidence": True}
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


def _check_block(block, pair, source_start, target_start):
    """One sentence's block of an answered alignment against its ForcedPair: its tokens,
    where they begin among the line's, and its numbers to the 6 decimals answered."""
    assert (block["source_start"], block["target_start"]) == (source_start, target_start)
    assert block["source_tokens"] == list(pair.source_tokens)
    assert block["target_tokens"] == list(pair.target_tokens)
    attention = np.asarray(block["attention"])
    assert attention.shape == (len(pair.target_tokens) + 1, len(pair.source_tokens) + 1)
    np.testing.assert_allclose(attention, pair.attention, rtol=0, atol=6e-7)
    np.testing.assert_allclose(block["token_logprobs"], pair.token_logprobs, rtol=0, atol=6e-7)
    # Rounded by numpy to 6 decimals: no number carries more.
    assert all(len(repr(w).split(".")[-1]) <= 6 for row in block["attention"] for w in row)


def test_json_api_alignment_of_the_best_translation(served, translator):
    lines = ["a dog runs .", "", "the cat sleeps near the big house ."]
    expected = translator.translate(lines, beam_size=3, align=True)
    status, answer = served.call("/translate", {"text": lines, "beam": 3, "alignment": True})
    assert status == 200, answer
    assert answer["translations"][1]["alignment"] is None  # an empty line
    for t, got in zip(expected, answer["translations"]):
        if t.alignment is None:
            continue
        [block] = got["alignment"]["sentences"]  # a line of one sentence: one block
        _check_block(block, t.alignment, 0, 0)
        assert block["target_tokens"] == list(t.tokens) == got["nbest"][0]["tokens"]
    assert answer["translations"][0]["alignment"]["sentences"][0]["source_tokens"] == [
        "a", "dog", "runs", "."]
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
        # A block per sentence, each its own small matrix, placed among the line's tokens
        # (those of its best translation, nbest[0]["tokens"]).
        blocks = got[0]["alignment"]["sentences"]
        parts = expected[0].sentences or (expected[0],)
        assert len(blocks) == len(parts) == (2 if expected is split else 1)
        source_start = target_start = 0
        for block, part in zip(blocks, parts):
            _check_block(block, part.alignment, source_start, target_start)
            assert got[0]["nbest"][0]["tokens"][target_start:][:len(part.tokens)] == list(
                part.tokens)
            source_start += len(part.source_tokens)
            target_start += len(part.tokens)
        assert target_start == len(got[0]["nbest"][0]["tokens"])
    first, second = split[0].sentences
    assert first.alignment.source_tokens == ("the", "cat", "sat", "on", "the", "mat", ".")
    assert second.alignment.source_tokens == ("A", "dog", "runs", "near", "the", "house", ".")
    # TF Serving's predict splits as the export's SavedModel does.
    status, answer = served.call("/v1/models/nmt:predict", {"instances": lines})
    assert [row["translations"] for row in answer["predictions"]] == [
        t.text for t in translator.translate(lines)]
    # And the Python Translator agrees (scores; the barely trained model's tied hypotheses
    # may differ between onnxruntime and TensorFlow).
    from keras_nmt.decoding.keras_translator import Translator

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
    # The limits count sentences once the lines are split, and tokens, not lines.
    ("/translate", {"text": ["Tom is here. " * 300]}, 400,
     "more than 256 sentences in one request once its lines are split into sentences"),
    ("/translate", {"text": ["Tom is here. " * 200] * 2, "alignment": True}, 400,
     "at most 256 (--max-sentences)"),
    ("/v1/models/nmt:predict", {"instances": ["a", "Tom is here. " * 300]}, 400,
     "more than 256 sentences"),
    ("/translate", {"text": [". " * 65_537]}, 400,
     "131074 characters of text in one request; at most 131072 (--max-chars)"),
    ("/translate", {"text": ["cat " * 99] * 83}, 400,
     "more than 8192 source tokens in one request; at most 8192 (--max-tokens)"),
    ("/translate", {"text": ["cat " * 60] * 40, "alignment": True}, 400,
     "may hold 300120 cells; at most 262144 (--max-alignment-cells)"),
    # Constraints: read and bounded before anything else (test_server_constraints has the
    # rest, against an export with the constrained search), and refused by this one.
    ("/translate", {"text": ["a"], "constraints": [["le"]]}, 400,
     "has no constrained search: export it again with --constrained"),
    ("/translate", {"text": ["a"], "glossary": [["a", "le"]]}, 400, "--constrained"),
    ("/v1/models/nmt:predict", {"instances": [{"sentences": "a", "prefix": "le"}]}, 400,
     "--constrained"),
    ("/v1/models/nmt:predict", {"inputs": {"sentences": ["a"], "avoid": [["le"]]}}, 400,
     "--constrained"),
    ("/translate", {"text": ["a"], "constraints": [["x"] * 100_000]}, 400,
     "text[0].constraints holds 100000 phrases; at most 16"),
    ("/translate", {"text": ["a"], "avoid": [["x" * 10_000]]}, 400,
     "text[0].avoid[0] is 10000 characters long; at most 4096"),
    ("/translate", {"text": ["a"], "prefix": [{"a": [{"b": {}}]}]}, 400,
     "text[0].prefix: expected a string"),
    ("/translate", {"text": ["a"], "constraints": [[""]]}, 400, "is an empty phrase"),
    ("/translate", {"text": ["a"], "constraints": [[1.5]]}, 400,
     "text[0].constraints[0]: expected a string"),
    ("/translate", {"text": ["a"], "avoid": "x"}, 400,
     "avoid must be a list with an entry for each of the 1 sentences, got a string"),
    ("/translate", {"text": ["a"], "glossary": [["a"]] * 65}, 400, "at most 64"),
    ("/translate", {"text": ["a"], "glossary": [["a", ["le"]]]}, 400, "pair of strings"),
    ("/v1/models/nmt:predict", {"instances": [{"sentences": "a", "constraints": [["x"]]}]},
     400, "instances[0].constraints[0]: expected a string"),
    ("/v1/models/nmt:predict", {"instances": [{"prefix": "le"}]}, 400,
     "instances[0]: an object instance needs 'sentences'"),
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
        "signature_name", "sentences", "beam_size", "b64", "constraints", "avoid", "prefix",
        "glossary"]
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


HEADERS = st.sampled_from([{}, {"Content-Type": "text/plain"}, {"Origin": "http://a.example"},
                           {"Host": "a.example"}, {"Content-Encoding": "gzip"},
                           {"Content-Type": "application/json; charset=latin-1"}])


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(method=st.sampled_from(["GET", "POST", "PUT", "DELETE"]),
       path=st.sampled_from(PATHS + [METRICS_PATH]) | RANDOM_PATHS,
       body=BODIES, headers=HEADERS)
def test_fuzzed_requests_never_get_a_5xx(served, method, path, body, headers):
    quoted = urllib.parse.quote(path, safe="/:")
    status, kind, answer = call_raw(served.port, quoted, body, method=method, headers=headers)
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
    # The batch closes when it holds 4 sentences, long before the 10 s wait (no gap rule:
    # the threads' requests may come more than a few milliseconds apart).
    with ServerThread(registry, batch_size=4, max_wait=10.0, batch_gap=0.0) as server:
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


def test_work_threads_run_below_the_event_loops_priority(registry, translator, monkeypatch):
    """With work_niceness, a batch runs in a thread that many nice levels below the event
    loop's (a thread's nice value is its own on Linux), and the loop keeps its priority."""
    servable = registry.servables()[0]
    search, seen = servable.translator.row_search, []

    def noted(*args, **kwargs):  # called in the batch's thread
        seen.append(priority.nice_of())
        return search(*args, **kwargs)

    monkeypatch.setattr(servable.translator, "row_search", noted)
    base = priority.nice_of()
    with ServerThread(registry, work_niceness=3) as server:
        status, answer = server.call("/translate", {"text": ["a dog runs ."]})
        loop = priority.nice_of(server.thread.native_id)
    assert status == 200, answer
    assert answer["translations"][0]["text"] == translator.translate(["a dog runs ."])[0].text
    assert (seen, loop) == ([base + 3], base)
    with pytest.raises(ValueError, match="work_niceness must be between 0 and 19"):
        ServerOptions(work_niceness=20).check()


def test_full_queue_answers_503_at_once(registry, translator):
    options = dict(batch_size=64, max_wait=3.0, batch_gap=0.0, queue_size=4, max_sentences=4)
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


def test_a_batch_runs_once_arrivals_stop_and_fills_while_they_go_on():
    from keras_nmt.serving.batcher import Batcher

    async def scenario():
        batches = []
        batcher = Batcher(lambda key, items: batches.append(list(items)) or list(items),
                          batch_size=8, max_wait=5.0, queue_size=100, gap=0.05,
                          company_seconds=0.3)
        batcher.start()
        loop = asyncio.get_running_loop()

        async def timed(*submits):
            start = loop.time()
            answers = await asyncio.gather(*(batcher.submit("k", items) for items in submits))
            return answers, loop.time() - start

        # One request at a time, as one user typing: each runs at once, no gap.
        assert await timed(["a"]) == ([["a"]], pytest.approx(0.0, abs=0.04))
        assert (await timed(["b"]))[0] == [["b"]]
        # Two at once: they run together after the gap, not after the 5 s wait.
        together = await timed(["c"], ["d"])
        # With company lately, a lone request waits the gap for more; requests 10 ms
        # apart keep the batch open: one batch of 5.
        tasks = []
        for item in "efghi":
            tasks.append(asyncio.ensure_future(batcher.submit("k", [item])))
            await asyncio.sleep(0.01)
        assert [await task for task in tasks] == [["e"], ["f"], ["g"], ["h"], ["i"]]
        # One request at a time for longer than company_seconds: at once again.
        await asyncio.sleep(0.35)
        alone_again = await timed(["j"])
        await batcher.close()
        return together, alone_again, batches

    together, alone_again, batches = asyncio.run(scenario())
    assert together[0] == [["c"], ["d"]] and 0.05 <= together[1] < 1.0, together
    assert alone_again[1] < 0.04, alone_again
    assert batches == [["a"], ["b"], ["c", "d"], ["e", "f", "g", "h", "i"], ["j"]]


def test_batcher_stops_a_request_at_a_batch_boundary_and_drops_what_was_queued():
    """A request of 10 sentences runs as batches of 2; its client goes away while the
    first runs, and another's while queued: neither runs another batch, their sentences
    leave the queue at once, and the next request is served straight after."""
    ran, gate = [], threading.Event()

    def run(key, items):
        ran.append(list(items))
        if len(ran) == 1:
            gate.wait(10)
        return [f"t{item}" for item in items]

    async def scenario():
        batcher = Batcher(run, batch_size=2, max_wait=0.0, queue_size=100)
        batcher.start()
        big = asyncio.create_task(batcher.submit("k", list(range(10))))
        while not ran:
            await asyncio.sleep(0.005)
        gone = asyncio.create_task(batcher.submit("k", ["x", "y", "z"]))
        await asyncio.sleep(0.05)
        waiting = batcher.stats.waiting
        gone.cancel()
        big.cancel()
        await asyncio.gather(big, gone, return_exceptions=True)
        left = batcher.stats.waiting
        gate.set()
        answer = await batcher.submit("k", [100])
        await batcher.close()
        return waiting, left, answer, batcher.stats

    waiting, left, answer, stats = asyncio.run(scenario())
    assert (waiting, left) == (8 + 3, 0)
    assert ran == [[0, 1], [100]] and answer == ["t100"]
    assert (stats.batches, stats.dropped) == (2, 8 + 3)


def _first_batch_held():
    """A batcher's ``run`` that notes each batch and holds the first until ``gate`` is
    set: (the batches run, gate, run)."""
    ran, gate = [], threading.Event()

    def run(key, items):
        ran.append(list(items))
        if len(ran) == 1:
            gate.wait(10)
        return list(items)

    return ran, gate, run


def _large_request_and_others(batch_size: int, others: list[tuple[str, list]]):
    """A request of 6 sentences, its first batch held until ``others`` (key, items) have
    been submitted: the answers (the large request's first) and the batches run."""
    ran, gate, run = _first_batch_held()

    async def scenario():
        batcher = Batcher(run, batch_size=batch_size, max_wait=0.0, queue_size=100)
        batcher.start()
        big = asyncio.create_task(batcher.submit("k", list(range(6))))
        while not ran:
            await asyncio.sleep(0.005)
        tasks = [asyncio.create_task(batcher.submit(key, items)) for key, items in others]
        await asyncio.sleep(0.05)
        gate.set()
        answers = await asyncio.gather(big, *tasks)
        await batcher.close()
        return answers

    return asyncio.run(scenario()), ran


def test_batcher_lets_requests_that_arrive_go_before_the_rest_of_a_large_one():
    answers, ran = _large_request_and_others(2, [("k", ["a"]), ("other key", ["b"])])
    assert answers == [list(range(6)), ["a"], ["b"]]
    assert ran == [[0, 1], ["a", 2], [3, 4], [5], ["b"]]


def test_the_rest_of_a_split_request_keeps_half_of_each_batch_under_steady_load():
    """A request split over batches is not starved by new ones that would fill every
    batch: the rest of it keeps up to half of the next batch, the new ones the other
    half (a load of 4-sentence requests in batches of 32 saw a p99 of 10 s before)."""
    fresh = [("k", [f"{name}{i}" for i in range(4)]) for name in "abc"]
    answers, ran = _large_request_and_others(4, fresh)
    assert answers == [list(range(6))] + [items for _, items in fresh]
    # The rest of the large request runs in the second batch, beside half of a new one.
    assert ran[:3] == [[0, 1, 2, 3], ["a0", "a1", 4, 5], ["b0", "b1", "a2", "a3"]]
    assert sorted(item for batch in ran for item in batch if isinstance(item, str)) == sorted(
        f"{name}{i}" for name in "abc" for i in range(4))


def test_batcher_counts_sentences_not_items():
    """An item weighs the sentences it stands for (a constrained line translated whole):
    the queue bound counts them, a batch holds at most ``batch_size`` of them, and an
    item heavier than a batch runs alone."""
    ran, gate, run = _first_batch_held()

    async def scenario():
        batcher = Batcher(run, batch_size=4, max_wait=0.0, queue_size=12)
        batcher.start()
        first = asyncio.create_task(batcher.submit("k", ["held"]))
        while not ran:
            await asyncio.sleep(0.005)
        # 8 + 3 = 11 sentences queued of 12: one more of weight 3 is refused.
        queued = asyncio.create_task(batcher.submit("k", ["a", "heavy", "b"], [1, 5, 2]))
        more = asyncio.create_task(batcher.submit("k", ["c", "d"], [2, 1]))
        await asyncio.sleep(0.02)
        waiting = batcher.stats.waiting
        with pytest.raises(RequestError, match=r"busy \(11 sentences queued, at most 12\)"):
            await batcher.submit("k", ["e"], [3])
        gate.set()
        answers = await asyncio.gather(first, queued, more)
        await batcher.close()
        return waiting, answers, batcher.stats

    waiting, answers, stats = asyncio.run(scenario())
    assert waiting == 11 and answers == [["held"], ["a", "heavy", "b"], ["c", "d"]]
    # "heavy" (5) runs alone; no other batch passes 4 sentences.
    assert ran == [["held"], ["a", "c", "d"], ["heavy"], ["b"]]
    assert (stats.sentences, stats.largest_batch, stats.rejected) == (12, 5, 1)


def test_a_batch_tells_its_run_which_items_still_have_a_request_waiting():
    """``run`` gets a Batch: between its passes it can skip the items of a request that
    stopped waiting (its client left, its deadline passed) since the batch began."""
    seen, entered, gate = [], threading.Event(), threading.Event()

    def run(key, batch):
        seen.append(batch.alive())
        entered.set()
        gate.wait(10)
        seen.append(batch.alive())
        return list(batch)

    async def scenario():
        batcher = Batcher(run, batch_size=4, max_wait=0.05, queue_size=10)
        batcher.start()
        kept = asyncio.create_task(batcher.submit("k", ["a"]))
        gone = asyncio.create_task(batcher.submit("k", ["b", "c"]))
        while not entered.is_set():
            await asyncio.sleep(0.005)
        gone.cancel()
        await asyncio.gather(gone, return_exceptions=True)
        gate.set()
        answer = await kept
        await batcher.close()
        return answer

    assert asyncio.run(scenario()) == ["a"]
    assert seen == [[True, True, True], [True, False, False]]


def test_batcher_close_answers_what_is_left_at_its_timeout():
    """A batch that never ends and a request queued behind it: close(0.2) returns at
    once after 0.2 s, the queued request answered 503, the batch left to its thread."""
    gate = threading.Event()

    def run(key, items):
        gate.wait(30)
        return list(items)

    async def scenario():
        batcher = Batcher(run, batch_size=1, max_wait=0.0, queue_size=10)
        batcher.start()
        first = asyncio.create_task(batcher.submit("k", [1]))
        queued = asyncio.create_task(batcher.submit("k", [2]))
        await asyncio.sleep(0.05)
        start = time.monotonic()
        await batcher.close(0.2)
        elapsed = time.monotonic() - start
        results = await asyncio.gather(first, queued, return_exceptions=True)
        return elapsed, results

    elapsed, results = asyncio.run(scenario())
    gate.set()
    assert 0.2 <= elapsed < 1.5, elapsed
    assert all(isinstance(r, RequestError) and r.status == 503 for r in results), results


def test_a_thread_that_only_hands_its_result_over_is_not_running(monkeypatch):
    """DaemonThreads.running (what tells `keras-nmt serve` to end at once, with os._exit,
    at its stop) is about the function, not the thread: while the function runs it is
    True; once it has returned it is False, though its thread is still alive, held here
    where it hands the result to the loop. Counting such a thread ended a stopped server
    before its last words under load."""
    from keras_nmt.serving.batcher import DaemonThreads

    inside, handing = threading.Event(), threading.Event()

    def work():
        inside.wait(30)
        return 7

    async def scenario():
        loop = asyncio.get_running_loop()
        hand_over = loop.call_soon_threadsafe

        def held(*args):
            handing.wait(30)
            return hand_over(*args)

        monkeypatch.setattr(loop, "call_soon_threadsafe", held)
        threads = DaemonThreads("test")
        future = threads.run(work)
        thread = next(t for t in threading.enumerate() if t.name == "test")
        seen = [threads.running()]
        inside.set()
        for _ in range(300):  # until the function has returned, the thread held after it
            if not threads.running():
                break
            await asyncio.sleep(0.01)
        seen += [threads.running(), thread.is_alive()]
        handing.set()
        return seen, await future

    (running_inside, running_after, alive_after), result = asyncio.run(scenario())
    assert (running_inside, running_after, alive_after, result) == (True, False, True, 7)


def test_a_one_line_sentence_bomb_is_refused_quickly_while_health_answers(served, registry):
    """Bodies of ~1 MB holding one line of 75,000 short sentences, or of 2,000 long ones:
    refused 400 by the character limit at once, and, with the limit raised past them, by
    the sentence limit (it counts sentences after splitting) within seconds, from a part
    of the line; /health keeps answering meanwhile."""
    long_sentence = "The cat sat on the mat near the house " + "and the dog ran " * 28 + "."
    bombs = [{"text": ["Tom is here. " * 75_000], "alignment": True},
             {"text": [" ".join([long_sentence] * 2_000)]}]
    health: list[float] = []
    done = threading.Event()

    def probe():
        while not done.is_set():
            start = time.monotonic()
            assert served.call("/health")[0] == 200
            health.append(time.monotonic() - start)
            time.sleep(0.02)

    prober = threading.Thread(target=probe)
    prober.start()
    answers = []
    try:
        with ServerThread(registry, max_chars=1 << 20) as lenient:
            for bomb, server in itertools.product(bombs, (served, lenient)):
                assert 900_000 < len(json.dumps(bomb)) < 1 << 20
                start = time.monotonic()
                answers.append((*server.call("/translate", bomb), time.monotonic() - start))
    finally:
        done.set()
        prober.join(30)
    for n, (status, answer, elapsed) in enumerate(answers):
        refused_by = "(--max-chars)" if n % 2 == 0 else "more than 256 sentences"
        assert status == 400 and refused_by in answer["error"], answer
        assert elapsed < 5, elapsed
    assert health and max(health) < 0.5, health
    # Translated whole, the same line is one sentence, cut to the model's 100 tokens.
    status, answer = served.call("/translate", {"text": ["Tom is here. " * 1000],
                                                "split_sentences": False})
    assert status == 200 and answer["translations"][0]["truncated"] == 4 * 1000 - 100


SPLIT_WORDS = st.sampled_from(["Mr.", "Dr.", "the", "cat", "U.S.", "p.", "12", "J.", "Tolkien",
                                "e.g.", "Then", "...", "!", "?", "«", "»", "No.", "(", ")",
                                "Oui", "x"])
SPLIT_TEXT = st.lists(st.tuples(SPLIT_WORDS, st.sampled_from(["", ".", ". ", "! ", " ", "? "])),
                      max_size=300).map(lambda pairs: " ".join(w + s for w, s in pairs))


@settings(max_examples=300, deadline=None)
@given(line=SPLIT_TEXT, most=st.integers(0, 40))
def test_a_line_is_refused_from_a_prefix_only_when_it_holds_too_many(line, most):
    """A long line is split a prefix at a time, and refused as soon as a prefix holds
    more than ``most`` + 1 sentences: only when the whole line holds more than ``most``."""
    from keras_nmt.serving.work_plan import split_within
    from keras_nmt.text.sentences import split_sentences

    got = split_within(line, "en", most, prefix=23)
    whole = split_sentences(line, "en")
    assert len(whole) > most if len(got) > most else got == whole


def test_token_and_alignment_cell_limits(registry, translator):
    servable = registry.find("nmt")
    # "a dog runs ." is 4 tokens: a translation of at most ceil(2 * 5) + 1 = 11 tokens.
    assert servable.decode_ratio == 2.0 and servable.alignment_cells(4) == 11 * 5 == 55
    assert servable.alignment_cells(0) == 0
    with ServerThread(registry, max_tokens=10, max_alignment_cells=110) as server:
        ok = server.call("/translate", {"text": ["a dog runs .", "the cat sat ."]})
        over = server.call("/translate", {"text": ["a dog runs .", "the cat sat on the mat ."]})
        assert ok[0] == 200 and over == (400, {"error": "more than 10 source tokens in one "
                                               "request; at most 10 (--max-tokens)"})
        assert server.call("/v1/models/nmt:predict", {"instances": ["a dog runs . " * 3]})[0] == 400
        aligned = server.call("/translate", {"text": ["a dog runs .", "a cat runs ."],
                                             "alignment": True})
        assert aligned[0] == 200, aligned
        cells = sum(len(b["attention"]) * len(b["attention"][0])
                    for t in aligned[1]["translations"] for b in t["alignment"]["sentences"])
        assert 0 < cells <= 110  # the bound holds what the search gave
        # 10 tokens, but 55 + 2 * 36 cells: the second line is two sentences of 3 tokens.
        status, answer = server.call("/translate", {"text": ["a dog runs .", "a cat . The end ."],
                                                    "alignment": True})
        assert status == 400 and answer["error"].startswith(
            "the alignments asked for may hold 127 cells; at most 110 (--max-alignment-cells)")
        # Counted as the model reads them: a line of 150 tokens counts its first 100.
        with ServerThread(registry, max_tokens=100) as longer:
            assert longer.call("/translate", {"text": ["cat " * 150]})[0] == 200
            assert longer.call("/translate", {"text": ["cat " * 150, "a"]})[0] == 400


def test_the_text_limit_counts_characters_before_anything_is_split(registry, monkeypatch):
    """--max-chars: the characters of all of a request's lines (code points, not bytes),
    counted before any line is split or tokenized: a line of one long sentence, which the
    model reads a hundred tokens of, cost 5-8 s of CPU to split and tokenize whole."""
    import keras_nmt.serving.work_plan as work_plan

    split = work_plan.split_within
    calls = []
    monkeypatch.setattr(work_plan, "split_within",
                        lambda line, *args: calls.append(len(line)) or split(line, *args))
    with ServerThread(registry, max_chars=100) as server:
        assert server.call("/translate", {"text": ["é" * 100]})[0] == 200  # 200 bytes
        assert calls == [100]
        for text in (["a" * 101], ["a" * 60, "a" * 41], ["A. " * 40]):
            status, answer = server.call("/translate", {"text": text})
            assert (status, answer) == (400, {"error": (
                f"{sum(map(len, text))} characters of text in one request; at most 100 "
                "(--max-chars)")})
        status, answer = server.call("/v1/models/nmt:predict", {"instances": ["a" * 101]})
        assert status == 400 and answer["error"].endswith("at most 100 (--max-chars)")
        assert calls == [100]  # nothing refused was split
    with pytest.raises(ValueError, match="max_chars must be at least 1"):
        ServerOptions(max_chars=0).check()


def test_expect_100_continue_asks_for_a_body_only_when_it_would_be_read(registry):
    """A client that sends ``Expect: 100-continue`` (curl, for large bodies) is told to
    send its body only when nothing refuses the request first; otherwise the refusal is
    the first answer, and the body is never sent. 100 Continue is aiohttp's own, imported
    from a private name: this fails if aiohttp stops answering it."""
    body = json.dumps({"text": ["a dog runs ."]}).encode()

    def first_answer(port, path, headers, size):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
            client.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                           f"Expect: 100-continue\r\nContent-Length: {size}\r\n"
                           f"{headers}\r\n".encode())
            answer = client.recv(4096)
            if answer.startswith(b"HTTP/1.1 100 Continue\r\n\r\n") and size == len(body):
                client.sendall(body)
                while b"\r\n\r\n{" not in answer and len(answer) < 100_000:
                    answer += client.recv(4096)
            return answer

    with ServerThread(registry, max_body_bytes=1000) as server:
        json_type = "Content-Type: application/json\r\n"
        for path in ("/translate", "/v1/models/nmt:predict"):
            sent = body if path == "/translate" else json.dumps(
                {"instances": ["a dog runs ."]}).encode()
            answer = first_answer(server.port, path, json_type, len(sent))
            assert answer.startswith(b"HTTP/1.1 100 Continue\r\n\r\n"), answer
        answer = first_answer(server.port, "/translate", json_type, len(body))
        assert b"HTTP/1.1 200 OK" in answer and b'"translations"' in answer, answer
        refused = ((json_type, 1001, b"413"),
                   ("Content-Type: text/plain\r\n", len(body), b"415"),
                   (json_type + "Origin: http://evil.example\r\n", len(body), b"403"))
        for headers, size, status in refused:
            answer = first_answer(server.port, "/translate", headers, size)
            assert answer.startswith(b"HTTP/1.1 " + status), answer
            assert b"100 Continue" not in answer


def test_a_request_past_its_deadline_gets_504_and_its_work_is_dropped(registry):
    with ServerThread(registry, batch_size=64, max_wait=3.0, batch_gap=0.0,
                      request_timeout=0.5) as server:
        start = time.monotonic()
        status, answer = server.call("/translate", {"text": ["a dog runs ."] * 3})
        elapsed = time.monotonic() - start
        assert status == 504 and answer == {"error": "the request was not answered within "
                                                     "0.5 s (--request-timeout)"}
        assert 0.5 <= elapsed < 2.5, elapsed
        time.sleep(3.5)  # past the batch's wait: nothing of it runs
        stats = server.call("/stats")[1]
    assert (stats["waiting"], stats["batches"], stats["dropped"]) == (0, 0, 3)


def test_a_client_that_goes_away_has_its_work_dropped(registry):
    lines = [f"the cat sat on the mat number {i} ." for i in range(200)]
    with ServerThread(registry, batch_size=1) as server:
        body = json.dumps({"text": lines, "alignment": True}).encode()
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as client:
            client.sendall(b"POST /translate HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                           b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                           % (server.port, len(body)) + body)
            deadline = time.monotonic() + 20
            while server.call("/stats")[1]["batches"] < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
        deadline = time.monotonic() + 10
        while server.call("/stats")[1]["dropped"] == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        stats = server.call("/stats")[1]
        time.sleep(0.3)
        after = server.call("/stats")[1]
    assert stats["waiting"] == 0 and stats["dropped"] > 100, stats
    assert after["batches"] <= stats["batches"] + 1 < 100  # at most the batch then running


def test_health_answers_while_a_large_request_runs(registry, translator):
    lines = ["the cat sat on the mat and the dog runs near the big house ."] * 256
    with ServerThread(registry, batch_size=8) as server:
        answers, health = [], []
        big = threading.Thread(target=lambda: answers.append(server.call(
            "/translate", {"text": lines, "alignment": True, "nbest": 2})))
        start = time.monotonic()
        big.start()
        while big.is_alive():
            asked = time.monotonic()
            assert server.call("/health")[0] == 200
            health.append(time.monotonic() - asked)
            time.sleep(0.02)
        elapsed = time.monotonic() - start
    status, answer = answers[0]
    assert status == 200 and len(answer["translations"]) == 256
    expected = translator.translate(lines[:1])[0]
    assert answer["translations"][0]["text"] == expected.text
    # A loop blocked for the request's work would hold one probe for most of it; one
    # probe held ~0.6 s by the machine itself (CI, 2 s request) is not that, so the
    # largest wait is bounded by the request's time and the others by an absolute one.
    waits = sorted(health)
    assert len(waits) >= 5 and waits[-2] < 0.5 and waits[-1] < elapsed / 2, (elapsed, waits[-3:])


def _raw_exchange(port: int, data: bytes, wait: float = 10.0,
                  one_answer: bool = False) -> tuple[bytes, float]:
    """What the server sends on a connection after ``data``, read until it closes, or with
    ``one_answer`` until one whole answer has come (a kept-alive connection stays open)."""
    start = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as client:
        client.sendall(data)
        received = b""
        while not (one_answer and _whole_answer(received)):
            try:
                chunk = client.recv(65536)
            except (socket.timeout, ConnectionResetError):
                break
            if not chunk:
                break
            received += chunk
    return received, time.monotonic() - start


def _whole_answer(received: bytes) -> bool:
    """Whether ``received`` holds an answer's head and the Content-Length bytes after it."""
    head, found, body = received.partition(b"\r\n\r\n")
    lengths = [line.split(b":", 1)[1] for line in head.split(b"\r\n")
               if line.lower().startswith(b"content-length:")]
    return bool(found and lengths) and len(body) >= int(lengths[0])


def test_slow_clients_are_timed_out_and_connections_capped(registry):
    with ServerThread(registry, read_timeout=0.5, max_connections=4) as server:
        head = (b"POST /translate HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: "
                b"application/json\r\nContent-Length: 100\r\n\r\n" % server.port)
        # A body that stops coming: 408, then the connection is closed.
        answer, elapsed = _raw_exchange(server.port, head + b'{"text": ')
        assert answer.startswith(b"HTTP/1.1 408 ") and b"--read-timeout" in answer, answer
        assert elapsed < 5, elapsed
        # A request head that never ends, or none at all: closed without an answer.
        for data in (b"POST /translate HTTP/1.1\r\nHost: 127", b""):
            answer, elapsed = _raw_exchange(server.port, data)
            assert answer == b"" and elapsed < 5, (answer, elapsed)
        # Connections over the cap, each holding a request (its body to come): 503 at
        # once, closed.
        held = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(4)]
        try:
            for connection in held:
                connection.sendall(head + b'{"text": ')
            time.sleep(0.1)
            answer, elapsed = _raw_exchange(server.port, b"")
            assert answer.startswith(b"HTTP/1.1 503 ") and b"--max-connections 4" in answer
            assert elapsed < 1, elapsed
            refused = server.call("/stats")
        except OSError:
            refused = None
        finally:
            for connection in held:
                connection.close()
        time.sleep(0.1)
        stats = server.call("/stats")[1]
    assert refused is None or refused[0] == 503
    assert stats["refused_connections"] >= 1 and stats["connections"] == 1


def test_sockets_that_send_nothing_give_their_place_to_clients(registry):
    """A flood of connections that never send a byte, five times the cap: a newcomer
    takes the place of the oldest one that holds no request and had its time to send
    one, so /health and a translation are still served, at once, while the flood's
    sockets stay open on the client's side (they had locked every client out for
    --read-timeout)."""
    with ServerThread(registry, max_connections=8, read_timeout=30.0) as server:
        flood = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(40)]
        try:
            # The flood's newest 8 hold the places: a newcomer is refused until one of them
            # has had its time to send a head, then takes the place of the oldest.
            answer, _ = _raw_exchange(server.port, b"")
            assert answer.startswith(b"HTTP/1.1 503 "), answer
            time.sleep(0.6)
            start = time.perf_counter()
            assert server.call("/health", timeout=5)[0] == 200
            assert server.call("/translate", {"text": ["a dog runs ."]}, timeout=30)[0] == 200
            assert time.perf_counter() - start < 5
            stats = server.call("/stats")[1]
            for connection in flood[8:]:  # over the cap while the places were young: 503
                connection.settimeout(5)
                assert connection.recv(100).startswith(b"HTTP/1.1 503 ")
            # The oldest gave its place to /health, closed unanswered; the calls after it
            # found the place /health had left.
            flood[0].settimeout(5)
            assert flood[0].recv(100) == b""
        finally:
            for connection in flood:
                connection.close()
    assert stats["dropped_connections"] == 1 and stats["refused_connections"] == 33
    assert stats["connections"] <= 8


def test_bodies_held_at_once_share_one_budget(registry):
    with ServerThread(registry, max_body_bytes=1000, max_body_memory=1500,
                      read_timeout=5.0) as server:
        body = json.dumps({"text": ["a dog runs ."]}).encode().ljust(900)
        head = (b"POST /translate HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: "
                b"application/json\r\nContent-Length: %d\r\n\r\n" % (server.port, len(body)))
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as first:
            first.sendall(head + body[:800])  # 800 bytes held, the rest to come
            time.sleep(0.2)
            answer, _ = _raw_exchange(server.port, head + body)  # 800 + 900 > 1500
            assert answer.startswith(b"HTTP/1.1 503 ") and b"request bodies" in answer, answer
            first.sendall(body[800:])
            first_answer = first.recv(65536)
        assert first_answer.startswith(b"HTTP/1.1 200 "), first_answer
        assert server.call("/translate", {"text": ["a dog runs ."]})[0] == 200


# ---- cross-site requests ---------------------------------------------------------------

@pytest.mark.parametrize("headers, status, reason", [
    ({"Content-Type": "text/plain"}, 415, "Content-Type: application/json (got 'text/plain')"),
    ({"Content-Type": "application/x-www-form-urlencoded"}, 415, "must be JSON"),
    ({"Content-Type": "application/json; charset=latin-1"}, 415, "must be UTF-8"),
    ({"Content-Encoding": "gzip"}, 415, "compressed request bodies"),
    ({"Origin": "http://evil.example"}, 403, "cross-origin request from 'http://evil.example'"),
    ({"Origin": "null"}, 403, "cross-origin"),
    ({"Host": "evil.example"}, 421, "not to Host 'evil.example'"),
    ({"Host": "evil.example:PORT"}, 421, "answers only to localhost, 127.0.0.1 or [::1]"),
    ({"Host": "127.0.0.1:1"}, 421, "on port PORT"),
    ({"Content-Type": "application/json; charset=utf-8"}, 200, None),
    ({"Host": "localhost:PORT", "Origin": "http://localhost:PORT"}, 200, None),
    ({"Host": "[::1]:PORT"}, 200, None),
])
def test_cross_site_and_rebound_requests_are_refused(served, headers, status, reason):
    """A web page's "simple" cross-site POST (text/plain, no preflight), a request from
    another origin, and one that reached loopback under another name (DNS rebinding)."""
    headers = {k: v.replace("PORT", str(served.port)) for k, v in headers.items()}
    reason = reason and reason.replace("PORT", str(served.port))
    for path, body in (("/translate", {"text": ["a dog runs ."]}),
                       ("/v1/models/nmt:predict", {"instances": ["a dog runs ."]})):
        got, answer = served.call(path, body, headers=headers)
        assert got == status, (path, answer)
        if reason:
            assert list(answer) == ["error"] and reason in answer["error"], answer
    if "Host" in headers:  # every path: the page and /health too
        assert served.call("/health", headers=headers)[0] == (421 if status == 421 else 200)


def test_allowed_hosts_are_answered_under_any_port_and_every_other_name_refused(registry):
    """--allowed-hosts: its names with any port (a proxy's, or none), and the loopback
    names with the server's port still; a page rebound to any other name gets 421 on
    every path, the page and /health too."""
    with ServerThread(registry, allowed_hosts=("nmt.example.org", "nmt")) as server:
        port = server.port
        for host, status in ((f"nmt.example.org:{port}", 200), ("NMT.Example.org", 200),
                             ("nmt.example.org:443", 200), ("nmt", 200), (f"127.0.0.1:{port}", 200),
                             (f"evil.example:{port}", 421), ("nmt.example.org.evil.example", 421),
                             ("evil.example", 421), (f"localhost:{port + 1}", 421)):
            got, answer = server.call("/translate", {"text": ["a dog runs ."]},
                                      headers={"Host": host})
            assert got == status, (host, answer)
            assert server.call("/health", headers={"Host": host})[0] == status
            if status == 421:
                assert answer["error"] == (
                    "this server answers only to nmt.example.org, nmt (--allowed-hosts), "
                    f"localhost, 127.0.0.1 or [::1] on port {port}, not to Host {host!r}")
    with ServerThread(registry, allowed_hosts=("*",)) as server:
        assert server.call("/health", headers={"Host": "anything.example:1"})[0] == 200


def test_a_server_beyond_loopback_needs_its_allowed_hosts(tmp_path):
    """Listening beyond loopback with no --allowed-hosts, any page could reach the server
    under its own name (DNS rebinding): serve refuses to start, in one line, before it
    loads a model."""
    from keras_nmt.serving.options import ServerOptions

    for host in ("0.0.0.0", "::", "192.0.2.7"):
        with pytest.raises(ValueError, match="listens beyond this machine"):
            ServerOptions(host=host).check()
        ServerOptions(host=host, allowed_hosts=("nmt.example.org",)).check()
    for host in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        ServerOptions(host=host).check()
    with pytest.raises(ValueError, match="give it alone"):
        ServerOptions(host="0.0.0.0", allowed_hosts=("*", "nmt")).check()
    stderr = io.StringIO()
    assert serve_cli.main([str(tmp_path / "no-export"), "--host", "0.0.0.0"],
                          stdout=io.StringIO(), stderr=stderr) == 2
    assert stderr.getvalue().splitlines() == [
        "keras-nmt serve: error: --host 0.0.0.0 listens beyond this machine: name the hosts "
        "its clients use with --allowed-hosts NAME[,NAME...] (or '*' for any Host, behind a "
        "proxy that checks it)"]


def test_compressed_bodies_are_refused_unread_and_broken_ones_log_one_line(registry):
    """A body declared gzip that is not: refused 415, and its rest dropped as sent, never
    inflated (a failure to inflate it reset the connection before some clients read the
    refusal). A body whose chunk sizes do not parse fails in aiohttp's parser, which logs
    that with a traceback each time, a flood a client can repeat at will (a pipe nobody
    reads then blocks the event loop): the server logs each kind of such error once, in
    one line, and counts them all."""
    with ServerThread(registry) as server:
        head = (f"POST /translate HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                "Content-Type: application/json\r\n").encode("ascii")
        body = b"not gzip at all" * 100
        for _ in range(5):
            # Read the refusal and no more: the connection is kept alive.
            answer, _ = _raw_exchange(server.port, head + b"Content-Encoding: gzip\r\n"
                                      + f"Content-Length: {len(body)}\r\n\r\n".encode() + body,
                                      one_answer=True)
            assert answer.startswith(b"HTTP/1.1 415 "), answer
            answer, _ = _raw_exchange(server.port, head + b"Transfer-Encoding: chunked\r\n\r\n"
                                      b"zz\r\nabc\r\n0\r\n\r\n")
            assert answer.startswith(b"HTTP/1.0 400 "), answer
        assert server.call("/health")[0] == 200
        status, _, metrics = call_raw(server.port, "/monitoring/prometheus/metrics")
        log = server.log.getvalue()
    assert "Traceback" not in log
    lines = [line for line in log.splitlines() if "on a connection" in line]
    assert len(lines) == 1 and "BadHttpMessage" in lines[0], log
    counted = [line for line in metrics.decode().splitlines()
               if line.startswith("keras_nmt_serve_connection_errors_total{")]
    assert counted == ['keras_nmt_serve_connection_errors_total{kind="BadHttpMessage"} 5.0']


# ---- new versions, metrics -------------------------------------------------------------

def _add_version(model_dir: pathlib.Path, source: pathlib.Path, version: int, **metadata):
    """A copy of ``source`` as version ``version``, moved into place whole (as an export
    writes it), with ``metadata`` changed in its NAME.onnx.json."""
    staging = model_dir.parent / f".staging-{version}"
    shutil.copytree(source, staging)
    if metadata:
        edit_json(staging / "onnx" / "nmt.onnx.json", **metadata)
    staging.rename(model_dir / str(version))


def test_new_versions_are_picked_up_while_requests_keep_succeeding(tiny_export, tmp_path):
    export = tmp_path / "export"
    shutil.copytree(tiny_export, export)
    # models.config: the newest version; its onnxruntime threads sleep when idle.
    registry = Registry.from_export_dir(export, spin=False)
    answers, stop = [], threading.Event()
    with ServerThread(registry, poll_seconds=0.1) as server:
        def ask():
            while not stop.is_set():
                status, answer = server.call("/translate", {"text": ["a dog runs ."]})
                answers.append((status, answer.get("version")))

        asker = threading.Thread(target=ask)
        asker.start()
        try:
            time.sleep(0.3)
            _add_version(export / "nmt", export / "nmt" / "1", 2)

            def serving(versions):
                deadline = time.monotonic() + 30
                while server.call("/health")[1]["models"] != {"nmt": versions}:
                    assert time.monotonic() < deadline, server.log.getvalue()
                    time.sleep(0.05)

            serving([2])
            # A version that cannot load, and one whose beam is above --max-beam: each
            # reported once, skipped; version 2 keeps serving.
            broken = export / "nmt" / ".staging-3" / "onnx"
            broken.mkdir(parents=True)
            (broken / "nmt.onnx.json").write_text("{not json", "utf-8")
            (export / "nmt" / ".staging-3").rename(export / "nmt" / "3")
            time.sleep(0.5)
            _add_version(export / "nmt", export / "nmt" / "1", 4, beam_size=40)
            time.sleep(0.8)
            serving([2])
            time.sleep(0.3)
        finally:
            stop.set()
            asker.join(30)
        metrics = _metrics(server)
        # A polled version's threads sleep as the first one's do.
        assert [_spinning(s.translator) for s in registry.servables()] == ["0"]
        log = server.log.getvalue()
    assert answers and all(status == 200 for status, _ in answers), answers
    versions = [version for _, version in answers]
    assert versions[0] == 1 and versions[-1] == 2 and versions == sorted(versions)
    assert log.count("loaded model 'nmt' version 2") == 1
    assert "unloaded model 'nmt' version 1" in log
    assert log.count("cannot load model 'nmt' version 3: ") == 1
    assert log.count("cannot load model 'nmt' version 4: model 'nmt' version 4 searches with "
                     "beam 40, above --max-beam 32") == 1
    changes = {(s.labels["model"], s.labels["change"]): s.value
               for s in metrics["keras_nmt_serve_version_changes"].samples
               if s.name.endswith("_total")}
    assert changes == {("nmt", "loaded"): 1, ("nmt", "unloaded"): 1, ("nmt", "failed"): 2}


def test_a_request_in_flight_through_a_swap_is_answered_by_its_version(tiny_export, tmp_path):
    """Version 1 is decoding a request when version 2 replaces it: that request still
    gets version 1's answer, and the next one version 2's."""
    export = tmp_path / "export"
    shutil.copytree(tiny_export, export)
    registry = Registry.from_export_dir(export, spin=False)
    (old,) = registry.servables()
    entered, release = threading.Event(), threading.Event()
    line = {"text": ["a dog runs ."]}
    expected = old.translator.translate(line["text"])[0].text
    search = old.translator.row_search

    def held(*args, **kwargs):  # version 1's decoding, held until the swap is done
        entered.set()
        assert release.wait(60)
        return search(*args, **kwargs)

    old.translator.row_search = held
    with ServerThread(registry, poll_seconds=0.1) as server:
        answers = []
        asker = threading.Thread(target=lambda: answers.append(server.call("/translate", line)))
        asker.start()
        try:
            assert entered.wait(30)
            _add_version(export / "nmt", export / "nmt" / "1", 2)
            deadline = time.monotonic() + 30
            while server.call("/health")[1]["models"] != {"nmt": [2]}:
                assert time.monotonic() < deadline, server.log.getvalue()
                time.sleep(0.05)
        finally:
            release.set()
            asker.join(60)
        (status, answer), = answers
        assert (status, answer["version"]) == (200, 1)
        assert answer["translations"][0]["text"] == expected
        status, answer = server.call("/translate", line)
        assert (status, answer["version"]) == (200, 2)
        assert "unloaded model 'nmt' version 1" in server.log.getvalue()


def _metrics(server) -> dict:
    from prometheus_client.parser import text_string_to_metric_families

    status, kind, text = call_raw(server.port, "/monitoring/prometheus/metrics")
    assert status == 200 and kind.startswith("text/plain"), kind
    return {family.name: family for family in text_string_to_metric_families(text.decode())}


def test_prometheus_metrics_count_requests_latency_queue_and_batches(registry):
    with ServerThread(registry, batch_size=4) as server:
        for _ in range(2):
            assert server.call("/translate", {"text": ["a dog runs .", "a cat ."]})[0] == 200
        assert server.call("/translate", {"text": ["a"], "beam": 0})[0] == 400
        assert server.call("/translate", {"text": ["a"]},
                           headers={"Content-Type": "text/plain"})[0] == 415
        assert server.call("/v1/models/nmt:predict", {"instances": ["a dog runs ."] * 5})[0] == 200
        assert server.call("/nowhere")[0] == 404
        assert server.call("/health")[0] == 200
        metrics = _metrics(server)

    def samples(name, suffix=""):
        return {tuple(sorted(s.labels.items())): s.value for s in metrics[name].samples
                if s.name == name + suffix}

    assert samples("keras_nmt_serve_requests", "_total") == {
        (("code", "200"), ("endpoint", "translate")): 2,
        (("code", "400"), ("endpoint", "translate")): 1,
        (("code", "415"), ("endpoint", "translate")): 1,
        (("code", "200"), ("endpoint", "predict")): 1,
        (("code", "404"), ("endpoint", "other")): 1,
        (("code", "200"), ("endpoint", "health")): 1,
    }
    assert samples("keras_nmt_serve_request_seconds", "_count")[(("endpoint", "translate"),)] == 4
    assert samples("keras_nmt_serve_sentences", "_total") == {(): 2 * 2 + 5}
    # Batches of at most 4: the predict's 5 sentences ran as two.
    assert samples("keras_nmt_serve_batch_sentences", "_count") == {(): 4}
    assert samples("keras_nmt_serve_batch_sentences", "_sum") == {(): 9}
    assert samples("keras_nmt_serve_queue_sentences") == {(): 0}
    assert samples("keras_nmt_serve_dropped_sentences", "_total") == {(): 0}
    assert samples("keras_nmt_serve_open_connections") == {(): 1}
    assert metrics["keras_nmt_serve_request_seconds"].type == "histogram"


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
    # The export's own beam (5) above --max-beam: every default request would be a 400.
    (["--max-beam", "4"], "model 'nmt' version 1 searches with beam 5, above --max-beam 4"),
    (["--max-body-bytes", "2000", "--max-body-memory", "1000"], "cannot exceed max_body_memory"),
    (["--work-niceness", "20"], "work_niceness must be between 0 and 19"),
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


def _spinning(translator) -> str | None:
    """What the translator's session says of its idle intra-op threads: "0", they sleep;
    None, nothing (onnxruntime's default: they spin)."""
    options = translator.session.get_session_options()
    try:
        return options.get_session_config_entry("session.intra_op.allow_spinning")
    except RuntimeError:  # onnxruntime's word for a key never set
        return None


@pytest.mark.parametrize("spin", [True, False], ids=["default", "--no-spin"])
def test_the_server_runs_with_a_short_switch_interval_and_threads_that_may_sleep(
        tiny_export, monkeypatch, spin):
    """While the command serves, the event loop gets the GIL back from busy threads every
    0.5 ms, not every 5, and with --no-spin onnxruntime's idle threads sleep rather than
    spin; the interpreter's interval is the caller's again afterwards. An offline
    OnnxTranslator keeps onnxruntime's spinning."""
    import sys

    from keras_nmt.decoding.onnx_translator import OnnxTranslator
    from keras_nmt.serving.server import TranslationServer

    seen = []

    async def run(self, ready):
        seen.append((sys.getswitchinterval(),
                     [_spinning(s.translator) for s in self.registry.servables()]))

    monkeypatch.setattr(TranslationServer, "run", run)
    before = sys.getswitchinterval()
    assert serve_cli.main([str(tiny_export), "--port", "0", *([] if spin else ["--no-spin"])]) == 0
    assert seen == [(pytest.approx(serve_cli.SWITCH_INTERVAL), [None if spin else "0"])]
    assert serve_cli.SWITCH_INTERVAL < before and sys.getswitchinterval() == before
    assert _spinning(OnnxTranslator.from_export_dir(tiny_export)) is None


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


def _thread_nice_values(pid: int) -> dict[int, int]:
    """{thread id: nice value} of every thread of process ``pid`` (Linux's /proc)."""
    found = {}
    for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError):  # a thread that has just ended
            stat = (task / "stat").read_text()
            # Field 19 is the nice value; the command name (2) is in parentheses.
            found[int(task.name)] = int(stat.rsplit(")", 1)[1].split()[16])
    return found


def _serve_without_training_packages(export, *options):
    """``keras-nmt serve EXPORT --port 0 OPTIONS`` in a fresh interpreter where the training
    packages cannot be imported: the process, and a queue of its stderr lines as they come,
    then None once it closed stderr (so a test reads every line, not those read so far)."""
    child = subprocess.Popen(
        [sys.executable, "-c", SERVE_WITHOUT_TRAINING_PACKAGES, str(export), "--port", "0",
         *options],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=child_env(), text=True,
    )
    lines: queue.Queue = queue.Queue()
    def read():
        for line in child.stderr:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    return child, lines


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_stops_gracefully_without_tensorflow(tiny_export, translator, signum):
    """The command in a fresh interpreter where the training packages cannot be
    imported: it serves; a signal while a request waits for its batch still answers
    that request; then it exits 0, having loaded no TensorFlow or Keras."""
    # SIGTERM's server also runs its work threads 5 nice levels down, onnxruntime's pool
    # (made while the model loaded; --threads 2 makes one on any machine) among them.
    lowered = ["--work-niceness", "5", "--threads", "2"] if signum == signal.SIGTERM else []
    child, lines = _serve_without_training_packages(
        tiny_export, "--max-wait-ms", "3000", "--batch-gap-ms", "0", "--batch-size", "64",
        *lowered)
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
        nice = _thread_nice_values(child.pid)
        base = priority.nice_of()
        if lowered:
            assert nice.pop(child.pid) == base and nice, nice
            assert set(nice.values()) == {base + 5}, nice
        else:
            assert set(nice.values()) == {base}, nice
        child.send_signal(signum)
        request.join(30)
        assert child.wait(30) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert held[0] == (200, held[0][1]) and held[0][1]["translations"][0]["text"] == (
        translator.translate(["a dog runs ."])[0].text)
    # The process has exited, but its last lines may still be on their way to the queue.
    rest = list(iter(lambda: lines.get(timeout=30), None))
    assert rest[0] == "keras-nmt serve: stopped\n", rest
    assert json.loads(rest[1]) == {"code": 0, "heavy": []}


def test_sigterm_stops_within_the_shutdown_timeout_whatever_is_queued(tiny_export):
    """SIGTERM while a large request runs batch by batch: the server exits within
    --shutdown-timeout (1 s) and a little, the request answered 503."""
    child, lines = _serve_without_training_packages(
        tiny_export, "--batch-size", "1", "--shutdown-timeout", "1")
    try:
        port = int(lines.get(timeout=60).rsplit(":", 1)[1])
        held = []
        text = [f"the cat sat on the mat number {i} ." for i in range(256)]
        request = threading.Thread(target=lambda: held.append(
            call(port, "/translate", {"text": text, "alignment": True})))
        request.start()
        deadline = time.monotonic() + 20
        while call(port, "/stats")[1]["batches"] < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        start = time.monotonic()
        child.send_signal(signal.SIGTERM)
        assert child.wait(30) == 0
        elapsed = time.monotonic() - start
        request.join(30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert elapsed < 1 + 2, elapsed
    assert held == [(503, {"error": "the server is shutting down"})]


def test_the_clients_glossary_matches_words_and_punctuation():
    glossary = Glossary((("New York", "New York"), ("dog", "chien"), ("e-mail", "courriel"),
                         ("Dog", "Chien")))
    instance = tfserving_client.instance_constraints

    def rules(line):
        return instance(glossary.for_line(tfserving_client.rough_tokens(line),
                                          tfserving_client.rough_tokens))

    assert rules("I saw a dog in New York.") == {"constraints": ["New York", "chien"]}
    assert rules("dogs, New-York") == {}  # whole words only, case and all
    assert rules("send an e-mail!") == {"constraints": ["courriel"]}
    assert instance(LineConstraints(avoid=("x",), prefix="le")) == {"avoid": ["x"], "prefix": "le"}
    assert instance(None) == {} and instance(LineConstraints()) == {}


# ---- the page at / ----------------------------------------------------------------------

def test_page_files_are_in_the_package_and_fetch_nothing_from_elsewhere(served):
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
    try:
        for path, kind in (("/", "text/html"), ("/static/page.js", "javascript"),
                           ("/static/figures.mjs", "javascript"),
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

    sentence = "a dog runs ."
    status, answer = served.call("/translate", {"text": [sentence], "beam": 5, "nbest": 2})
    expected = answer["translations"][0]
    assert expected["text"] == translator.translate([sentence])[0].text
    driver = headless_chromium()
    try:
        driver.get(served.url + "/")
        wait = page_wait(driver)
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
        [alignment] = aligned["translations"][0]["alignment"]["sentences"]
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
        # The confidence: each word a span coloured by its figure's bin (the legend's
        # colours), the text unchanged, and the sentence's figure shown.
        status, sure = served.call("/translate", {"text": [sentence], "beam": 5,
                                                  "confidence": True})
        figures = sure["translations"][0]
        words = driver.find_elements(By.CSS_SELECTOR, ".sentence .best span.word")
        assert [(w.text, float(w.get_attribute("data-confidence"))) for w in words] == [
            tuple(pair) for pair in figures["words"]] and words
        legend = {s.get_attribute("class").split()[-1]: s.value_of_css_property(
            "background-color") for s in driver.find_elements(By.CSS_SELECTOR, ".legend .swatch")}
        assert len(set(legend.values())) == 5
        for word, (_, value) in zip(words, figures["words"]):
            colour = f"conf-{sum(value >= bound for bound in (0.2, 0.4, 0.6, 0.8))}"
            assert colour in word.get_attribute("class").split()
            assert word.value_of_css_property("background-color") == legend[colour]
        assert driver.find_element(By.CSS_SELECTOR, ".sentence .best").text == expected["text"]
        assert driver.find_element(By.CSS_SELECTOR, ".sentence .confidence").text == (
            f"Confidence {figures['confidence']:.3f}")
        # A refusal shows the server's one-line reason.
        beam = driver.find_element(By.ID, "beam")
        beam.clear()
        beam.send_keys("1")
        driver.find_element(By.ID, "translate").click()
        # "translating…" shows until the answer comes: wait for the error itself.
        wait.until(lambda d: d.find_element(By.ID, "status").get_attribute("class") == "error")
        assert driver.find_element(By.ID, "status").text == "nbest (2) cannot exceed the beam size (1)"
        assert driver.save_screenshot(str(tmp_path / "page.png"))
        # A pasted paragraph: a heat map for each of its first 8 sentences only, and a
        # longer text is translated without alignments (the tab never draws thousands).
        beam.clear()
        beam.send_keys("2")
        for text, maps, note in (("The cat sat on the mat. " * 12, 8, "4 more are not"),
                                 ("The cat sat on the mat. " * 90, 0, "at most 2000 characters")):
            box = driver.find_element(By.ID, "text")
            box.clear()
            driver.execute_script("arguments[0].value = arguments[1]", box, text.strip())
            driver.find_element(By.ID, "translate").click()
            wait.until(lambda d: note in " ".join(e.text for e in d.find_elements(
                By.CSS_SELECTOR, "#results > p.note")))
            assert len(driver.find_elements(By.CSS_SELECTOR, "table.heatmap")) == maps
            assert driver.find_element(By.ID, "status").text == ""
    finally:
        driver.quit()
    assert (tmp_path / "page.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---- "markup": tags kept through translation ---------------------------------------------

MARKED_UP = ['<b>a dog</b> runs .', 'the <a href="/x?a=1&amp;b=2">cat</a> sat .<br>',
             'a {0} cat . <code>x < y</code> The end .']


def test_translate_keeps_the_markup_as_onnx_translate_does(served, translator):
    """``"markup": "html"``: the tags come back where the alignment says, as
    ``onnx-translate --markup html`` places them, and the model never sees a tag."""
    from keras_nmt.decoding.marked_up import marking_up
    from keras_nmt.text.markup import parse_markup

    status, answer = served.call("/translate", {"text": MARKED_UP, "markup": "html"})
    assert status == 200, answer
    expected = marking_up(translator.translate, "html")(MARKED_UP, align=True, nbest=2,
                                                         batch_size=8)
    got = [t["text"] for t in answer["translations"]]
    assert got == [t.text for t in expected]
    for source, text in zip(MARKED_UP, got):  # the same tags, in the same nesting
        assert _tag_tree(parse_markup(source, "html")) == _tag_tree(parse_markup(text, "html"))
    assert '<a href="/x?a=1&amp;b=2">' in got[1] and "<code>x < y</code>" in got[2]
    assert "alignment" not in answer["translations"][0]  # not asked for
    assert [h["tokens"] for t in answer["translations"] for h in t["nbest"][:1]] == [
        list(t.tokens) for t in expected]


def _tag_tree(markup) -> list:
    def shape(node):
        return (getattr(node, "open_tag", None) or getattr(node, "raw", None),
                [shape(child) for child in getattr(node, "children", ())])
    return [shape(node) for node in markup.nodes]


@pytest.mark.parametrize("body, reason", [
    ({"text": ["a <b>dog</i> ."], "markup": "html"}, "text[0]: "),
    ({"text": ["a", "<b>a</b"], "markup": "xml"}, "text[1]: "),
    ({"text": ["a"], "markup": "pdf"}, "markup must be one of html, xml or null"),
    ({"text": ["a"], "markup": ["html"]}, "markup must be one of html, xml or null"),
])
def test_bad_markup_gets_a_400_with_one_line(served, body, reason):
    status, answer = served.call("/translate", body)
    assert (status, list(answer)) == (400, ["error"]), answer
    assert answer["error"].startswith(reason) and "\n" not in answer["error"], answer


def test_markup_counts_its_characters_as_sent(registry):
    """--max-chars counts a marked-up line as sent, tags and attributes included, before
    it is parsed: the plain text of this one is a single character."""
    line = '<b class="' + "x" * 95 + '">a</b>'
    with ServerThread(registry, max_chars=100) as server:
        assert server.call("/translate", {"text": [line]})[0] == 400
        status, answer = server.call("/translate", {"text": [line], "markup": "html"})
        assert (status, answer) == (400, {"error": (
            f"{len(line)} characters of text in one request; at most 100 (--max-chars)")})
        assert server.call("/translate", {"text": ["<b>a</b>"], "markup": "html"})[0] == 200


def test_markup_counts_against_the_alignment_cells(registry):
    """Tags are placed by the alignment's attention: a marked-up request meets
    --max-alignment-cells as one asking for alignments does."""
    with ServerThread(registry, max_alignment_cells=54) as server:  # "a dog runs .": 55
        body = {"text": ["<b>a dog</b> runs ."]}
        assert server.call("/translate", body)[0] == 200
        status, answer = server.call("/translate", {**body, "markup": "html"})
        assert status == 400 and "(--max-alignment-cells)" in answer["error"], answer
