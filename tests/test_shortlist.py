"""Vocabulary selection end to end: the lexical table (IBM Model 1) and its command, then
``--shortlist`` through every path a user takes: the Translator, ``keras-nmt translate``
and ``evaluate``, the SavedModel (both loaders) and onnxruntime. The search itself is
tested against brute force in test_search.py."""

import io
import json
import shutil

import numpy as np
import pytest

from support import onnx_files, savedmodel_loaders, shortlist_candidates
from keras_nmt.lexicon import table as lexicon_lib
from keras_nmt.data import pair_sample
from keras_nmt.cli import evaluate as evaluate_cli
from keras_nmt.cli import lexicon as lexicon_cli
from keras_nmt.cli import onnx_translate as onnx_cli
from keras_nmt.cli import translate as translate_cli
from keras_nmt.core.constants import BOS_ID, EOS_ID, PAD_ID
from keras_nmt.core.errors import LexiconError
from keras_nmt.export import parity
from keras_nmt.rundir.run_directory import RunDir

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


def test_rare_source_words_are_marked_to_select_every_word():
    # ids 0-3 reserved (PAD, UNK, BOS, EOS); words 4..7 seen 5, 2, 3 and 0 times.
    targets = np.arange(8 * 2, dtype=np.int32).reshape(8, 2) % 6 + 4
    counts = np.array([9, 0, 9, 0, 5, 2, 3, 0])
    table = lexicon_lib.Lexicon(targets, np.ones((8, 2), np.float32), {}, counts)
    # At most RARE_COUNT (2) times, UNK included when training never saw it; PAD, BOS
    # and EOS never, whatever their counts.
    assert lexicon_lib.RARE_COUNT == 2
    assert table.rare_sources().tolist() == [False, True, False, False, False, True, False, True]
    marked = table.selection_table()
    assert (marked[[1, 5, 7]] == lexicon_lib.RARE_MARK).all()
    np.testing.assert_array_equal(marked[[0, 2, 3, 4, 6]], targets[[0, 2, 3, 4, 6]])
    # A table written before the counts were kept selects for every sentence, as before.
    old = lexicon_lib.Lexicon(targets, np.ones((8, 2), np.float32), {})
    assert not old.rare_sources().any()
    np.testing.assert_array_equal(old.selection_table(), targets)
    with pytest.raises(LexiconError, match="source counts"):
        lexicon_lib.Lexicon(targets, targets.astype(np.float32), {}, counts[:5]).check(8, 10)
    # Model 1 counts the pairs it is given (build_for_run replaces them by the whole
    # prepared split's).
    trained = lexicon_lib.train_model1([([4], [4]), ([4, 5], [4, 5])], 6, 6, iterations=1)
    assert trained.source_counts.tolist() == [0, 0, 0, 0, 2, 1]


def test_lines_sampled_are_spread_through_the_file():
    chosen = pair_sample.sampled_lines(1000, 100)
    lines = [i for i in range(1000) if chosen(i)]
    assert len(lines) == 100 and lines[:3] == [9, 19, 29] and lines[-1] == 999
    assert all(b - a == 10 for a, b in zip(lines, lines[1:]))
    uneven = [i for i in range(1003) if pair_sample.sampled_lines(1003, 7)(i)]
    assert len(uneven) == 7 and uneven[0] > 100 and uneven[-1] == 1002  # never the first lines
    assert all(pair_sample.sampled_lines(50, 100)(i) for i in range(50))  # a short file: whole


def _zipf_pairs(count, seed=0, vocab=300):
    rng = np.random.default_rng(seed)
    pairs = []
    for _ in range(count):
        source = rng.zipf(1.4, rng.integers(1, 16)) % vocab + 4
        pairs.append((source.tolist(), [int(w) + 1 for w in source if w % 3] + [4]))
    return pairs


def test_streaming_em_is_the_whole_corpus_em():
    # Chunks of ~500 alignment entries (dozens of them) against one chunk holding the
    # corpus: the same table, to float64 rounding of the sums' order.
    pairs = _zipf_pairs(2000)
    whole = lexicon_lib.train_model1(pairs, 304, 305, best=20,
                                     limits=lexicon_lib.TableLimits(chunk_entries=10**9))
    streamed = lexicon_lib.train_model1(pairs, 304, 305, best=20,
                                        limits=lexicon_lib.TableLimits(chunk_entries=500))
    assert whole.info["chunks"] == 1 and streamed.info["chunks"] > 50
    assert whole.info["word_pairs_pruned"] == streamed.info["word_pairs_pruned"] == 0
    np.testing.assert_allclose(streamed.probs, whole.probs, rtol=1e-9, atol=1e-12)
    assert (streamed.targets == whole.targets).mean() > 0.999  # only exact ties may swap
    assert (streamed.targets[:, 0] == whole.targets[:, 0]).all()


def test_a_table_pruned_to_its_limit_keeps_the_translations():
    pairs = _zipf_pairs(2000)
    whole = lexicon_lib.train_model1(pairs, 304, 305, best=5)
    pruned = lexicon_lib.train_model1(
        pairs, 304, 305, best=5,
        limits=lexicon_lib.TableLimits(chunk_entries=2000, max_word_pairs=whole.info["word_pairs"] // 4))
    assert pruned.info["word_pairs"] == whole.info["word_pairs"] // 4
    assert pruned.info["word_pairs_pruned"] > 0
    # Every source word w with a translation w + 1 keeps it first.
    seen = {w for s, _ in pairs for w in s if w % 3}
    assert all(pruned.targets[w, 0] == w + 1 for w in seen)
    assert all(whole.targets[w, 0] == w + 1 for w in seen)


def _lexicon_peak(run, limits):
    import tracemalloc

    run.codecs()  # loaded before the measure: the vocabularies are not the table's
    tracemalloc.start()
    try:
        table = lexicon_lib.build_for_run(run, iterations=2, best=5, limits=limits)
        return tracemalloc.get_traced_memory()[1], table
    finally:
        tracemalloc.stop()


def test_the_lexicon_memory_is_bounded_by_its_sample(tiny_run, tmp_path):
    # A generated training split of 10x the sample, in the tiny run's own words: the
    # peak must be that of a split of the sample's size, and far below the peak of the
    # same split with no limit (the whole corpus in one table, as before the limits).
    from support import edit_json

    run_copy = tmp_path / "run"
    shutil.copytree(tiny_run, run_copy, ignore=shutil.ignore_patterns("tensorboard"))
    # The text is read (a run without its prepared split): the splits below replace it.
    shutil.rmtree(run_copy / "prepared")
    run = RunDir(run_copy)
    source_vocab, target_vocab = run.load_vocabularies()
    words = [source_vocab.decode([i])[0] for i in range(4, len(source_vocab))]
    targets = [target_vocab.decode([i])[0] for i in range(4, len(target_vocab))]
    rng = np.random.default_rng(1)
    sample = 500

    def split(name, lines):
        with open(tmp_path / f"{name}.en", "w") as en, open(tmp_path / f"{name}.fr", "w") as fr:
            for _ in range(lines):
                n = int(rng.integers(4, 14))
                en.write(" ".join(rng.choice(words, n)) + "\n")
                fr.write(" ".join(rng.choice(targets, n)) + "\n")
        return {"source": str(tmp_path / f"{name}.en"), "target": str(tmp_path / f"{name}.fr")}

    info = json.loads(run.data_path.read_text(encoding="utf-8"))
    limits = lexicon_lib.TableLimits(sample_pairs=sample, chunk_entries=5_000, max_word_pairs=10_000)
    unlimited = lexicon_lib.TableLimits(10**9, 10**9, 10**9)
    peaks = {}
    for name, lines, bound in (("small", sample, limits), ("large", 10 * sample, limits),
                               ("unlimited", 10 * sample, unlimited)):
        files = split(name, lines) if name != "unlimited" else files
        edit_json(run.data_path, splits={**info["splits"], "train": files})
        peaks[name], table = _lexicon_peak(RunDir(run_copy), bound)
        assert table.info["corpus_lines"] == lines
        assert table.info["pairs"] == min(lines, bound.sample_pairs)
        assert table.info["word_pairs"] <= bound.max_word_pairs
    assert peaks["large"] < 1.2 * peaks["small"], peaks
    assert peaks["unlimited"] > 5 * peaks["large"], peaks
    # Within what the module's docstring states: 4 bytes a sampled token, 150 an entry of
    # a chunk, 120 a word pair of the table (and a little for Python's lists).
    tokens = sample * 2 * 14
    assert peaks["large"] < 4 * tokens + 150 * 5_000 + 120 * 10_000 + 2**20, peaks

@pytest.fixture(scope="module")
def run_copy(tiny_run, tmp_path_factory):
    """A copy of the tiny run (training built its lexical table at the end)."""
    copy = tmp_path_factory.mktemp("shortlist") / "run"
    shutil.copytree(tiny_run, copy)
    return copy


def test_training_built_the_table_and_the_command_rebuilds_it(tiny_run, run_copy, capsys):
    built = RunDir(tiny_run).load_lexicon()
    assert built.best == lexicon_lib.DEFAULT_BEST and built.info["pairs"] > 100
    # The source counts are the prepared split's: the tokens of every pair training kept
    # (both sides at most max_len tokens).
    run = RunDir(tiny_run)
    source_codec, target_codec = run.codecs()
    max_len = run.load_config().max_len
    expected = np.zeros(len(source_codec.vocabulary), np.int64)
    for source_line, target_line in run.split_files("train", needed_for="a test").pairs():
        source, target = source_codec.encode(source_line), target_codec.encode(target_line)
        if 0 < len(source) <= max_len and 0 < len(target) <= max_len:
            np.add.at(expected, source, 1)
    assert built.info["counts_from"] == "prepared split"
    np.testing.assert_array_equal(built.source_counts, expected)
    assert 0 < built.rare_sources().sum() < len(expected)
    assert lexicon_cli.main([str(run_copy), "--translations", "3", "--iterations", "2"]) == 0
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert report["best"] == 3 and report["iterations"] == 2 and report["bytes"] > 0
    # The whole split (smaller than the sample): the table training built, cut to 3.
    assert report["pairs"] == built.info["pairs"] and report["corpus_lines"] == 400
    assert report["word_pairs_pruned"] == 0
    assert lexicon_cli.main([str(run_copy), "--sample", "40", "--max-word-pairs", "500",
                             "--quiet"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["sampled_lines"] == 40 and report["pairs"] <= 40
    assert report["word_pairs"] == 500 and report["limits"]["sample_pairs"] == 40
    assert lexicon_cli.main([str(run_copy), "--translations", "3", "--iterations", "2"]) == 0
    out, err = capsys.readouterr()
    assert "EM round 2/2" in err and "wrote" in err
    rebuilt = RunDir(run_copy).load_lexicon()
    assert rebuilt.targets.shape == (built.targets.shape[0], 3)
    # A table that does not fit the vocabulary is refused with what to do.
    source, target = RunDir(run_copy).load_vocabularies()
    with pytest.raises(LexiconError, match="rebuild it"):
        rebuilt.check(len(source) + 1, len(target))


@pytest.mark.parametrize("total, sample", [(10, 3), (7, 7), (5, 9), (1000, 333), (997, 1),
                                           (12_345, 678)])
def test_the_sampled_indices_are_the_sampled_lines(total, sample):
    expected = [i for i in range(total) if pair_sample.sampled_lines(total, sample)(i)]
    assert pair_sample.sampled_indices(total, sample).tolist() == expected
    assert len(expected) == min(total, sample)


def test_the_table_reads_the_ids_training_read(tiny_run, tmp_path):
    """The lexical table's pairs are the prepared split's (training's own ids): the same
    table as tokenizing the text again, where the two tokenizations agree, and a sample
    of the prepared pairs spread through them."""
    from keras_nmt.data.prepared import PreparedSplit
    from keras_nmt.core.progress import Progress

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run, ignore=shutil.ignore_patterns("tensorboard"))
    limits = lexicon_lib.TableLimits(sample_pairs=40)
    ids, lines, sampled = pair_sample.prepared_training_pairs(
        RunDir(run), limits.sample_pairs, Progress(enabled=False))
    split = PreparedSplit(run / "prepared", "en", "fr")
    chosen = pair_sample.sampled_indices(split.count, 40)
    source, source_lengths, target, target_lengths = split.gather(chosen)
    got = ids.arrays()
    for have, want in zip(got, (source, target, source_lengths, target_lengths)):
        np.testing.assert_array_equal(have, want)
    assert (lines, sampled) == (400, 40) and split.count < 400  # some pairs dropped
    def unread():
        raise AssertionError("a run with a prepared split reads no text sample")

    from_prepared = lexicon_lib.build_for_run(RunDir(run), iterations=2, best=3, sample=unread)
    assert from_prepared.info["counts_from"] == "prepared split"
    shutil.rmtree(run / "prepared")
    assert pair_sample.prepared_training_pairs(RunDir(run), limits.sample_pairs,
                                               Progress(enabled=False)) is None
    from_text = lexicon_lib.build_for_run(RunDir(run), iterations=2, best=3)
    assert from_prepared.info["pairs"] == from_text.info["pairs"] == split.count
    np.testing.assert_array_equal(from_prepared.targets, from_text.targets)
    np.testing.assert_allclose(from_prepared.probs, from_text.probs, rtol=1e-6)


def test_without_the_prepared_split_the_counts_come_from_the_whole_split_or_not_at_all(
        tiny_run, tmp_path):
    built = RunDir(tiny_run).load_lexicon()
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run, ignore=shutil.ignore_patterns("tensorboard"))
    shutil.rmtree(run / "prepared")
    # The EM's pairs are the whole split: their counts are the prepared split's.
    whole = lexicon_lib.build_for_run(RunDir(run), iterations=1, best=2)
    assert whole.info["counts_from"] == "training split"
    np.testing.assert_array_equal(whole.source_counts, built.source_counts)
    # A sample's counts would make words rare that the split holds often: none are kept.
    sampled = lexicon_lib.build_for_run(RunDir(run), iterations=1, best=2,
                                        limits=lexicon_lib.TableLimits(sample_pairs=40))
    assert sampled.info["counts_from"] is None and sampled.source_counts is None
    assert RunDir(run).load_lexicon().source_counts is None
    assert not RunDir(run).load_lexicon().rare_sources().any()


def test_lexicon_command_errors_are_one_line(tmp_path, capsys):
    assert lexicon_cli.main([str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "run directory not found" in err


# 2. The Translator and the commands.


@pytest.fixture(scope="module")
def translator(tiny_run):
    from keras_nmt.decoding.keras_translator import Translator

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
    for line, t in zip(lines, translator.translate(lines, beam_size=BEAM, shortlist=SHORTLIST,
                                                   batch_size=1)):
        [allowed] = shortlist_candidates(translator, [line], SHORTLIST)
        assert set(translator.target_vocab.encode(t.tokens)) <= allowed, line


def test_sentences_with_a_rare_word_decode_over_every_word_in_batches_of_their_own(
        translator, lines):
    from keras_nmt.decoding.translation import rare_source

    apart = translator.rare_source()
    rare = [apart(translator.source(line)) for line in lines]
    assert 0 < sum(rare) < len(lines)  # the tiny corpus has both kinds
    exact = translator.translate(lines, beam_size=BEAM)
    selected = translator.translate(lines, beam_size=BEAM, shortlist=SHORTLIST)
    allowed = shortlist_candidates(translator, lines, SHORTLIST)
    for line, is_rare, whole, chosen, words in zip(lines, rare, exact, selected, allowed):
        if is_rare:  # the exact search, whatever else the call held
            assert chosen.text == whole.text, line
            assert chosen.score == pytest.approx(whole.score, abs=1e-5)
        else:
            assert set(translator.target_vocab.encode(chosen.tokens)) <= words, line
    assert len(allowed[rare.index(False)]) < len(translator.target_vocab)
    # Without a table that marks a word, nothing is batched apart.
    assert rare_source(np.zeros(4, bool)) is None and rare_source(None) is None


def test_shortlist_errors(translator, run_copy, tmp_path, capsys):
    from keras_nmt.decoding.keras_translator import Translator

    with pytest.raises(LexiconError, match="exceeds"):
        translator.translate(["a"], shortlist=(5, lexicon_lib.DEFAULT_BEST + 1))
    bare = tmp_path / "bare"
    shutil.copytree(run_copy, bare)
    (bare / "lexicon.npz").unlink()
    with pytest.raises(LexiconError, match="keras-nmt lexicon"):
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
    from keras_nmt.export.onnx_conversion import OnnxModel

    source_ids = translator.encode(lines)
    loaders = savedmodel_loaders(shortlist_export)  # loading takes seconds: once
    for shortlist in (SHORTLIST, (3, 1), None):
        reference = parity.from_translations(
            translator.translate(lines, beam_size=BEAM, shortlist=shortlist))
        sizes = shortlist or (0, 0)  # both 0: the whole vocabulary
        runs = {"onnx": OnnxModel(onnx_files(shortlist_export) / "nmt.onnx").run}
        for name, model in loaders.items():
            runs[name] = lambda feeds, model=model: model.run("translate_ids", **feeds)
        for name, run in runs.items():
            decoded = parity.run_ids(run, source_ids, translator.target_vocab, BEAM, 1.0,
                                     shortlist=sizes, rare=translator.lexicon.rare_sources())
            result = parity.compare(reference, decoded)
            # As without selection: onnxruntime rounds some scores differently from
            # TensorFlow, so equally scored hypotheses of the barely trained model may
            # swap there (ties allowed, nothing else); TensorFlow's paths agree exactly.
            assert parity.agrees(result, allow_ties=name == "onnx"), (name, shortlist, result)
    # translate_ids decides per batch: one that holds a rare word is scored on every word,
    # in onnxruntime as in TensorFlow, so that every sentence gets the exact search.
    exact = parity.from_translations(translator.translate(lines, beam_size=BEAM))
    for name, run in runs.items():
        mixed = parity.run_ids(run, source_ids, translator.target_vocab, BEAM, 1.0,
                               shortlist=SHORTLIST, batch_size=len(lines))
        assert parity.agrees(parity.compare(exact, mixed), allow_ties=name == "onnx"), name
    # The string signatures decode with the export's shortlist, the sentences with a rare
    # word apart from the others, as the Translator does, in one call or in parts, of
    # one kind of sentence (the other part is then empty) or of both.
    apart = translator.rare_source()
    rare = [line for line in lines if apart(translator.source(line))]
    common = [line for line in lines if not apart(translator.source(line))]
    for part in (lines, rare, common, [common[0], rare[0]]):
        reference = translator.translate(part, beam_size=BEAM, shortlist=SHORTLIST)
        for name, model in loaders.items():
            out = model.run("serving_default", sentences=part)
            assert [x.decode("utf-8") for x in out["translations"]] == [t.text for t in reference]
            np.testing.assert_allclose(out["scores"], [t.score for t in reference], atol=1e-4)


def test_onnx_translate_uses_the_export_shortlist(shortlist_export, translator, lines, capsys):
    from keras_nmt.decoding.onnx_translator import OnnxTranslator

    meta = json.loads((onnx_files(shortlist_export) / "nmt.onnx.json").read_text(encoding="utf-8"))
    assert meta["shortlist"] == [5, 2]
    # The onnxruntime path learns the rare source words from the metadata.
    assert meta["rare_sources"] == np.flatnonzero(translator.lexicon.rare_sources()).tolist()
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
