"""``keras-nmt translate`` end to end.

The two decoding runs are subprocesses, as a user starts them; they start together (each
pays for TensorFlow's import) and use a copy of the tiny run whose weights strongly
prefer <unk>, so that --no-unk and --unk-replace are tested on a model that really
generates <unk>. The refusals run in this process (cli_runner), the help and a byte
stream that is not UTF-8 in a fresh one.
"""

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from support import ROOT, StreamProbe, peaked_weights_run
from keras_nmt.core.constants import UNK
from keras_nmt.text.word import tokenize

PROG = "keras-nmt translate"
INPUT_LINES = [
    "The man is here.",
    "",
    "   ",
    "The round red Italian knives of the old woman are on the table near the house.",
    "\t",
    "Mr Smith sees the cat\u2028and the dog.",  # U+2028 is a space, not a line break
    "A dog.\r",
    "The big black cats of the man sleep under the small green tree in the garden.",
    "The woman.",
]
INPUT = "\n".join(INPUT_LINES) + "\n"
MAX_SOURCE_LEN = 8


def command(*args):
    return [sys.executable, "-m", "keras_nmt.cli", "translate", *map(str, args)]


def run_cli(*args, input=INPUT, timeout=120):
    return subprocess.run(command(*args), input=input, capture_output=True, text=True,
                          encoding="utf-8", cwd=ROOT, timeout=timeout)


def unk_loving_run(source, target):
    """A copy of ``source`` with peaked random weights and a large <unk> output bias."""
    return peaked_weights_run(source, target, unk_bias=50.0)


@pytest.fixture(scope="module")
def decoded(tiny_run, tmp_path_factory):
    """Starts both decoding runs at once; returns their results and files."""
    base = tmp_path_factory.mktemp("translate_cli")
    loving = unk_loving_run(tiny_run, base / "unk_loving")
    words = {w for line in INPUT_LINES for w in tokenize(line, "en")}
    dictionary = {w: f"X:{w}" for w in words if w != "."}
    (base / "dict.tsv").write_text("".join(f"{w}\t{t}\n" for w, t in sorted(dictionary.items())),
                                   encoding="utf-8")
    jobs = {
        "nbest": command(loving, "--nbest", 3, "--attention", base / "att.jsonl", "--unk-replace",
                         "--dictionary", base / "dict.tsv", "--max-source-len", MAX_SOURCE_LEN),
        "plain": command(loving, tiny_run, "--no-unk", "--batch-size", 2),
    }
    processes = {
        name: subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, encoding="utf-8", cwd=ROOT)
        for name, cmd in jobs.items()
    }
    results = {}
    for name, process in processes.items():
        out, err = process.communicate(INPUT, timeout=300)
        results[name] = subprocess.CompletedProcess(jobs[name], process.returncode, out, err)
    return {"results": results, "attention": base / "att.jsonl", "dictionary": dictionary}


def test_plain_output_has_one_line_per_input_line_and_no_unk(decoded):
    result = decoded["results"]["plain"]
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.endswith("\n")
    lines = result.stdout[:-1].split("\n")
    assert len(lines) == len(INPUT_LINES)
    for source, output in zip(INPUT_LINES, lines):
        assert (output == "") == (source.strip() == "")
    assert UNK not in result.stdout
    assert "Traceback" not in result.stderr and "warning" not in result.stderr
    assert f"translated {len(INPUT_LINES)} sentences" in result.stderr  # progress on stderr


def test_nbest_format_truncation_warning_and_unk_replacement(decoded):
    result = decoded["results"]["nbest"]
    assert result.returncode == 0, result.stderr[-3000:]
    entries = [line.split(" ||| ") for line in result.stdout.splitlines()]
    assert all(len(entry) == 3 for entry in entries)
    indices = [int(index) for index, _, _ in entries]
    assert indices == sorted(indices) and set(indices) == set(range(len(INPUT_LINES)))
    for i, source in enumerate(INPUT_LINES):
        mine = [(text, float(score)) for index, text, score in entries if int(index) == i]
        if not source.strip():
            assert mine == [("", 0.0)]
            continue
        assert len(mine) == 3
        scores = [score for _, score in mine]
        assert scores == sorted(scores, reverse=True) and all(s < 0 for s in scores)
    assert UNK not in result.stdout

    long = sum(len(tokenize(line, "en")) > MAX_SOURCE_LEN for line in INPUT_LINES)
    assert long == 3
    warnings = [line for line in result.stderr.splitlines() if line.startswith(PROG)]
    assert warnings == [
        f"{PROG}: warning: {long} sentence(s) longer than {MAX_SOURCE_LEN} tokens were truncated "
        f"to their first {MAX_SOURCE_LEN} tokens"
    ], result.stderr

    records = [json.loads(line) for line in decoded["attention"].read_text(encoding="utf-8").splitlines()]
    assert [r["index"] for r in records] == list(range(len(INPUT_LINES)))
    dictionary = decoded["dictionary"]
    best = {int(index): text for index, text, _ in reversed(entries)}
    for source, record in zip(INPUT_LINES, records):
        if not source.strip():
            assert record["source"] == record["target"] == record["attention"] == []
            continue
        tokens = tokenize(source, "en")
        assert record["source"] == tokens[:MAX_SOURCE_LEN] + ["</s>"]
        assert record["truncated"] == max(0, len(tokens) - MAX_SOURCE_LEN)
        assert record["target"][-1] == "</s>" and len(record["target"]) > 1
        matrix = np.array(record["attention"])
        assert matrix.shape == (len(record["target"]), len(record["source"]))
        np.testing.assert_allclose(matrix.sum(axis=1), 1.0, atol=1e-4)
        # Every output word was <unk>: each is now the most attended source word (or
        # one of the tied best), through the dictionary.
        for step, token in enumerate(record["target"][:-1]):
            row = matrix[step, :-1]
            tied = {record["source"][c] for c in np.flatnonzero(row == row.max())}
            assert token in {dictionary.get(w, w) for w in tied}
        assert " ".join(record["target"][:-1]).replace(" .", ".") == best[record["index"]]


@pytest.mark.parametrize("case, expected", [
    ("missing", "run directory not found"),
    ("file", "is not a directory"),
    ("empty_dir", "is not a run directory (no config.json)"),
    ("no_checkpoint", "holds no trained weights (no checkpoint)"),
    ("bad_config", "holds an unreadable file"),
    ("mismatch", "differ (line 11:"),
    ("bad_dictionary", "line 1: expected 'source<TAB>target'"),
    ("nbest_over_beam", "--nbest 3 needs a beam of at least 3"),
    ("bad_beam", "argument --beam: expected a positive integer, got '0'"),
    ("unwritable_attention", "cannot write"),
])
def test_unusable_input_fails_in_one_line(cli_runner, case, expected, tiny_run, tmp_path):
    def metadata_copy(name, weights=False):
        skip = ("tensorboard",) if weights else ("tensorboard", "checkpoints", "best")
        return Path(shutil.copytree(tiny_run, tmp_path / name, ignore=shutil.ignore_patterns(*skip)))

    args = {
        "missing": [tmp_path / "nowhere"],
        "file": [tiny_run / "config.json"],
        "empty_dir": [tmp_path],
        "no_checkpoint": [tiny_run, metadata_copy("bare")],
        "nbest_over_beam": [tiny_run, "--nbest", 3, "--beam", 2],
        "bad_beam": [tiny_run, "--beam", 0],
        "unwritable_attention": [tiny_run, "--attention", tmp_path / "no" / "such" / "dir.jsonl"],
    }.get(case)
    if case == "bad_config":
        run = metadata_copy("broken")
        (run / "config.json").write_text("{not json")
        args = [run]
    elif case == "mismatch":
        run = metadata_copy("other", weights=True)
        vocab = (run / "vocab.fr.txt").read_text(encoding="utf-8").split("\n")
        vocab[10], vocab[11] = vocab[11], vocab[10]
        (run / "vocab.fr.txt").write_text("\n".join(vocab), encoding="utf-8")
        args = [tiny_run, run]
    elif case == "bad_dictionary":
        (tmp_path / "dict.tsv").write_text("one two\n")
        args = [tiny_run, "--dictionary", tmp_path / "dict.tsv"]
    result = cli_runner("translate", *args, stdin=INPUT)  # in-process: no import to pay
    assert result.returncode == 2, result.stderr
    assert result.stdout == "" and "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{PROG}: error: ") and expected in lines[0], lines
    if case == "mismatch":
        assert str(tiny_run) in lines[0] and str(args[1]) in lines[0]


def test_help_documents_the_nbest_format():
    result = run_cli("--help", input="", timeout=60)
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert "Moses n-best" in text and "INDEX ||| translation ||| score" in text
    assert "--attention" in text and "--unk-replace" in text and "--dictionary" in text


def test_bad_utf8_input_fails_in_one_line(tiny_run):
    result = subprocess.run(command(tiny_run), input=b"The man.\nThe caf\xe9.\n", capture_output=True,
                            cwd=ROOT, timeout=60)
    assert result.returncode == 2 and result.stdout == b""
    assert result.stderr.decode().splitlines() == [
        f"{PROG}: error: input: line 2 is not UTF-8 text (bad byte at column 8)"
    ]


class _Terminal(io.BytesIO):
    def isatty(self):
        return True


def test_terminal_input_is_translated_line_by_line_and_empty_input_gives_nothing(tiny_run):
    """In-process (TensorFlow is loaded already): main() with a stdin that is a terminal."""
    from keras_nmt.cli.translate import main

    stdout, stderr = io.StringIO(), io.StringIO()
    assert main([str(tiny_run), "--beam", "1"], stdin=_Terminal(b"The man.\n\n  \nA dog."),
                stdout=stdout, stderr=stderr) == 0
    assert len(stdout.getvalue().split("\n")) == 5 and stdout.getvalue().split("\n")[1:3] == ["", ""]
    assert stderr.getvalue() == ""  # no progress line on a terminal
    stdout, stderr = io.StringIO(), io.StringIO()
    assert main([str(tiny_run)], stdin=io.BytesIO(b""), stdout=stdout, stderr=stderr) == 0
    assert stdout.getvalue() == "" and stderr.getvalue() == ""


@pytest.mark.parametrize("option", ["--unk-replace", "--dictionary"])
def test_unk_replacement_is_refused_for_rnnencdec(encdec_labelled_run, tiny_run, tmp_path, option):
    """In-process: the refusal comes before the weights (RNNsearch's here) are read."""
    from keras_nmt.cli.translate import main

    dictionary = tmp_path / "dict.tsv"
    dictionary.write_text("man\thomme\n", encoding="utf-8")
    args = [encdec_labelled_run, "--unk-replace"] if option == "--unk-replace" else [
        encdec_labelled_run, "--dictionary", dictionary]
    stdout, stderr = io.StringIO(), io.StringIO()
    assert main([str(arg) for arg in args], stdin=io.BytesIO(b"The man.\n"), stdout=stdout,
                stderr=stderr) == 2
    assert stderr.getvalue() == (f"{PROG}: error: {option} reads the attention weights, and an "
                                 "RNNencdec model (encdec30) has none\n")
    assert stdout.getvalue() == ""
    # In an ensemble with an RNNsearch run there is attention to copy from (the mean).
    from keras_nmt.core.config import check_attention
    from keras_nmt.rundir.run_directory import RunDir

    check_attention(option, [RunDir(path).load_config() for path in (encdec_labelled_run, tiny_run)])


def test_a_line_of_sentences_is_split_unless_told(tiny_run, tmp_path):
    """In-process: a line of two sentences is translated as Translator translates it, split
    (its attention record has EOS after each sentence) or, with --no-split-sentences, whole."""
    from keras_nmt.cli.translate import main
    from keras_nmt.decoding.keras_translator import Translator

    first, second = "The man is here.", "A dog sleeps under the table."
    lines = [f"{first} {second}", "A dog."]
    translator = Translator.from_run_dir(tiny_run)
    for split, flags in ((True, []), (False, ["--no-split-sentences"])):
        expected = translator.translate(lines, beam_size=2, split_sentences=split)
        stdout, stderr, attention = io.StringIO(), io.StringIO(), tmp_path / f"{split}.jsonl"
        assert main([str(tiny_run), "--beam", "2", "--quiet", "--attention", str(attention),
                     *flags], stdin=io.BytesIO("\n".join(lines).encode() + b"\n"),
                    stdout=stdout, stderr=stderr) == 0, stderr.getvalue()
        assert stdout.getvalue().split("\n")[:-1] == [t.text for t in expected]
        record = json.loads(attention.read_text(encoding="utf-8").splitlines()[0])
        sentences = [first, second] if split else lines[:1]
        assert record["source"] == [token for sentence in sentences
                                    for token in (*tokenize(sentence, "en"), "</s>")]
        assert record["target"].count("</s>") == len(sentences)
        assert np.array(record["attention"]).shape == (len(record["target"]),
                                                       len(record["source"]))
        assert record["score"] == pytest.approx(expected[0].score, abs=1e-5)


def test_input_is_read_one_chunk_ahead_of_the_output_whatever_its_size():
    """An endless input: the first chunk's translations are written and flushed once that
    chunk is read, before any line of the next, so what is held at any time is one chunk of
    lines and their translations, never the input (a 10 GB file costs what a small one does)."""
    import itertools

    from keras_nmt.cli.streaming import CHUNK_BATCHES, Output, translate_in_chunks
    from keras_nmt.decoding.translation import Translation

    read = []

    def endless():
        for number in itertools.count():
            read.append(number)
            yield f"line {number}"

    class Flushed(Exception):
        pass

    class Stream(io.StringIO):
        def flush(self):
            raise Flushed(self.getvalue())

    def translate(chunk, progress):
        progress(len(chunk))
        return [Translation(line.upper(), (), 0.0, ()) for line in chunk]

    with pytest.raises(Flushed) as flushed:
        translate_in_chunks(translate, endless(), 3, Output(Stream()), io.StringIO(), quiet=True)
    chunk = 3 * CHUNK_BATCHES
    assert len(read) == chunk
    assert str(flushed.value).splitlines() == [f"LINE {number}" for number in range(chunk)]


def test_translate_writes_a_chunk_before_it_reads_the_next(tiny_run):
    """The command streams as its helper does: on an input that ends once an answer has
    come out, the first translations are written when the first chunk, and not a line
    more, has been read."""
    from keras_nmt.cli import translate as translate_cli
    from keras_nmt.cli.streaming import CHUNK_BATCHES

    probe = StreamProbe("the cat sees the dog .", limit=4 * CHUNK_BATCHES)
    stderr = io.StringIO()
    status = translate_cli.main([str(tiny_run), "--batch-size", "1", "--quiet"], probe.stdin,
                                probe.stdout, stderr)
    assert status == 0, stderr.getvalue()
    assert probe.read_at_first_output == CHUNK_BATCHES  # a chunk: 64 batches of 1
    assert len(probe.stdout.getvalue().splitlines()) == CHUNK_BATCHES
