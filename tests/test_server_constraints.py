"""``keras-nmt serve`` with constraints: the per-instance ``constraints``, ``avoid`` and
``prefix`` of ``POST /translate`` and of TF Serving's predict API (rows and columns), a
request's ``glossary``, ``unmet``; every bad one a 400 with one line (an attacker's
included: huge lists, nested objects, non-strings, 17 phrases, a 10 KB phrase), the
constraint tokens counted against ``--max-tokens``; ``keras-nmt tfserving-client
--constraints/--prefix/--glossary``; and the page's completion of an edited translation
and its glossary, in headless Chromium.

The answers must be what :class:`OnnxTranslator` gives for the same constraints.
"""

from __future__ import annotations

import dataclasses
import io
import sys
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from support import (
    CHROMEDRIVER, CHROMIUM, ROOT, ServerThread, headless_chromium, page_wait, run_logged,
)
from keras_nmt.cli import tfserving_client as client_cli
from keras_nmt.decoding.constraints import Glossary, LineConstraints
from keras_nmt.core.errors import ConstraintError
from keras_nmt.serving import client as tfserving_client
from keras_nmt.decoding.onnx_translator import OnnxTranslator
from keras_nmt.serving.registry import Registry

# The constrained export these tests serve takes minutes to make.
pytestmark = pytest.mark.slow

BEAM = 3
LINES = ["the cat sat on the mat .", "a dog runs .", "the man is here ."]


def _peaked_constrained_export(context):
    """The background job of ``constrained_export``: the session's tiny run with peaked
    random weights (outputs of several words), exported with --onnx --constrained."""
    out = context.tmp_path_factory.mktemp("served-constraints")
    run, export = out / "run", out / "export"

    def work(launch):
        peak = [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                "from support import peaked_weights_run; "
                "import pathlib; peaked_weights_run(*map(pathlib.Path, sys.argv[2:]))",
                ROOT / "tests", context.run, run]
        code, output = run_logged(peak, out / "peak.log", context.env, launch)
        assert code == 0, output[-3000:]
        command = [sys.executable, "-m", "keras_nmt.cli", "export", run, "--beam", BEAM,
                   "--nbest", 2, "--onnx", "--constrained", "--out", export]
        code, output = run_logged(command, out / "export.log", context.env, launch)
        assert code == 0, output[-3000:]
        return export

    return work


BACKGROUND_JOBS = {"constrained_export": _peaked_constrained_export}


@pytest.fixture(scope="session")
def constrained_export(tiny_run, _background):
    return _background.result("constrained_export")


@pytest.fixture(scope="module")
def translator(constrained_export):
    return OnnxTranslator.from_export_dir(constrained_export)


@pytest.fixture(scope="module")
def served(constrained_export):
    with ServerThread(Registry.from_export_dir(constrained_export), batch_size=8) as server:
        yield server


@pytest.fixture(scope="module")
def words(translator):
    """Alphabetic target words that no plain translation of :data:`LINES` holds."""
    said = {w for t in translator.translate(LINES, beam_size=BEAM) for w in t.tokens}
    found = [w for w in translator.target_vocab.tokens[4:] if w.isalpha() and w not in said]
    assert len(found) >= 6
    return found[:6]


def _same(answer: dict, expected, nbest: int = 1) -> None:
    """A /translate translation (or a predict row) is ``expected``, a Translation."""
    text = answer.get("text", answer.get("translations"))
    assert text == expected.text
    score = answer.get("score", answer.get("scores"))
    np.testing.assert_allclose(score, expected.score, rtol=1e-5, atol=1e-5)
    if "nbest" in answer:
        assert [h["tokens"] for h in answer["nbest"]] == [
            list(h.tokens) for h in expected.hypotheses[:nbest]]


# ---- the fields of the JSON API and of TF Serving's predict API ----------------------------

def test_translate_takes_constraints_avoid_and_prefix_per_line(served, translator, words):
    found = [LineConstraints((words[0],)), LineConstraints(avoid=(words[1],), prefix=words[2]),
             None]
    expected = translator.translate(LINES, beam_size=BEAM, nbest=2, constraints=found)
    status, answer = served.call("/translate", {
        "text": LINES, "beam": BEAM, "nbest": 2, "constraints": [[words[0]], None, None],
        "avoid": [None, [words[1]], []], "prefix": [None, words[2], None]})
    assert status == 200, answer
    for got, want in zip(answer["translations"], expected):
        _same(got, want, nbest=2)
        assert "unmet" not in got
    tokens = [t["nbest"][0]["tokens"] for t in answer["translations"]]
    assert words[0] in tokens[0]
    assert tokens[1][0] == words[2] and words[1] not in tokens[1]
    # The unconstrained line is translated as without any constraint.
    assert answer["translations"][2]["text"] == translator.translate(
        LINES[2:], beam_size=BEAM)[0].text


def test_a_glossary_gives_its_terms_to_the_lines_that_hold_their_source(served, translator,
                                                                          words):
    terms = [["dog", words[3]], ["mat", f"{words[4]} {words[5]}"], ["absent", words[0]]]
    glossary = Glossary(tuple(map(tuple, terms)))
    expected = translator.translate(LINES, beam_size=BEAM, glossary=glossary)
    status, answer = served.call("/translate", {"text": LINES, "beam": BEAM,
                                                "glossary": terms})
    assert status == 200, answer
    for got, want in zip(answer["translations"], expected):
        _same(got, want)
    texts = [t["nbest"][0]["tokens"] for t in answer["translations"]]
    assert words[3] in texts[1] and words[3] not in texts[0]
    assert f"{words[4]} {words[5]}" in " ".join(texts[0])
    assert words[0] not in texts[0] + texts[1] + texts[2]  # its source is in no line


def test_a_constrained_line_of_sentences_is_split_as_the_translator_splits_it(served,
                                                                             translator, words):
    line = "The dog runs. The cat sat on the mat."
    glossary = Glossary((("cat", words[0]),))
    for split in (True, False):
        expected = translator.translate([line], beam_size=BEAM, glossary=glossary,
                                        split_sentences=split)
        status, answer = served.call("/translate", {
            "text": [line], "beam": BEAM, "glossary": [["cat", words[0]]],
            "split_sentences": split, "alignment": True})
        assert status == 200, answer
        [got] = answer["translations"]
        _same(got, expected[0])
        blocks = got["alignment"]["sentences"]
        assert len(blocks) == (2 if split else 1)
        assert [t for b in blocks for t in b["target_tokens"]] == list(expected[0].tokens)


@pytest.mark.parametrize("form", ["instances", "inputs", "translate"])
def test_predict_takes_constraints_per_instance(served, translator, words, form):
    found = [LineConstraints((words[0],)), None, LineConstraints(avoid=(words[1],),
                                                                 prefix=words[2])]
    expected = translator.translate(LINES, beam_size=BEAM, constraints=found)
    columns = {"constraints": [[words[0]], None, None], "avoid": [None, None, [words[1]]],
               "prefix": [None, None, words[2]]}
    if form == "instances":
        body = {"instances": [{"sentences": LINES[0], "constraints": [words[0]]}, LINES[1],
                              {"sentences": LINES[2], "avoid": [words[1]],
                               "prefix": words[2]}]}
    elif form == "inputs":
        body = {"inputs": {"sentences": LINES, **columns}}
    else:
        body = {"signature_name": "translate",
                "inputs": {"sentences": LINES, "beam_size": BEAM, "alpha": -1, **columns}}
    status, answer = served.call("/v1/models/nmt:predict", body)
    assert status == 200, answer
    if form == "instances":
        for row, want in zip(answer["predictions"], expected):
            _same(row, want)
            assert "unmet" not in row
    else:
        assert "unmet" not in answer["outputs"]
        for n, want in enumerate(expected):
            _same({key: values[n] for key, values in answer["outputs"].items()}, want)


def test_phrases_an_empty_line_cannot_hold_are_unmet(served, words):
    status, answer = served.call("/translate", {"text": ["", LINES[1]],
                                                "constraints": [[words[0]], [words[1]]]})
    assert status == 200, answer
    assert answer["translations"][0]["unmet"] == [words[0]]
    assert "unmet" not in answer["translations"][1]
    status, answer = served.call("/v1/models/nmt:predict", {"instances": [
        {"sentences": "", "constraints": [words[0]]}, LINES[1]]})
    assert [row.get("unmet") for row in answer["predictions"]] == [[words[0]], None]
    status, answer = served.call("/v1/models/nmt:predict", {"inputs": {
        "sentences": ["", LINES[1]], "constraints": [[words[0]], None]}})
    assert answer["outputs"]["unmet"] == [[words[0]], []]


def test_models_say_which_take_constraints(served, tiny_export):
    assert [m["constraints"] for m in served.call("/models")[1]["models"]] == [True]
    with ServerThread(Registry.from_export_dir(tiny_export)) as plain:
        assert [m["constraints"] for m in plain.call("/models")[1]["models"]] == [False]
        for path, body in (("/translate", {"text": ["a"], "prefix": ["le"]}),
                           ("/translate", {"text": ["a dog"], "glossary": [["dog", "chien"]]}),
                           ("/v1/models/nmt:predict",
                            {"instances": [{"sentences": "a", "avoid": ["x"]}]})):
            status, answer = plain.call(path, body)
            assert status == 400 and "export it again with --constrained" in answer["error"]
        # Constraints that say nothing ask nothing of the export.
        assert plain.call("/translate", {"text": ["a"], "constraints": [None],
                                         "prefix": [""]})[0] == 200


# ---- what an attacker sends -----------------------------------------------------------------

TEN_KB = "x" * 10_000
BAD = [
    ({"constraints": [[""]]}, "text[0].constraints[0] is an empty phrase"),
    ({"constraints": [["  \t "]]}, "empty phrase"),
    ({"constraints": [["ok"] * 17]}, "holds 17 phrases; at most 16"),
    ({"avoid": [["ok"] * 100_000]}, "holds 100000 phrases; at most 16"),
    ({"constraints": [[TEN_KB]]}, "is 10000 characters long; at most 4096"),
    ({"prefix": [TEN_KB]}, "is 10000 characters long; at most 4096"),
    ({"constraints": [["le " * 1000]]}, "more than an output may have"),
    ({"constraints": [["le chat"]], "avoid": [["chat"]]}, "holds 'chat', a phrase to avoid"),
    ({"prefix": ["le chat"], "avoid": [["chat"]]}, "the prefix holds 'chat'"),
    ({"constraints": ["le"]}, "text[0].constraints must be a list of strings"),
    ({"constraints": [[["le"]]]}, "text[0].constraints[0]: expected a string"),
    ({"constraints": [[{"a": {"b": [1]}}]]}, "expected a string"),
    ({"constraints": [[5]]}, "expected a string"),
    ({"constraints": {"0": ["le"]}}, "constraints must be a list with an entry for each"),
    ({"constraints": [["le"], ["la"]]}, "got 2 entries"),
    ({"prefix": [5]}, "text[0].prefix: expected a string"),
    ({"prefix": "le"}, "prefix must be a list with an entry for each"),
    ({"avoid": [True]}, "text[0].avoid must be a list of strings"),
    ({"glossary": {"dog": "chien"}}, "glossary must be a list of [source term, target term]"),
    ({"glossary": [["dog"]]}, "glossary[0] must be a [source term, target term] pair"),
    ({"glossary": [["dog", 1]]}, "pair of strings"),
    ({"glossary": [["dog", ""]]}, "empty phrase"),
    ({"glossary": [["dog", "chien"]] * 65}, "the glossary holds 65 terms; at most 64"),
    ({"glossary": [["dog", TEN_KB]]}, "at most 4096"),
]


@pytest.mark.parametrize("fields, reason", BAD, ids=[f"{i}-{r[:24]}" for i, (_, r) in
                                                     enumerate(BAD)])
def test_bad_constraints_get_a_400_with_one_line(served, fields, reason):
    status, answer = served.call("/translate", {"text": ["a dog runs ."], **fields})
    assert (status, list(answer)) == (400, ["error"]), answer
    assert reason in answer["error"] and "\n" not in answer["error"]


PREDICT_BAD = [
    ({"instances": [{"sentences": "a", "constraints": [""]}]},
     "instances[0].constraints[0] is an empty phrase"),
    ({"instances": [{"constraints": ["le"]}]}, "instances[0]: an object instance needs"),
    ({"instances": [{"sentences": "a", "glossary": []}]}, "unknown key 'glossary'"),
    ({"instances": [{"sentences": "a", "prefix": ["le"]}]}, "instances[0].prefix: expected"),
    ({"instances": [{"sentences": "a", "constraints": ["x"] * 17}]}, "at most 16"),
    ({"inputs": {"sentences": ["a"], "constraints": [["le"], ["la"]]}}, "got 2 entries"),
    ({"inputs": {"sentences": ["a"], "other": [1]}}, "exactly the inputs"),
    ({"inputs": {"sentences": ["a"], "avoid": [[TEN_KB]]}}, "inputs.sentences[0].avoid[0] is 10000"),
]


@pytest.mark.parametrize("body, reason", PREDICT_BAD)
def test_bad_predict_constraints_get_a_400_with_one_line(served, body, reason):
    status, answer = served.call("/v1/models/nmt:predict", body)
    assert (status, list(answer)) == (400, ["error"]), answer
    assert reason in answer["error"] and "\n" not in answer["error"]


def test_constraint_tokens_count_against_the_token_limit(constrained_export):
    registry = Registry.from_export_dir(constrained_export)
    with ServerThread(registry, max_tokens=20) as server:
        line = "a dog runs ."  # 4 tokens
        assert server.call("/translate", {"text": [line] * 5})[0] == 200  # 20 tokens
        status, answer = server.call("/translate", {"text": [line] * 4,
                                                    "avoid": [None, None, None, ["x y z w"]]})
        assert status == 200, answer  # 16 + 4
        status, answer = server.call("/translate", {"text": [line] * 4,
                                                    "avoid": [None, None, None, ["x y z w v"]]})
        assert status == 400 and "(--max-tokens)" in answer["error"], answer
        status, answer = server.call("/v1/models/nmt:predict", {"instances": [
            {"sentences": line, "prefix": "a b c d e f g h i j k l m n o p q"}]})
        assert status == 400 and "(--max-tokens)" in answer["error"], answer


def test_alignment_cells_count_an_output_grown_to_fit_its_constraints(constrained_export):
    registry = Registry.from_export_dir(constrained_export)
    [servable] = registry.servables()
    plain = servable.alignment_cells(4)  # "a dog runs ." alone
    with ServerThread(registry, max_alignment_cells=plain) as server:
        body = {"text": ["a dog runs ."], "alignment": True}
        assert server.call("/translate", body)[0] == 200
        long_prefix = " ".join(["le"] * (plain // 5 + 1))  # more rows than the ratio rule's
        status, answer = server.call("/translate", {**body, "prefix": [long_prefix]})
        assert status == 400 and "(--max-alignment-cells)" in answer["error"], answer


def test_a_glossary_bomb_keeps_the_terms_that_fit_and_reports_the_rest(served, translator,
                                                                      words):
    """A line whose source holds more glossary terms than a line may take (16) is
    translated with the first 16, the rest listed as unmet, as every path does."""
    glossary = [["dog", f"{words[0]}"]] + [["dog", f"{words[1]} {i}"] for i in range(16)]
    status, answer = served.call("/translate", {"text": ["a dog runs ."], "beam": BEAM,
                                                "glossary": glossary})
    assert status == 200, answer
    expected = translator.translate(["a dog runs ."], beam_size=BEAM,
                                    glossary=Glossary(tuple(map(tuple, glossary))))[0]
    assert answer["translations"][0]["text"] == expected.text
    assert f"{words[1]} 15" in answer["translations"][0]["unmet"]
    assert list(expected.unmet) == answer["translations"][0]["unmet"]


def test_a_constrained_line_counts_its_sentences_in_the_queue(constrained_export, translator,
                                                             monkeypatch, words):
    """A line with constraints is sized as its sentences, split or kept whole: a flood of
    such lines meets the queue bound as plain ones do, and no batch passes --batch-size."""
    import threading

    registry = Registry.from_export_dir(constrained_export)
    [servable] = registry.servables()
    entered, release, sizes = threading.Event(), threading.Event(), []
    search = servable.translator.row_search

    def held(*args, **kwargs):  # the first batch is held until the others are queued
        entered.set()
        assert release.wait(60)
        found = search(*args, **kwargs)
        return dataclasses.replace(found, decode=lambda rows: sizes.append(len(rows))
                                   or found.decode(rows))

    monkeypatch.setattr(servable.translator, "row_search", held)
    six = " ".join(["A dog runs."] * 6)  # 6 sentences
    with ServerThread(registry, batch_size=4, queue_size=8, max_sentences=8,
                      max_wait=0.0, batch_gap=0.0) as server:
        answers = {}
        first = threading.Thread(target=lambda: answers.update(first=server.call(
            "/translate", {"text": ["the man is here ."]})))
        first.start()
        assert entered.wait(30)
        queued = threading.Thread(target=lambda: answers.update(queued=server.call(
            "/translate", {"text": [six], "avoid": [[words[0]]]})))
        queued.start()
        deadline = time.monotonic() + 30
        while server.call("/stats")[1]["waiting"] < 6:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        # A prefix keeps a line whole: one row, three sentences, 6 + 3 > 8.
        status, answer = server.call("/translate", {"text": ["A cat sat. A dog runs. A man."],
                                                    "prefix": [words[1]]})
        assert status == 503 and "busy (6 sentences queued, at most 8)" in answer["error"]
        release.set()
        first.join(60)
        queued.join(60)
        stats = server.call("/stats")[1]
    assert answers["first"][0] == 200 and answers["queued"][0] == 200, answers
    expected = translator.translate([six], beam_size=BEAM, constraints=[
        LineConstraints(avoid=(words[0],))])[0]
    assert answers["queued"][1]["translations"][0]["text"] == expected.text
    assert (stats["largest_batch"], stats["sentences"]) == (4, 7)
    assert sizes == [1, 4, 2]  # one onnxruntime run a batch, none over 4 rows


def test_the_constrained_search_cells_are_counted_and_bounded(constrained_export, words):
    """--max-search-cells bounds the largest tensor a step of a request's constrained
    search builds: rows x beam x (beam + phrases) x the phrases' padded tokens."""
    from keras_nmt.serving.requests import read_translate
    from keras_nmt.serving.options import ServerOptions

    registry = Registry.from_export_dir(constrained_export)
    body = {"text": LINES, "beam": BEAM,
            "constraints": [[f"{words[0]} {words[1]}", " ".join(words[2:5])], [words[5]], None],
            "avoid": [[words[5]], None, None]}
    # 2 constrained rows, 2 phrases of at most 3 tokens, 1 of 1 to avoid:
    # 2 x 3 x (3 + 2) x (2 x 3 + 1 x 1).
    call = read_translate(body, registry, ServerOptions())
    assert call.work.search_cells == 2 * 3 * (3 + 2) * 7 == 210
    assert read_translate(body, registry, ServerOptions(max_search_cells=210)).work
    with ServerThread(registry, max_search_cells=209) as server:
        status, answer = server.call("/translate", body)
        assert status == 400 and answer["error"].startswith(
            "the constraints need a search of 210 cells a step; at most 209 (--max-search-cells)")
        assert server.call("/translate", {**body, "constraints": None, "avoid": None})[0] == 200


def test_each_request_runs_its_constrained_rows_apart(served, monkeypatch, words):
    """Rows of one batch run one onnxruntime run per kind: the plain rows together, each
    request's constrained rows apart (padded to its own phrases only), and none for a
    request that stopped waiting since the batch began."""
    from types import SimpleNamespace

    from keras_nmt.serving.batcher import Batch
    from keras_nmt.serving.requests import read_translate

    server = served.server
    ask = {"text": LINES[:2], "beam": BEAM, "constraints": [[words[0]], None]}
    one, two, three = (read_translate(ask, server.registry, server.options) for _ in range(3))
    rows = one.work.rows + two.work.rows + three.work.rows
    owners = [SimpleNamespace(waits=waits) for waits in [True] * 4 + [False] * 2]
    translator = server.registry.servables()[0].translator
    search, runs = translator.row_search, []

    def counted(*args, **kwargs):
        found = search(*args, **kwargs)
        return dataclasses.replace(found, decode=lambda sources: runs.append(
            [s.tokens for s in sources]) or found.decode(sources))

    monkeypatch.setattr(translator, "row_search", counted)
    results = server._translate_batch(one.search, Batch(rows, owners))
    tokens = [tuple(translator.source(line).tokens) for line in LINES[:2]]
    assert runs == [[tokens[0]], [tokens[1], tokens[1]], [tokens[0]]]
    expected = translator.translate(LINES[:2], beam_size=BEAM, nbest=2,
                                    constraints=[LineConstraints((words[0],)), None])
    assert [r.text for r in results[:4]] == [t.text for t in expected] * 2
    assert [r.text for r in results[4:]] == ["", ""]  # never decoded


FIELD_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=20) | st.dictionaries(st.text(max_size=5), inner,
                                                                 max_size=3),
    max_leaves=40,
)


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(fields=st.fixed_dictionaries({}, optional={
    key: FIELD_VALUES for key in ("constraints", "avoid", "prefix", "glossary")}),
    row=st.dictionaries(st.sampled_from(["sentences", "constraints", "avoid", "prefix", "x"]),
                        FIELD_VALUES, max_size=4))
def test_fuzzed_constraints_never_get_a_5xx(served, fields, row):
    for path, body in (("/translate", {"text": ["a dog runs .", ""], **fields}),
                       ("/v1/models/nmt:predict", {"instances": [row]}),
                       ("/v1/models/nmt:predict", {"inputs": {
                           "sentences": ["a dog runs ."],
                           **{k: v for k, v in fields.items() if k != "glossary"}}})):
        status, answer = served.call(path, body)
        assert status in (200, 400), (status, answer, body)
        if status == 400:
            assert list(answer) == ["error"] and "\n" not in answer["error"]


# ---- keras-nmt tfserving-client --------------------------------------------------------------

def test_client_sends_constraints_prefixes_and_a_glossary(served, translator, words, tmp_path,
                                                          capsys):
    (tmp_path / "in.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    (tmp_path / "constraints.jsonl").write_text(
        f'["{words[0]}"]\n{{"avoid": ["{words[1]}"]}}\n\n', encoding="utf-8")
    (tmp_path / "prefixes.txt").write_text(f"\n{words[2]}\n\n", encoding="utf-8")
    (tmp_path / "terms.tsv").write_text(f"man\t{words[3]}\n", encoding="utf-8")
    found = [LineConstraints((words[0],)), LineConstraints(avoid=(words[1],), prefix=words[2]),
             LineConstraints((words[3],))]
    for form in ("instances", "inputs"):
        expected = [t.text for t in translator.translate(LINES, constraints=found)]
        stdout, stderr = io.StringIO(), io.StringIO()
        code = client_cli.main(
            ["--url", served.url, "--form", form, "--batch-size", "2",
             "--constraints", str(tmp_path / "constraints.jsonl"),
             "--prefix", str(tmp_path / "prefixes.txt"), "--glossary", str(tmp_path / "terms.tsv")],
            stdin=io.BytesIO((tmp_path / "in.txt").read_bytes()), stdout=stdout, stderr=stderr)
        assert code == 0, stderr.getvalue()
        assert stdout.getvalue().splitlines() == expected
    # A file of another length than the input, and gRPC: one line each.
    stdout, stderr = io.StringIO(), io.StringIO()
    code = client_cli.main(["--url", served.url, "--prefix", str(tmp_path / "prefixes.txt")],
                           stdin=io.BytesIO(b"a\nb\nc\nd\n"), stdout=stdout, stderr=stderr)
    assert code == 2 and "the prefixes file has 3 line(s), the input more" in stderr.getvalue()
    with pytest.raises(SystemExit) as stopped:
        client_cli.main(["--grpc", "localhost:8500", "--glossary", str(tmp_path / "terms.tsv")],
                        stdin=io.BytesIO(b"a\n"), stdout=io.StringIO(), stderr=io.StringIO())
    assert stopped.value.code == 2
    assert "over REST (--url) only" in capsys.readouterr().err


def test_client_refusals_and_unmet_phrases(served, words, tmp_path):
    stdout, stderr = io.StringIO(), io.StringIO()
    (tmp_path / "bad.jsonl").write_text('{"avoid": [""]}\n', encoding="utf-8")
    code = client_cli.main(["--url", served.url, "--constraints", str(tmp_path / "bad.jsonl")],
                           stdin=io.BytesIO(b"a dog runs .\n"), stdout=stdout, stderr=stderr)
    assert code == 2 and "HTTP 400: instances[0].avoid[0] is an empty phrase" in stderr.getvalue()
    client = tfserving_client.TFServingClient(
        tfserving_client.RestTransport(served.url, "nmt"), batch_size=4)
    [empty, full] = client.translate(["", "a dog runs ."], constraints=[
        LineConstraints((words[0],)), LineConstraints((words[0],))])
    assert empty.unmet == (words[0],) and full.unmet == () and words[0] in full.text.split()


# ---- the page: completing an edited translation, a glossary ---------------------------------

@pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER),
                    reason="needs Chromium and chromedriver (apt-get install chromium chromium-driver)")
def test_page_completes_an_edited_translation_and_takes_a_glossary(served, words, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    sentence = LINES[1]
    driver = headless_chromium()
    try:
        driver.get(served.url + "/")
        wait = page_wait(driver)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#model option"))
        assert driver.find_element(By.ID, "glossary-box").is_displayed()
        driver.find_element(By.ID, "text").send_keys(sentence)
        driver.find_element(By.ID, "translate").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".sentence .best"))
        best = driver.find_element(By.CSS_SELECTOR, ".sentence .best")
        assert best.get_attribute("contenteditable") == "plaintext-only"

        def rows():
            return [e.get_attribute("textContent")
                    for e in driver.find_elements(By.CSS_SELECTOR, "table.heatmap th.row-label")]

        # Type a prefix over the translation: once typing pauses, the model completes it
        # from the cursor on, and the heat map follows the new output.
        prefix = f"{words[0]} {words[1]}"
        best.click()
        best.send_keys(Keys.CONTROL, "a")
        best.send_keys(prefix)
        wait.until(lambda d: d.find_element(By.CSS_SELECTOR, ".sentence").get_attribute(
            "data-prefix") == prefix)
        status, answer = served.call("/translate", {"text": [sentence], "prefix": [prefix],
                                                    "alignment": True})
        [expected] = answer["translations"]
        assert expected["text"].startswith(prefix) and len(expected["text"]) > len(prefix)
        assert best.text == expected["text"]
        [block] = expected["alignment"]["sentences"]
        assert block["target_tokens"][:2] == [words[0], words[1]]
        assert rows() == block["target_tokens"] + ["</s>"]
        # The cursor stays after the prefix: what is typed next extends it.
        best.send_keys(f" {words[2]}")
        longer = f"{prefix} {words[2]}"
        wait.until(lambda d: d.find_element(By.CSS_SELECTOR, ".sentence").get_attribute(
            "data-prefix") == longer)
        assert best.text.startswith(longer)
        status, answer = served.call("/translate", {"text": [sentence], "prefix": [longer],
                                                    "alignment": True})
        assert best.text == answer["translations"][0]["text"]
        assert rows() == answer["translations"][0]["alignment"]["sentences"][0][
            "target_tokens"] + ["</s>"]
        # A glossary term beside the text: its target term is in the output.
        driver.find_element(By.CSS_SELECTOR, "#glossary .term-source").send_keys("dog")
        driver.find_element(By.CSS_SELECTOR, "#glossary .term-target").send_keys(words[3])
        status, answer = served.call("/translate", {"text": [sentence],
                                                    "glossary": [["dog", words[3]]]})
        glossed = answer["translations"][0]["text"]
        assert words[3] in glossed.split()
        driver.find_element(By.ID, "translate").click()
        # "translating…" shows until the answer is drawn, and the status is cleared then.
        wait.until(lambda d: d.find_element(By.ID, "status").text == "" and d.find_element(
            By.CSS_SELECTOR, ".sentence .best").text == glossed)
        assert driver.save_screenshot(str(tmp_path / "page.png"))
    finally:
        driver.quit()
