"""Words the vocabulary leaves out: ``vocab_min_count`` cuts the word vocabularies, the
unknown-word dictionary (keras_nmt.lexicon.unk_dictionary) is built from the training split for
``--unk-replace``, and translate / evaluate read it."""

import argparse
import json
import shutil

import numpy as np
import pytest

from keras_nmt.lexicon import table as lexicon, unk_dictionary
from keras_nmt.runner import run_data
from keras_nmt.cli import lexicon as lexicon_cli
from keras_nmt.cli.common import unk_replacement
from keras_nmt.core.config import Config, ConfigError
from keras_nmt.core.constants import UNK_ID
from keras_nmt.rundir.run_directory import RunDir
from keras_nmt.runner.train_options import TrainOptions, new_run_config
from keras_nmt.text.vocab import Vocabulary

from support import edit_json

# The <unk> output bias of the test export's model: <unk> for some words, not all.
UNK_BIAS = 3.0


def test_a_minimum_count_leaves_rarer_words_out_whatever_the_size():
    counts = {"a": 5, "b": 3, "c": 2, "d": 1}
    assert Vocabulary.from_counts(counts, 100).tokens[4:] == ("a", "b", "c", "d")
    assert Vocabulary.from_counts(counts, 100, min_count=3).tokens[4:] == ("a", "b")
    assert Vocabulary.from_counts(counts, 5, min_count=2).tokens[4:] == ("a",)  # size still cuts
    assert Vocabulary.build([["x", "y", "x"], ["x"]], 10, min_count=2).tokens[4:] == ("x",)
    with pytest.raises(ConfigError, match="vocab_min_count must be a positive integer"):
        Config(vocab_min_count=0)


def test_the_prepared_split_reads_left_out_words_as_unk(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.en").write_text("the cat sat\nthe dog sat\nthe cat ran\nthe dog ran\n"
                                   "a zebu\n", encoding="utf-8")
    (data / "train.fr").write_text("le chat dort\nle chien dort\nle chat court\n"
                                   "le chien court\nun zébu\n", encoding="utf-8")
    (data / "valid.en").write_text("the cat\n", encoding="utf-8")
    (data / "valid.fr").write_text("le chat\n", encoding="utf-8")
    run = RunDir(tmp_path / "run")
    options = TrainOptions(variant="search30", data=str(data), out=str(run.path),
                           overrides={"vocab_min_count": 2}).for_new_run()
    config, _ = run_data.prepare(options, new_run_config(options), run, log=lambda text: None)
    source, target = run.load_vocabularies()
    assert source.tokens[4:] == ("the", "cat", "dog", "ran", "sat")
    assert target.tokens[4:] == ("le", "chat", "chien", "court", "dort")
    assert (config.src_vocab_size, config.tgt_vocab_size) == (9, 9)
    split = run.prepared_split(needed_for="the test")
    try:
        assert split.token_counts(0, 9)[UNK_ID] == 2  # a, zebu
        assert split.token_counts(1, 9)[UNK_ID] == 2  # un, zébu
    finally:
        split.close()
    # Every word the source <unk> stands for was seen once: the shortlist's rare-word rule
    # decodes a sentence holding one over the whole vocabulary, as it would the word.
    assert run.load_data_info()["source_left_out_most"] == 1
    table = lexicon.build_for_run(run, iterations=1)
    assert table.info["unk_rare"] and table.source_counts[UNK_ID] == 2
    assert table.rare_sources()[UNK_ID] and lexicon.marked_sources(table.selection_table())[UNK_ID]
    assert not table.rare_sources()[4]  # "the", seen 4 times


def test_a_source_unk_that_stands_for_a_frequent_word_is_not_rare():
    assert run_data.left_out_most({"the": 9, "cat": 5, "zebu": 1}, Vocabulary.from_counts(
        {"the": 9, "cat": 5, "zebu": 1}, 5)) == 5  # the size cut "cat"
    assert run_data.left_out_most({"the": 9}, Vocabulary.from_counts({"the": 9}, 5)) == 0
    targets = np.full((6, 2), 4, np.int32)
    counts = np.array([0, 40, 0, 0, 9, 1])
    for unk_rare in (False, True):
        table = lexicon.Lexicon(targets, np.ones((6, 2), np.float32), {"unk_rare": unk_rare}, counts)
        assert list(table.rare_sources()) == [False, unk_rare, False, False, False, True]


@pytest.mark.end_to_end
def test_training_with_a_minimum_count_reports_unk_replaced_as_evaluate_scores_it(
        tiny_corpus, tmp_path, cli_runner):
    """The report at the end of training replaces <unk> through the dictionary it built
    first, and ``evaluate`` with no option gives that same BLEU; ``--no-unk-replace``
    scores the model's own <unk>."""
    from support import tiny_args

    out = tmp_path / "run"
    result = cli_runner("train", "--variant", "search30", "--data", tiny_corpus, "--out", out,
                        "--max-steps", 12, *tiny_args(vocab_min_count=3), prog="train.py")
    assert result.returncode == 0, result.stderr
    run = RunDir(out)
    report = json.loads(run.summary_path.read_text(encoding="utf-8"))["held_out"]
    assert report["unk_replace"] is True
    assert run.dictionary_path.is_file()
    assert "<unk> replaced" in result.stdout
    # The training sample was tokenized once, for the dictionary and the lexical table.
    assert "dictionary and lexical table: tokenizing" in result.stderr
    assert not any(line.startswith("lexical table: tokenizing")
                   for line in result.stderr.replace("\r", "\n").splitlines())
    split = {"valid": "valid", "test": "test"}[report["split"]]
    scores = {}
    for options in ((), ("--no-unk-replace",)):
        evaluated = cli_runner("evaluate", out, "--src", tiny_corpus / f"{split}.en", "--ref",
                               tiny_corpus / f"{split}.fr", "--json", "--quiet", *options)
        assert evaluated.returncode == 0, evaluated.stderr
        scores[options] = json.loads(evaluated.stdout)["runs"][0]
    assert scores[()]["unk_replace"] and scores[()]["bleu"] == pytest.approx(report["bleu"])
    assert not scores[("--no-unk-replace",)]["unk_replace"]


def _run_with_split(tiny_run, tmp_path, pairs):
    """A copy of the tiny run whose training split is ``pairs`` (the model and its
    vocabularies are the tiny run's; its prepared split, the old one's ids, is left out)."""
    copy = tmp_path / "run"
    shutil.copytree(tiny_run, copy, ignore=shutil.ignore_patterns("tensorboard", "prepared"))
    run = RunDir(copy)
    for side, lang in ((0, "en"), (1, "fr")):
        (tmp_path / f"split.{lang}").write_text(
            "".join(pair[side] + "\n" for pair in pairs), encoding="utf-8")
    info = json.loads(run.data_path.read_text(encoding="utf-8"))
    edit_json(run.data_path, splits={**info["splits"], "train": {
        "source": str(tmp_path / "split.en"), "target": str(tmp_path / "split.fr")}})
    return run


def test_the_dictionary_gives_a_left_out_word_the_translation_training_saw(tiny_run, tmp_path):
    source_vocab, target_vocab = RunDir(tiny_run).load_vocabularies()
    # Words that read back as themselves from a line of text (no elision, no punctuation).
    known_en = [word for word in source_vocab.tokens[4:] if word.isalpha()][:8]
    known_fr = [word for word in target_vocab.tokens[4:] if word.isalpha()][:8]
    assert "zebu" not in source_vocab and "zébu" not in target_vocab
    # The known words translate one to one; "zebu" twice with "zébu", never else.
    pairs = [(f"{a} {b}", f"{x} {y}") for a, x in zip(known_en, known_fr)
             for b, y in zip(known_en, known_fr) if a != b]
    pairs += [(f"{known_en[0]} zebu", f"{known_fr[0]} zébu"),
              (f"zebu {known_en[1]}", f"zébu {known_fr[1]}")]
    run = _run_with_split(tiny_run, tmp_path, pairs)
    built = unk_dictionary.write_for_run(run, iterations=5)
    assert built.entries["zebu"] == "zébu"
    assert all(word not in target_vocab for word in built.entries.values())
    assert built.info["target_words_unknown"] == 1 and built.info["pairs"] == len(pairs)
    # Stored as translate's --dictionary reads it, one source<TAB>target line a word.
    lines = run.dictionary_path.read_text(encoding="utf-8").splitlines()
    assert "zebu\tzébu" in lines and len(lines) == len(built.entries)

    # translate and evaluate: --unk-replace reads it; --dictionary FILE wins.
    inspected = [run.inspect("last")]
    args = argparse.Namespace(unk_replace=True, dictionary=None)
    assert unk_replacement(args, inspected) == (True, built.entries)
    other = tmp_path / "other.tsv"
    other.write_text("zebu\tzébus\n", encoding="utf-8")
    args = argparse.Namespace(unk_replace=None, dictionary=str(other))
    assert unk_replacement(args, inspected) == (True, {"zebu": "zébus"})
    # Unasked, a run of vocab_min_count 1 keeps <unk> (the paper's output).
    args = argparse.Namespace(unk_replace=None, dictionary=None)
    assert unk_replacement(args, inspected) == (False, None)
    args = argparse.Namespace(unk_replace=False, dictionary=None)
    assert unk_replacement(args, inspected) == (False, None)

    # A split whose every target word the vocabulary holds: no dictionary, the old one goes.
    (tmp_path / "known").mkdir()
    run = _run_with_split(tiny_run, tmp_path / "known", pairs[:-2])
    run.write_dictionary({"stale": "entry"})
    assert unk_dictionary.write_for_run(run, iterations=1) is None
    assert not run.dictionary_path.exists()
    args = argparse.Namespace(unk_replace=True, dictionary=None)
    assert unk_replacement(args, [run.inspect("last")]) == (True, None)  # words are copied


def test_one_reading_of_the_sample_serves_both_tables(tiny_run, tiny_spm_run, tmp_path):
    """A run that gets a dictionary tokenizes its training sample once: read through the
    vocabularies, the dictionary's sample gives the lexical table the codecs give."""
    source_vocab, target_vocab = RunDir(tiny_run).load_vocabularies()
    known_en = [word for word in source_vocab.tokens[4:] if word.isalpha()][:6]
    known_fr = [word for word in target_vocab.tokens[4:] if word.isalpha()][:6]
    pairs = [(f"{a} {b} zebu", f"{x} {y} zébu") for a, x in zip(known_en, known_fr)
             for b, y in zip(known_en[::-1], known_fr[::-1])] + [("yak .", "yack .")]
    run = _run_with_split(tiny_run, tmp_path, pairs)
    sample = unk_dictionary.WordSample.if_needed(run)
    assert sample is not None and len(sample.pairs) == len(pairs)
    ids, lines, sampled = sample.in_vocabularies(source_vocab, target_vocab)
    assert (lines, sampled) == (len(pairs), len(pairs))
    source_ids = ids.arrays()[0]
    assert UNK_ID in source_ids and source_ids.max() < len(source_vocab)
    apart = lexicon.build_for_run(run, iterations=2)
    shared = lexicon.build_for_run(run, iterations=2, sample=lambda: (ids, lines, sampled))
    np.testing.assert_array_equal(shared.targets, apart.targets)
    np.testing.assert_array_equal(shared.probs, apart.probs)
    assert shared.info["pairs"] == apart.info["pairs"] == len(pairs)
    built = unk_dictionary.build_for_run(run, iterations=2, sample=sample)
    assert built.entries == unk_dictionary.build_for_run(run, iterations=2).entries
    assert built.entries["zebu"] == "zébu"
    # No dictionary to build: nothing read for it.
    assert unk_dictionary.WordSample.if_needed(RunDir(tiny_run)) is None
    assert unk_dictionary.WordSample.if_needed(RunDir(tiny_spm_run)) is None


def test_the_lexicon_command_builds_the_dictionary_too(tiny_run, tmp_path, capsys):
    source_vocab, target_vocab = RunDir(tiny_run).load_vocabularies()
    a, b = [word for word in source_vocab.tokens[4:] if word.isalpha()][:2]
    x, y = [word for word in target_vocab.tokens[4:] if word.isalpha()][:2]
    run = _run_with_split(tiny_run, tmp_path, [(f"{a} {b}", f"{x} {y}"), (f"{a} yak", f"{x} yack")] * 3)
    assert lexicon_cli.main([str(run.path), "--iterations", "2", "--quiet"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["dictionary"]["path"] == str(run.dictionary_path)
    assert report["dictionary"]["entries"] >= 1
    assert "yak\tyack" in run.dictionary_path.read_text(encoding="utf-8").splitlines()


def test_a_run_whose_prepared_split_has_no_target_unk_reads_no_sample(tiny_run, monkeypatch):
    # The tiny run's vocabularies hold every training word: its prepared ids say so.
    def unread(*args, **kwargs):
        raise AssertionError("the training sample was read")

    monkeypatch.setattr(unk_dictionary, "sampled_training_pairs", unread)
    assert unk_dictionary.build_for_run(RunDir(tiny_run), iterations=1) is None


def test_a_sentencepiece_run_has_no_dictionary(tiny_spm_run):
    assert unk_dictionary.build_for_run(RunDir(tiny_spm_run), iterations=1) is None


def test_an_export_replaces_unk_as_translate_does(tiny_run, tmp_path, cli_runner):
    """``export --unk-replace``: the SavedModel (TF1 session loader, the one TF Serving
    uses) and onnxruntime write what ``Translator.translate(unk_replace=True)`` writes with
    the run's dictionary, over the whole vocabulary and with the export's shortlist; the
    export's own self-check compared the SavedModel already."""
    from keras_nmt.export.loaders import SessionModel
    from keras_nmt.decoding.onnx_translator import OnnxTranslator
    from keras_nmt.serving.registry import Registry
    from keras_nmt.decoding.keras_translator import Translator
    from support import ServerThread, edit_json, peaked_weights_run

    run = RunDir(peaked_weights_run(tiny_run, tmp_path / "run", unk_bias=UNK_BIAS))
    words = [word for word in run.load_vocabularies()[0].tokens[4:] if word.isalpha()][:40]
    dictionary = {word: f"X:{word}" for word in words[::2]}
    run.write_dictionary(dictionary)
    # A run trained with vocab_min_count above 1 replaces by default, in every command.
    edit_json(run.config_path, vocab_min_count=2)
    shortlist = (5, 2)
    result = cli_runner("export", run.path, "--out", tmp_path / "exports", "--onnx", "--beam", 3,
                        "--shortlist", ",".join(map(str, shortlist)), "--quiet")
    assert result.returncode == 0, result.stderr
    lines = [" ".join(words[i:i + 5]) + " ." for i in range(0, 40, 5)] + ["", words[0] + " . " + words[1].title() + " ."]
    translator = Translator.from_run_dir(run.path)
    # The Python API replaces by default too, through the run's dictionary.
    assert translator.unk_replace and translator.dictionary == dictionary
    expected, plain = {}, {}
    for selection in (None, shortlist):
        options = dict(beam_size=3, shortlist=selection)
        plain[selection] = [t.text for t in translator.translate(lines, unk_replace=False, **options)]
        expected[selection] = [t.text for t in translator.translate(
            lines, unk_replace=True, dictionary=dictionary, **options)]
        assert [t.text for t in translator.translate(lines, **options)] == expected[selection]
        # Some <unk>, some words: the replacement changes some tokens and keeps the others.
        assert sum(text.count("<unk>") for text in plain[selection]) >= 3
        assert not any("<unk>" in text for text in expected[selection])
        assert any("X:" in text for text in expected[selection])
        assert any(token in translator.target_vocab
                   for text in expected[selection] for token in text.split())
    # The shortlist decodes something else: the export must have used it to match.
    assert expected[shortlist] != expected[None]

    session = SessionModel(tmp_path / "exports" / "nmt" / "1")
    try:
        served = session.run("serving_default", sentences=lines)["translations"]
    finally:
        session.close()
    assert [text.decode("utf-8") for text in served] == expected[shortlist]
    onnx = OnnxTranslator.from_export_dir(tmp_path / "exports")
    for selection, option in ((shortlist, True), (None, False)):
        replaced = onnx.translate(lines, beam_size=3, shortlist=option)
        assert [t.text for t in replaced] == expected[selection]
        assert [t.text for t in onnx.translate(lines, beam_size=3, shortlist=option,
                                               unk_replace=False)] == plain[selection]
    # serve answers both APIs with the replaced texts (the tokens of the JSON API too), with
    # the export's shortlist as onnxruntime's default.
    assert tuple(onnx.shortlist) == shortlist
    replaced = onnx.translate(lines, beam_size=3)
    served = expected[shortlist]
    # One batch, as the Translator decoded them: a shortlist is chosen for a batch.
    with ServerThread(Registry.from_export_dir(tmp_path / "exports"), batch_size=32) as server:
        status, answer = server.call("/v1/models/nmt:predict", {
            "signature_name": "translate",
            "inputs": {"sentences": lines, "beam_size": 3, "alpha": -1.0}})
        assert status == 200, answer
        assert answer["outputs"]["translations"] == served
        status, answer = server.call("/translate", {"text": lines, "beam": 3})
        assert status == 200, answer
        assert [t["text"] for t in answer["translations"]] == served
        tokens = [t["nbest"][0]["tokens"] for t in answer["translations"]]
        assert tokens == [list(t.tokens) for t in replaced]
        assert "<unk>" not in sum(tokens, []) and any(":" in token for token in sum(tokens, []))
    metadata = json.loads((tmp_path / "exports" / "nmt" / "1" / "onnx" / "nmt.onnx.json")
                          .read_text(encoding="utf-8"))
    assert metadata["unk_replace"] is True and metadata["dictionary"] == "nmt.dictionary.tsv"

    # evaluate scores the replaced translations (the whole vocabulary): against themselves, 100.
    expected = expected[None]
    kept = [i for i, line in enumerate(lines) if line]
    (tmp_path / "src.en").write_text("".join(lines[i] + "\n" for i in kept), encoding="utf-8")
    (tmp_path / "ref.fr").write_text("".join(expected[i] + "\n" for i in kept), encoding="utf-8")
    scores = {}
    for options in ((), ("--no-unk-replace",)):
        result = cli_runner("evaluate", run.path, "--src", tmp_path / "src.en", "--ref",
                            tmp_path / "ref.fr", "--beam", 3, "--json", "--quiet", *options)
        assert result.returncode == 0, result.stderr
        scores[options] = json.loads(result.stdout)["runs"][0]
    assert scores[()]["bleu"] == pytest.approx(100.0)
    assert scores[()]["unk_replace"] and not scores[("--no-unk-replace",)]["unk_replace"]
    assert scores[("--no-unk-replace",)]["bleu"] < 90.0
    source = (tmp_path / "src.en").read_text(encoding="utf-8")
    result = cli_runner("translate", run.path, "--beam", 3, "--quiet", stdin=source)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [expected[i] for i in kept]
    result = cli_runner("translate", run.path, "--no-unk-replace", "--dictionary",
                        run.dictionary_path, stdin=source)
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "--no-unk-replace" in result.stderr


def test_unk_replacing_exports_are_refused_in_one_line_where_nothing_replaces(
        tiny_spm_run, tmp_path, cli_runner):
    result = cli_runner("export", tiny_spm_run, "--out", tmp_path / "exports", "--unk-replace")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "--unk-replace needs a word run" in result.stderr
