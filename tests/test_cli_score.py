"""``keras-nmt score`` in process: its numbers are the training NLL, its alignments are
the attention's, translate's n-best lists rescore to translate's own scores, and bad
input is a one-line error before TensorFlow work."""

import gzip
import io
import json
import shutil

import numpy as np
import pytest

from support import peaked_weights_run, scored_pairs, training_nll
from keras_nmt.cli import score, translate
from keras_nmt.evaluation.alignment import argmax_alignment, parse_pharaoh
from keras_nmt.rundir.run_directory import RunDir

PROG = "keras-nmt score"


def write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def call(*argv):
    """(exit status, stdout, stderr) of score.main."""
    stdout, stderr = io.StringIO(), io.StringIO()
    status = score.main([str(arg) for arg in argv], stdout=stdout, stderr=stderr)
    return status, stdout.getvalue(), stderr.getvalue()


def one_line_error(result, *fragments):
    status, out, err = result
    assert status == 2 and out == "", err
    [line] = err.strip().splitlines()
    assert line.startswith(f"{PROG}: error: "), line
    for fragment in fragments:
        assert fragment in line, line


@pytest.fixture(scope="module")
def pairs_files(tiny_corpus, tmp_path_factory):
    sources, targets = scored_pairs(tiny_corpus)
    base = tmp_path_factory.mktemp("score")
    return write_lines(base / "src.en", sources), write_lines(base / "tgt.fr", targets)


def test_json_tsv_alignment_and_attention(tiny_run, pairs_files, tmp_path):
    src, tgt = pairs_files
    sources = src.read_text(encoding="utf-8").splitlines()
    targets = tgt.read_text(encoding="utf-8").splitlines()
    status, out, err = call(tiny_run, "--src", src, "--tgt", tgt, "--format", "json",
                            "--alpha", "0.5", "--align", tmp_path / "a.txt",
                            "--attention", tmp_path / "att.jsonl", "--batch-size", 3)
    assert status == 0, err
    assert err.splitlines()[-1].startswith(f"scored {len(sources)} pairs in ")
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["index"] for r in records] == list(range(len(sources)))
    # The exact match: -logprob is the NLL that training computes on the same pairs.
    expected = training_nll(tiny_run, RunDir(tiny_run).load_model(), sources, targets, tmp_path)
    np.testing.assert_allclose([-r["logprob"] for r in records], expected, rtol=1e-5)
    target_codec = RunDir(tiny_run).codecs()[1]
    for r, target in zip(records, targets):
        assert r["tokens"] == len(target_codec.encode(target)) + 1 == len(r["token_logprobs"])
        assert r["logprob_per_token"] == pytest.approx(r["logprob"] / r["tokens"])
        assert r["score"] == pytest.approx(r["logprob"] / r["tokens"] ** 0.5)
        assert sum(r["token_logprobs"]) == pytest.approx(r["logprob"], abs=1e-4)
    assert records[-3]["tokens"] == 1  # an empty target: EOS alone
    # Attention: (target tokens + EOS) x (source tokens + EOS), rows summing to 1; the
    # Pharaoh links are its argmax, EOS row and column left out.
    attention = [json.loads(line) for line in (tmp_path / "att.jsonl").read_text().splitlines()]
    links = (tmp_path / "a.txt").read_text(encoding="utf-8").split("\n")[:-1]
    assert len(attention) == len(links) == len(sources)
    for record, r, line in zip(attention, records, links):
        weights = np.array(record["attention"])
        assert record["source"][-1] == record["target"][-1] == "</s>"
        assert weights.shape == (len(record["target"]), len(record["source"])) == (
            r["tokens"], weights.shape[1])
        # (each weight is written to 6 decimals)
        np.testing.assert_allclose(weights.sum(axis=1), 1.0, atol=1e-5 + 5e-7 * weights.shape[1])
        assert record["logprob"] == pytest.approx(r["logprob"])
        expected_links = argmax_alignment(weights, weights.shape[1] - 1, weights.shape[0] - 1)
        assert set(parse_pharaoh(line).sure) == expected_links
    # tsv into --out: the same numbers, three columns.
    status, out, _ = call(tiny_run, "--src", src, "--tgt", tgt, "--out", tmp_path / "s.tsv",
                          "--quiet")
    assert (status, out) == (0, "")
    rows = [line.split("\t") for line in (tmp_path / "s.tsv").read_text().splitlines()]
    assert [float(row[0]) for row in rows] == pytest.approx([r["logprob"] for r in records],
                                                            abs=1e-6)
    assert [int(row[2]) for row in rows] == [r["tokens"] for r in records]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_translate_nbest_lists_rescore_to_translates_scores(tiny_run, tiny_corpus, tmp_path):
    # A model that writes varied words and some <unk> (the barely trained tiny run only
    # repeats "." whose run the detokenizer joins into one word).
    run = peaked_weights_run(tiny_run, tmp_path / "peaked", unk_bias=3.0)
    sources = (tiny_corpus / "test.en").read_text(encoding="utf-8").splitlines()[:6] + [""]
    src = write_lines(tmp_path / "src.en", sources)
    stdout = io.StringIO()
    assert translate.main([str(run), "--nbest", "3", "--beam", "3", "--alpha", "1", "--quiet"],
                          stdin=io.BytesIO(src.read_bytes()), stdout=stdout,
                          stderr=io.StringIO()) == 0
    nbest = stdout.getvalue()
    assert " <unk> " in nbest
    with gzip.open(tmp_path / "nbest.gz", "wt", encoding="utf-8") as f:  # .gz is read too
        f.write(nbest)
    status, out, err = call(run, "--src", src, "--tgt", tmp_path / "nbest.gz", "--nbest-input",
                            "--format", "nbest", "--alpha", "1", "--quiet")
    assert status == 0, err
    given = [line.split(" ||| ") for line in nbest.splitlines()]
    scored = [line.split(" ||| ") for line in out.splitlines()]
    assert [g[:2] for g in given] == [s[:2] for s in scored]
    assert {int(g[0]) for g in given} == set(range(len(sources)))
    # The beam search's own scores (printed to 4 decimals), found again by force decoding;
    # the empty line's "translation" is scored by the model, not given 0.
    for g, s in zip(given[:-1], scored[:-1]):
        assert float(s[2]) == pytest.approx(float(g[2]), abs=2e-4)
    assert given[-1][2] == "0.0000" and float(scored[-1][2]) < 0
    # tsv: one line per n-best line.
    status, out, _ = call(run, "--src", src, "--tgt", tmp_path / "nbest.gz", "--nbest-input", "--quiet")
    assert status == 0 and len(out.splitlines()) == len(given)


def test_an_ensemble_of_a_run_and_its_copy_scores_as_the_run(tiny_run, pairs_files, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(tiny_run, copy, ignore=shutil.ignore_patterns("tensorboard"))
    src, tgt = pairs_files
    single = call(tiny_run, "--src", src, "--tgt", tgt, "--quiet")
    both = call(tiny_run, copy, "--src", src, "--tgt", tgt, "--quiet", "--weights", "best")
    assert single[0] == both[0] == 0
    for a, b in zip(single[1].splitlines(), both[1].splitlines()):
        np.testing.assert_allclose([float(x) for x in a.split("\t")],
                                   [float(x) for x in b.split("\t")], rtol=1e-5)


def test_a_sentencepiece_run_scores_pieces(tiny_spm_run, tiny_corpus, tmp_path):
    sources = (tiny_corpus / "test.en").read_text(encoding="utf-8").splitlines()[:4]
    targets = (tiny_corpus / "test.fr").read_text(encoding="utf-8").splitlines()[:4]
    src, tgt = write_lines(tmp_path / "s", sources), write_lines(tmp_path / "t", targets)
    status, out, err = call(tiny_spm_run, "--src", src, "--tgt", tgt, "--quiet",
                            "--align", tmp_path / "a")
    assert status == 0, err
    source_codec, target_codec = RunDir(tiny_spm_run).codecs()
    for row, source, target, line in zip(out.splitlines(), sources, targets,
                                         (tmp_path / "a").read_text().splitlines()):
        pieces = len(target_codec.encode(target))
        assert int(row.split("\t")[2]) == pieces + 1
        links = parse_pharaoh(line).sure
        assert {j for _, j in links} == set(range(pieces))  # every piece linked once
        assert all(i < len(source_codec.encode(source)) for i, _ in links)


def test_bad_input_is_a_one_line_error(tiny_run, encdec_labelled_run, pairs_files, tmp_path):
    src, tgt = pairs_files
    one_line_error(call(tiny_run, "--src", tmp_path / "none", "--tgt", tgt),
                   "--src file not found")
    short = write_lines(tmp_path / "short", ["Un."])
    one_line_error(call(tiny_run, "--src", src, "--tgt", short),
                   "line counts differ", "has 12 lines", "has 1")
    bad = tmp_path / "bad"
    bad.write_bytes(b"ok\n\xff\n")
    one_line_error(call(tiny_run, "--src", bad, "--tgt", bad), "line 2 is not UTF-8")
    for lines, fragment in ((["0 ||| Un. ||| -1.0", "x ||| Deux."], "line 2: not an n-best line"),
                            (["Un."], "line 1: not an n-best line"),
                            (["12 ||| Un. ||| -1.0"], "index 12 is past the last line")):
        nbest = write_lines(tmp_path / "nbest", lines)
        one_line_error(call(tiny_run, "--src", src, "--tgt", nbest, "--nbest-input"), fragment)
    one_line_error(call(encdec_labelled_run, "--src", src, "--tgt", tgt, "--align", "a"),
                   "--align")
    one_line_error(call(tiny_run, "--src", src, "--tgt", tgt, "--out", tmp_path / "no" / "x"),
                   "--out: cannot write")
    one_line_error(call(tmp_path / "no-run", "--src", src, "--tgt", tgt),
                   "run directory not found")
    with pytest.raises(SystemExit) as stop:
        score.main([str(tiny_run), "--src", str(src), "--tgt", str(tgt), "--format", "csv"],
                   stderr=io.StringIO())
    assert stop.value.code == 2
