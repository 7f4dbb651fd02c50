"""Confidence over HTTP: ``keras-nmt serve``'s ``"confidence": true`` (POST /translate and
TF Serving's predict) gives the figures ``onnx-translate --confidence`` writes for the same
lines; its force-decoding pass counts against ``--max-alignment-cells``; an export without
its force-decoding model answers 400; ``tfserving-client --confidence`` writes what
``onnx-translate --confidence`` writes."""

from __future__ import annotations

import io
import json
import math
import shutil

import pytest

from support import ServerThread, as_older_export, onnx_files
from keras_nmt.cli import onnx_translate as onnx_cli
from keras_nmt.cli import tfserving_client as client_cli
from keras_nmt.core.errors import ServingError
from keras_nmt.serving import client as tfserving_client
from keras_nmt.serving.registry import Registry

# A line of two sentences (the export splits lines), an empty line, one cut to the
# maximum source length, and words the vocabulary lacks.
LINES = ["the cat sat on the mat . A dog runs near the house .", "", "a dog runs .",
         "cat " * 150, "the 🐈 sat on ZWJ"]
FIELDS = ("confidence", "sentences", "words")


@pytest.fixture(scope="module")
def served(tiny_export):
    with ServerThread(Registry.from_export_dir(tiny_export), batch_size=8) as server:
        yield server


@pytest.fixture(scope="module")
def onnx_records(tiny_export):
    """What ``keras-nmt onnx-translate --confidence`` writes for LINES, a record a line."""
    stdout, stderr = io.StringIO(), io.StringIO()
    code = onnx_cli.main([str(tiny_export), "--confidence", "--quiet"],
                         stdin=io.BytesIO(("\n".join(LINES) + "\n").encode()),
                         stdout=stdout, stderr=stderr)
    assert code == 0, stderr.getvalue()
    records = [json.loads(line) for line in stdout.getvalue().splitlines()]
    assert len(records) == len(LINES)
    assert len(records[0]["sentences"]) == 2 and records[1]["confidence"] is None
    assert all(0 < r["confidence"] <= 1 for k, r in enumerate(records) if k != 1)
    return records


def _client_lines(url: str, *args: str) -> list[str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    code = client_cli.main(["--url", url, "--batch-size", "2", *args],
                           stdin=io.BytesIO(("\n".join(LINES) + "\n").encode()),
                           stdout=stdout, stderr=stderr)
    assert code == 0, stderr.getvalue()
    return stdout.getvalue().splitlines()


def test_translate_confidence_equals_onnx_translate(served, onnx_records):
    status, answer = served.call("/translate", {"text": LINES, "confidence": True})
    assert status == 200, answer
    got = answer["translations"]
    assert [t["text"] for t in got] == [r["text"] for r in onnx_records]
    assert [{key: t[key] for key in FIELDS} for t in got] == [
        {key: r[key] for key in FIELDS} for r in onnx_records]
    # A word's figure is that of one of the words of the text, in order.
    assert [word for word, _ in got[2]["words"]] == got[2]["text"].split()
    # With the alignment too (one force-decoding pass), the same figures.
    status, both = served.call("/translate", {"text": LINES, "confidence": True,
                                              "alignment": True})
    assert status == 200 and [t["confidence"] for t in both["translations"]] == [
        t["confidence"] for t in got]
    # Not asked: no such keys.
    status, plain = served.call("/translate", {"text": LINES})
    assert status == 200 and not set(FIELDS) & set(plain["translations"][0])
    status, models = served.call("/models")
    assert [m["confidence"] for m in models["models"]] == [True]


@pytest.mark.parametrize("form", ["instances", "inputs"])
def test_predict_adds_the_confidence_outputs_when_asked(served, onnx_records, form):
    body = ({"instances": LINES} if form == "instances" else
            {"signature_name": "translate", "inputs": {"sentences": LINES, "beam_size": 5,
                                                       "alpha": -1}})
    status, answer = served.call("/v1/models/nmt:predict", {**body, "confidence": True})
    assert status == 200, answer
    if form == "instances":
        columns = {key: [row[key] for row in answer["predictions"]]
                   for key in answer["predictions"][0]}
    else:
        columns = answer["outputs"]
    assert columns["translations"] == [r["text"] for r in onnx_records]
    assert columns["confidence"] == [r["confidence"] for r in onnx_records]
    assert columns["sentence_confidences"] == [r["sentences"] for r in onnx_records]
    assert columns["word_confidences"] == [r["words"] for r in onnx_records]
    status, plain = served.call("/v1/models/nmt:predict", body)
    assert status == 200 and "confidence" not in json.dumps(plain)
    status, wrong = served.call("/v1/models/nmt:predict", {**body, "confidence": 1})
    assert status == 400 and wrong["error"] == "'confidence' must be true or false, got a number"


def _older_export(tiny_export, copy, forced: bool = True):
    """A copy of ``tiny_export`` as a keras-nmt before the search returned its tokens'
    log-probabilities wrote it, with its force-decoding model or (``forced`` False) not."""
    shutil.copytree(tiny_export, copy)
    as_older_export(onnx_files(copy))
    if not forced:
        metadata = onnx_files(copy) / "nmt.onnx.json"
        values = json.loads(metadata.read_text(encoding="utf-8"))
        del values["forced"]
        metadata.write_text(json.dumps(values), encoding="utf-8")
    return copy


def test_a_force_decoded_confidence_counts_against_the_alignment_cell_limit(tiny_export,
                                                                           tmp_path):
    # "a dog runs ." (4 tokens) may force-decode 55 cells, "a cat . The end ." two
    # sentences of 3 tokens 36 each (test_server's test_token_and_alignment_cell_limits).
    lines = ["a dog runs .", "a cat . The end ."]
    # Today's export: the search gives the confidence, nothing is force-decoded.
    with ServerThread(Registry.from_export_dir(tiny_export), max_alignment_cells=110) as server:
        status, answer = server.call("/translate", {"text": lines, "confidence": True})
        assert status == 200 and all(t["confidence"] > 0 for t in answer["translations"])
        assert server.call("/translate", {"text": lines, "alignment": True})[0] == 400
    older = _older_export(tiny_export, tmp_path / "export")
    with ServerThread(Registry.from_export_dir(older), max_alignment_cells=110) as server:
        assert server.call("/translate", {"text": lines})[0] == 200
        status, answer = server.call("/translate", {"text": lines, "confidence": True})
        assert status == 400 and answer["error"] == (
            "the confidences asked for force-decode up to 127 cells; at most 110 "
            "(--max-alignment-cells): ask for them for fewer or shorter sentences")
        status, answer = server.call("/v1/models/nmt:predict",
                                     {"instances": lines, "confidence": True})
        assert status == 400 and "127 cells" in answer["error"]
        assert server.call("/v1/models/nmt:predict", {"instances": lines})[0] == 200
        status, answer = server.call("/translate", {"text": lines[:1], "confidence": True})
        assert status == 200 and answer["translations"][0]["confidence"] > 0


def test_an_export_that_cannot_give_a_confidence_answers_400(tiny_export, tmp_path):
    export = _older_export(tiny_export, tmp_path / "export", forced=False)
    reason = ("model 'nmt' version 1 can compute no confidence (written by an older "
              "keras-nmt): export it again with --onnx")
    with ServerThread(Registry.from_export_dir(export)) as server:
        assert server.call("/models")[1]["models"][0]["confidence"] is False
        assert server.call("/translate", {"text": ["a"], "confidence": True}) == (
            400, {"error": reason})
        assert server.call("/v1/models/nmt:predict", {"instances": ["a"], "confidence": True}
                           ) == (400, {"error": reason})
        assert server.call("/translate", {"text": ["a"]})[0] == 200
        # The client says so in one line (exit 2), writing nothing.
        stdout, stderr = io.StringIO(), io.StringIO()
        code = client_cli.main(["--url", server.url, "--confidence", "--retries", "0"],
                               stdin=io.BytesIO(b"a\n"), stdout=stdout, stderr=stderr)
        assert code == 2 and stdout.getvalue() == ""
        assert stderr.getvalue() == ("keras-nmt tfserving-client: error: server answered "
                                     f"HTTP 400: {reason}\n")


def test_tfserving_client_confidence_writes_what_onnx_translate_writes(served, tiny_export,
                                                                        onnx_records):
    for form in ("instances", "inputs"):
        got = _client_lines(served.url, "--confidence", "--form", form)
        assert [json.loads(line) for line in got] == onnx_records
    # --min-confidence marks the lines below it (the tiny model's figures may all be
    # equal: just above the highest marks every translated line, the lowest none),
    # --drop-below withholds them.
    figures = [r["confidence"] for r in onnx_records if r["confidence"] is not None]
    for threshold, marked in ((min(figures), 0), (min(1.0, max(figures) + 1e-6), len(figures))):
        low = [r["confidence"] is not None and r["confidence"] < threshold
               for r in onnx_records]
        assert sum(low) == marked
        assert _client_lines(served.url, "--min-confidence", str(threshold)) == [
            ("[low confidence] " if is_low else "") + r["text"]
            for r, is_low in zip(onnx_records, low)]
    dropped = _client_lines(served.url, "--min-confidence", str(threshold), "--drop-below",
                            "--confidence")
    stdout = io.StringIO()
    assert onnx_cli.main([str(tiny_export), "--min-confidence", str(threshold), "--drop-below",
                          "--confidence", "--quiet"],
                         stdin=io.BytesIO(("\n".join(LINES) + "\n").encode()),
                         stdout=stdout, stderr=io.StringIO()) == 0
    assert dropped == stdout.getvalue().splitlines()
    assert [json.loads(line).get("withheld") for line in dropped] == low


def test_tfserving_client_confidence_needs_rest_and_a_server_that_gives_it(served, capsys):
    with pytest.raises(SystemExit) as stop:
        client_cli.main(["--grpc", "localhost:8500", "--min-confidence", "0.5"],
                        stdin=io.BytesIO(b""), stdout=io.StringIO(), stderr=io.StringIO())
    assert stop.value.code == 2 and ("--confidence and --min-confidence go to keras-nmt serve "
                                     "over REST (--url) only") in capsys.readouterr().err
    # An answer without the outputs asked for (TF Serving itself) is an error, not a
    # translation without its figure.
    transport = tfserving_client.RestTransport(served.url, "nmt", confidence=True)
    with pytest.raises(ServingError, match="answered no confidence"):
        transport._parse(json.dumps({"predictions": [{"translations": "x"}]}).encode(), 1)
    with pytest.raises(ServingError, match="not a confidence"):
        transport._parse(json.dumps({"predictions": [{
            "translations": "x", "confidence": 2.0, "sentence_confidences": [2.0],
            "word_confidences": [["x", 2.0]]}]}).encode(), 1)
    # TF Serving's answer of an export with word figures: rows of words ("" after the last)
    # and their figures; rows that do not fit are an error.
    [got, empty] = transport._parse(json.dumps({"predictions": [
        {"translations": "a. b", "confidence": 0.5, "sentence_confidence": [0.4, 0.6],
         "words": ["a.", "b", ""], "word_confidence": [0.25, 1.0, 0.0]},
        {"translations": "", "confidence": math.nan, "sentence_confidence": [0.0, 0.0],
         "words": ["", "", ""], "word_confidence": [0.0, 0.0, 0.0]}]}).encode(), 2)
    assert got.confidence.words == ("a.", "b") and got.confidence.word_confidences == (0.25, 1.0)
    assert got.confidence.sentence == pytest.approx(0.5)
    assert [part.confidence.sentence for part in got.sentences] == pytest.approx([0.4, 0.6])
    assert empty.confidence is None
    for sentences, words, figures in (([0.5], ["a", "b"], [0.25]), ([0.5], "a b", [0.25, 1.0]),
                                      ([0.5], ["a"], [1.5]), (0.5, ["a"], [0.5])):
        with pytest.raises(ServingError, match="must be 1 rows|not a conf"):
            transport._parse(json.dumps({"predictions": [{
                "translations": "a b", "confidence": 0.5, "sentence_confidence": sentences,
                "words": words, "word_confidence": figures}]}).encode(), 1)
