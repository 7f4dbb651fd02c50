"""Vocabulary selection end to end: the lexical table (IBM Model 1) and its command, then
``--shortlist`` through every path a user takes: the Translator, ``keras-nmt translate``
and ``evaluate``, the SavedModel (both loaders) and onnxruntime. The search itself is
tested against brute force in test_search.py."""

import io
import json
import shutil

import numpy as np
import pytest

from conftest import onnx_files, savedmodel_loaders
from keras_nmt import lexicon as lexicon_lib
from keras_nmt.cli import evaluate as evaluate_cli
from keras_nmt.cli import lexicon as lexicon_cli
from keras_nmt.cli import onnx_translate as onnx_cli
from keras_nmt.cli import translate as translate_cli
from keras_nmt.constants import BOS_ID, EOS_ID, PAD_ID
from keras_nmt.export import parity
from keras_nmt.rundir import RunDir

SHORTLIST = (5, 2)  # the tiny run's 5 most frequent words and 2 translations a word
BEAM = 3


# 1. The lexical table.


def test_model1_first_round_by_hand():
    # "a" -> "x"; "a b" -> "x y" (ids a=4, b=5; x=4, y=5). From uniform, each target
    # token spreads one count over its sentence's source words and NULL:
    #   (NULL,x) 1/2 + 1/3, (a,x) 1/2 + 1/3, (b,x) 1/3, (NULL,y) (a,y) (b,y) 1/3 each.
    # t(x|a) = (5/6) / (7/6) = 5/7, t(y|a) = 2/7, t(x|b) = t(y|b) = 1/2.
    table = lexicon_lib.train_model1([([4], [4]), ([4, 5], [4, 5])], 6, 6, iterations=1, best=3)
    np.testing.assert_array_equal(table.targets[4], [4, 5, PAD_ID])
    np.testing.assert_allclose(table.probs[4], [5 / 7, 2 / 7, 0.0], rtol=1e-6)
    np.testing.assert_array_equal(table.targets[5], [4, 5, PAD_ID])  # a tie: lower id first
    np.testing.assert_allclose(table.probs[5], [0.5, 0.5, 0.0], rtol=1e-6)
    # The reserved source ids translate to nothing (padding adds no candidates).
    for reserved in (PAD_ID, BOS_ID, EOS_ID):
        assert not table.targets[reserved].any()
    assert table.info["pairs"] == 2 and table.info["alignment_entries"] == 2 * 1 + 3 * 2


def test_model1_learns_the_word_pairs():
    # Each source word s in 4..7 always comes with target word s + 1 (and a shared word 9).
    rng = np.random.default_rng(0)
    pairs = []
    for _ in range(300):
        words = rng.choice([4, 5, 6, 7], size=rng.integers(1, 4), replace=False)
        pairs.append((list(words), [9] + [int(w) + 1 for w in words]))
    table = lexicon_lib.train_model1(pairs, 10, 11, iterations=5, best=2)
    for word in (4, 5, 6, 7):
        assert table.targets[word, 0] == word + 1
        assert table.probs[word, 0] > 0.7


@pytest.fixture(scope="module")
def run_copy(tiny_run, tmp_path_factory):
    """A copy of the tiny run (training built its lexical table at the end)."""
    copy = tmp_path_factory.mktemp("shortlist") / "run"
    shutil.copytree(tiny_run, copy)
    return copy


def test_training_built_the_table_and_the_command_rebuilds_it(tiny_run, run_copy, capsys):
    built = RunDir(tiny_run).load_lexicon()
    assert built.best == lexicon_lib.DEFAULT_BEST and built.info["pairs"] > 100
    assert lexicon_cli.main([str(run_copy), "--translations", "3", "--iterations", "2"]) == 0
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert report["best"] == 3 and report["iterations"] == 2 and report["bytes"] > 0
    assert "EM round 2/2" in err and "wrote" in err
    rebuilt = RunDir(run_copy).load_lexicon()
    assert rebuilt.targets.shape == (built.targets.shape[0], 3)
    # A table that does not fit the vocabulary is refused with what to do.
    source, target = RunDir(run_copy).load_vocabularies()
    with pytest.raises(lexicon_lib.LexiconError, match="rebuild it"):
        rebuilt.check(len(source) + 1, len(target))


def test_lexicon_command_errors_are_one_line(tmp_path, capsys):
    assert lexicon_cli.main([str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "run directory not found" in err


# 2. The Translator and the commands.


@pytest.fixture(scope="module")
def translator(tiny_run):
    from keras_nmt.translator import Translator

    return Translator.from_run_dir(tiny_run)


@pytest.fixture(scope="module")
def lines(tiny_corpus):
    return (tiny_corpus / "valid.en").read_text(encoding="utf-8").splitlines()


def test_a_shortlist_of_every_word_is_the_exact_search(translator, lines):
    exact = translator.translate(lines, beam_size=BEAM, nbest=2)
    every = translator.translate(lines, beam_size=BEAM, nbest=2,
                                 shortlist=(len(translator.target_vocab), 1))
    for a, b in zip(exact, every):
        assert [h.text for h in a.hypotheses] == [h.text for h in b.hypotheses]
        np.testing.assert_allclose([h.score for h in a.hypotheses],
                                   [h.score for h in b.hypotheses], atol=1e-5)


def test_selected_translations_use_only_candidate_words(translator, lines):
    frequent, best = SHORTLIST
    table = translator.lexicon.targets
    for line, t in zip(lines, translator.translate(lines, beam_size=BEAM, shortlist=SHORTLIST,
                                                   batch_size=1)):
        source = translator.encode([line])[0]
        allowed = set(range(4 + frequent)) | {int(x) for s in source for x in table[s, :best]}
        assert set(translator.target_vocab.encode(t.tokens)) <= allowed, line


def test_shortlist_errors(translator, run_copy, tmp_path, capsys):
    from keras_nmt.translator import Translator

    with pytest.raises(lexicon_lib.LexiconError, match="exceeds"):
        translator.translate(["a"], shortlist=(5, lexicon_lib.DEFAULT_BEST + 1))
    bare = tmp_path / "bare"
    shutil.copytree(run_copy, bare)
    (bare / "lexicon.npz").unlink()
    with pytest.raises(lexicon_lib.LexiconError, match="keras-nmt lexicon"):
        Translator.from_run_dir(bare).translate(["a"], shortlist=SHORTLIST)
    # The commands say it in one line, before loading TensorFlow's model.
    code = translate_cli.main([str(bare), "--shortlist", "5,2"], stdin=io.BytesIO(b"a\n"))
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "lexical table" in err
    with pytest.raises(SystemExit):
        translate_cli.main([str(bare), "--shortlist", "0,0"], stdin=io.BytesIO(b"a\n"))
    assert "not both 0" in capsys.readouterr().err


def test_translate_and_evaluate_commands_take_the_shortlist(tiny_run, tiny_corpus, translator,
                                                            lines, capsys):
    stdin = io.BytesIO("\n".join(lines).encode("utf-8") + b"\n")
    assert translate_cli.main([str(tiny_run), "--beam", str(BEAM), "--shortlist", "5,2",
                               "--quiet"], stdin=stdin) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [t.text for t in translator.translate(lines, beam_size=BEAM,
                                                        shortlist=SHORTLIST)]
    assert evaluate_cli.main([str(tiny_run), "--src", str(tiny_corpus / "valid.en"),
                              "--ref", str(tiny_corpus / "valid.fr"), "--beam", str(BEAM),
                              "--shortlist", "5,2", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)["runs"][0]
    assert result["shortlist"] == [5, 2] and result["sentences"] == len(lines)


# 3. The exported graphs.


@pytest.fixture(scope="module")
def shortlist_export(tiny_selecting_export):
    """tiny_run exported once (conftest): beam 3, --onnx --shortlist 5,2 --int8."""
    return tiny_selecting_export


def test_every_path_gives_the_keras_tokens_with_selection(shortlist_export, translator, lines):
    from keras_nmt.export.onnx import OnnxModel

    source_ids = translator.encode(lines)
    for shortlist in (SHORTLIST, (3, 1), None):
        reference = parity.from_translations(
            translator.translate(lines, beam_size=BEAM, shortlist=shortlist))
        sizes = shortlist or (0, 0)  # both 0: the whole vocabulary
        runs = {"onnx": OnnxModel(onnx_files(shortlist_export) / "nmt.onnx").run}
        for name, model in savedmodel_loaders(shortlist_export).items():
            runs[name] = lambda feeds, model=model: model.run("translate_ids", **feeds)
        for name, run in runs.items():
            decoded = parity.run_ids(run, source_ids, translator.target_vocab, BEAM, 1.0,
                                     shortlist=sizes)
            result = parity.compare(reference, decoded)
            # As without selection: onnxruntime rounds some scores differently from
            # TensorFlow, so equally scored hypotheses of the barely trained model may
            # swap there (ties allowed, nothing else); TensorFlow's paths agree exactly.
            assert parity.agrees(result, allow_ties=name == "onnx"), (name, shortlist, result)
    # The string signatures decode with the export's shortlist.
    reference = translator.translate(lines, beam_size=BEAM, shortlist=SHORTLIST)
    for name, model in savedmodel_loaders(shortlist_export).items():
        out = model.run("serving_default", sentences=lines)
        assert [x.decode("utf-8") for x in out["translations"]] == [t.text for t in reference]
        np.testing.assert_allclose(out["scores"], [t.score for t in reference], atol=1e-4)


def test_onnx_translate_uses_the_export_shortlist(shortlist_export, translator, lines, capsys):
    from keras_nmt.serving.onnx_translator import OnnxTranslator

    meta = json.loads((onnx_files(shortlist_export) / "nmt.onnx.json").read_text(encoding="utf-8"))
    assert meta["shortlist"] == [5, 2]
    assert meta["inputs"][-2:] == ["shortlist_frequent", "shortlist_best"]
    onnx = OnnxTranslator.from_export_dir(shortlist_export)
    for option, shortlist in ((True, SHORTLIST), ((3, 1), (3, 1)), (False, None)):
        reference = translator.translate(lines, beam_size=BEAM, shortlist=shortlist)
        got = onnx.translate(lines, beam_size=BEAM, shortlist=option)
        result = parity.compare(parity.from_translations(reference), parity.from_translations(got))
        assert parity.agrees(result, allow_ties=True), (option, result)
        # The command line: the export's shortlist by default, --full-vocabulary without.
        argv = [str(shortlist_export), "--quiet"] + (["--full-vocabulary"] if option is False else
                                                     ["--shortlist", "3,1"] if option is not True else [])
        stdin = io.BytesIO(("\n".join(lines) + "\n").encode("utf-8"))
        assert onnx_cli.main(argv, stdin=stdin) == 0
        assert capsys.readouterr().out.splitlines() == [t.text for t in got]
