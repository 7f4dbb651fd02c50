"""A new run's data, set up once in its run directory: the corpus (the built-in one
generated, WMT'14 fetched, or a directory), its splits, the SentencePiece models, the
one tokenization pass of the training split into ids and vocabularies, then data.json
and config.json, which record them."""

from __future__ import annotations

import pathlib
import shutil
from typing import Any, Callable

from keras_nmt.runner import adaptation
from keras_nmt.data import prepared
from keras_nmt.core.atomic import write_json_atomic
from keras_nmt.core.config import Config
from keras_nmt.corpus import builtin, heldout, wmt14
from keras_nmt.corpus.readers import ParallelFiles, count_lines, find_corpus
from keras_nmt.corpus.scan import SplitStats
from keras_nmt.core.errors import ConfigError, CorpusError, RunDirError
from keras_nmt.core.progress import Phase, Progress
from keras_nmt.runner.resume import options_record
from keras_nmt.rundir.run_directory import RunDir
from keras_nmt.text import codecs
from keras_nmt.text.sentencepiece import (
    SENTENCEPIECE_SAMPLE, SegmentationSampler, SentencePieceCodec, train_sentencepiece,
)
from keras_nmt.runner.train_options import BUILTIN, TrainOptions
from keras_nmt.text.vocab import Vocabulary


def corpus_directory(options: TrainOptions, run: RunDir, log: Callable[[str], None]) -> pathlib.Path:
    """The corpus directory of ``options.data``: the built-in corpus generated into the
    run, WMT'14 fetched into its cache, or the directory named."""
    if options.data == BUILTIN:
        spec = builtin.BuiltinCorpusSpec()
        log(f"generating the built-in corpus into {run.corpus} (seed {spec.seed})")
        return builtin.write_corpus(run.corpus.resolve(), spec)
    if options.data == wmt14.NAME:
        return wmt14.prepare(
            options.cache_dir, options.mirror, options.max_train_pairs, log=log, quiet=options.quiet
        )
    return pathlib.Path(options.data).expanduser().resolve()


def find_splits(
    corpus_dir: pathlib.Path, options: TrainOptions, run: RunDir, log: Callable[[str], None],
) -> tuple[dict[str, ParallelFiles], ParallelFiles, bool]:
    """The splits training reads, the development split as found, and whether it was cut
    in two for want of a test split (:mod:`keras_nmt.corpus.heldout`)."""
    splits = find_corpus(corpus_dir, options.src, options.tgt)
    for name, files in splits.items():
        if name != "train":  # the training split is checked by the tokenization pass
            files.check()
    development, halves = splits["valid"], None
    if "test" not in splits:
        halves = heldout.write_halves(development, run.heldout, options.src, options.tgt)
        if halves:
            splits = {**splits, "valid": halves[heldout.SELECT], "test": halves[heldout.REPORT]}
            log(f"no test split: the development split is cut in two ({heldout.RULE}); "
                f"{heldout.SELECT}.* picks the checkpoints, {heldout.REPORT}.* is only "
                f"reported (both in {run.heldout}; keras-nmt evaluate --half "
                f"{heldout.SELECT}|{heldout.REPORT} scores a run on either)")
    return splits, development, bool(halves)


def sentencepiece_models(
    options: TrainOptions, config: Config, train: ParallelFiles, lines: int, run: RunDir,
    progress: Progress,
) -> dict[str, bytes]:
    """A SentencePiece model per language, trained on its side of ``train`` (``lines``
    lines) up to the config's vocabulary size, and written into the run. With
    ``options.joint_vocabulary`` one model, trained on both sides, serves both languages
    (written under both names): a name or a number is then cut into the same pieces on
    either side, which the attention can copy."""
    if options.joint_vocabulary:
        if config.src_vocab_size != config.tgt_vocab_size:
            raise ConfigError(
                f"--joint-vocabulary trains one vocabulary for both languages: give one size "
                f"(src_vocab_size {config.src_vocab_size:,} and tgt_vocab_size "
                f"{config.tgt_vocab_size:,} differ)")
        jobs = [((options.src, options.tgt), (0, 1), config.src_vocab_size)]
    else:
        jobs = [((options.src,), (0,), config.src_vocab_size),
                ((options.tgt,), (1,), config.tgt_vocab_size)]
    models = {}
    for langs, sides, size in jobs:
        name = "+".join(langs)
        # SentencePiece reports nothing while it trains: the reading is counted, then
        # what it does and the time it took are said.
        phase = Phase(progress, f"SentencePiece ({name}): reading the training "
                                f"side{'s' if len(sides) > 1 else ''}",
                      total=lines * len(sides), unit="lines")

        def read(sides=sides, phase=phase, name=name, size=size):
            for pair in train.pairs():
                for side in sides:
                    phase.advance()
                    yield pair[side]
            sampled = (f", a sample drawn with the seed {config.seed},"
                       if phase.done > SENTENCEPIECE_SAMPLE else "")
            progress.message(
                f"SentencePiece ({name}): training a {options.sentencepiece_type or 'unigram'} "
                f"model of up to {size:,} pieces "
                f"on {min(phase.done, SENTENCEPIECE_SAMPLE):,} of its {phase.done:,} lines"
                f"{sampled} (SentencePiece reports no progress)")

        model = train_sentencepiece(read(), size, options.sentencepiece_type or "unigram",
                                    seed=config.seed)
        phase.finish(f"{phase.done:,} lines read and the model trained")
        for lang in langs:
            models[lang] = model
            run.sentencepiece_path(lang).write_bytes(model)
    return models


def tokenize_training_split(
    options: TrainOptions, config: Config, train: ParallelFiles, lines: int, run: RunDir,
    models: dict[str, bytes], log: Callable[[str], None], progress: Progress,
    parent: adaptation.Parent | None = None,
) -> tuple[SplitStats, tuple[Vocabulary, Vocabulary]]:
    """The one pass over ``train`` (``lines`` pairs): its statistics, the vocabularies
    (the SentencePiece ``models``', the most frequent words, or a ``parent``'s words
    followed by the new ones, :func:`keras_nmt.runner.adaptation.child_vocabularies`) and its
    token ids in the run's prepared split, with ``options.subword_samples`` sampled
    copies of it. CorpusError when no pair is usable."""
    kind = options.tokenizer or codecs.WORD
    langs = (options.src, options.tgt)
    tokenizing = Phase(progress, "tokenizing the training split (vocabularies, lengths, ids)",
                       total=lines, unit="pairs")
    phases = [tokenizing]
    sampling = None
    if options.subword_samples:
        def sampled(done: int, total: int) -> None:
            if len(phases) == 1:  # the tokenization is over, the copies begin
                tokenizing.finish()
                phases.append(Phase(
                    progress, f"subword regularisation: {options.subword_samples} copies in "
                    f"sampled segmentations (alpha {options.subword_alpha})",
                    total=total, unit="pair sides"))
            phases[-1].reached(done)

        sampling = prepared.Sampling(
            copies=options.subword_samples,
            resegment=tuple(SegmentationSampler(models[lang], options.subword_alpha, config.max_len)
                            for lang in langs),
            seed=config.seed, progress=sampled)

    def vocabularies(stats: SplitStats) -> tuple[Vocabulary, Vocabulary]:
        if kind == codecs.SENTENCEPIECE:
            return tuple(SentencePieceCodec(models[lang], lang).vocabulary for lang in langs)
        if parent is not None:
            return adaptation.child_vocabularies(parent, stats.source_counts,
                                                 stats.target_counts, config)
        return (Vocabulary.from_counts(stats.source_counts, config.src_vocab_size,
                                       config.vocab_min_count),
                Vocabulary.from_counts(stats.target_counts, config.tgt_vocab_size,
                                       config.vocab_min_count))

    log(f"reading {train.source} and {train.target}: tokenized once, "
        f"into token ids in {run.prepared}")
    stats, vocabs = prepared.prepare_split(
        train, run.prepared, langs,
        tuple(codecs.graph_tokenizer(kind, lang, models.get(lang)) for lang in langs),
        config.max_len, vocabularies, progress=tokenizing.reached, sampling=sampling,
    )
    phases[-1].finish()
    if stats.kept == 0:
        raise CorpusError(
            f"no usable training pair in {train.source}: every pair is empty or "
            f"longer than max_len={config.max_len}"
        )
    return stats, vocabs


def prepare(options: TrainOptions, config: Config, run: RunDir, log: Callable[[str], None],
            progress: Progress | None = None, parent: adaptation.Parent | None = None,
            mix: adaptation.Mix | None = None) -> tuple[Config, dict[str, Any]]:
    """First start of a run: corpus, vocabularies and config written into ``run``, which
    must hold no run yet; a failure leaves no half-made run behind. ``options``
    (for_new_run's) and ``config`` are :func:`keras_nmt.runner.train_options.new_run_config`'s,
    checked, or for a run adapted from ``parent`` keras_nmt.runner.adaptation's: it keeps the
    parent's SentencePiece models, or extends its word vocabularies with the new words,
    and data.json records the parent and the ``mix`` of another run's pairs, if any.
    ``progress`` shows the long passes (SentencePiece, the scan) with their ETA. Returns
    the config with the vocabulary sizes found and data.json's content."""
    if run.is_initialised() or run.has_checkpoint():
        raise RunDirError(
            f"{run.path} already holds a run: pass --resume to continue it, or choose another --out"
        )
    made = _missing_folders(run.path)
    try:
        return _write_run_data(options, config, run, log, progress or Progress(enabled=False),
                               parent, mix)
    except BaseException:
        # A later start must not mistake what is left for a run.
        _remove_run_data(run, made)
        raise


def _write_run_data(options: TrainOptions, config: Config, run: RunDir,
                    log: Callable[[str], None], progress: Progress,
                    parent: adaptation.Parent | None,
                    mix: adaptation.Mix | None) -> tuple[Config, dict[str, Any]]:
    run.create()
    corpus_dir = corpus_directory(options, run, log)
    splits, development, halved = find_splits(corpus_dir, options, run, log)
    kind = options.tokenizer or codecs.WORD
    lines = count_lines(splits["train"].source)  # the passes' totals, for their ETA
    models = {}
    if kind == codecs.SENTENCEPIECE and parent is not None:
        # The parent's models, whose pieces are its rows: the new data is cut into them.
        models = parent.sentencepiece_models()
        for lang, model in models.items():
            run.sentencepiece_path(lang).write_bytes(model)
    elif kind == codecs.SENTENCEPIECE:
        models = sentencepiece_models(options, config, splits["train"], lines, run, progress)
    stats, (source_vocab, target_vocab) = tokenize_training_split(
        options, config, splits["train"], lines, run, models, log, progress, parent)
    config = config.replace(src_vocab_size=len(source_vocab), tgt_vocab_size=len(target_vocab))
    source_vocab.save(run.vocab_path(options.src))
    target_vocab.save(run.vocab_path(options.tgt))
    info = {
        "src": options.src,
        "tgt": options.tgt,
        "corpus": run.stored_path(corpus_dir),
        "builtin": options.data == BUILTIN,
        "tokenizer": kind,
        "joint_vocabulary": bool(options.joint_vocabulary),
        "subword_samples": options.subword_samples,
        "subword_alpha": options.subword_alpha,
        "sentencepiece_type": options.sentencepiece_type,
        "splits": {name: {"source": run.stored_path(f.source), "target": run.stored_path(f.target)}
                   for name, f in splits.items()},
        "development": {"source": run.stored_path(development.source),
                        "target": run.stored_path(development.target),
                        "halves": heldout.RULE if halved else None},
        "prepared": run.stored_path(run.prepared),
        "train": stats.summary(),
        "source_types": len(stats.source_counts),
        "target_types": len(stats.target_counts),
        # Whether a source <unk> stands for rare words only: what the shortlist's
        # rare-word rule reads (keras_nmt.lexicon.table); pieces spell every word.
        "source_left_out_most": (left_out_most(stats.source_counts, source_vocab)
                                 if kind == codecs.WORD else None),
        "options": options_record(options),
        "parent": None if parent is None else parent.record(source_vocab, target_vocab),
        "mix": None if mix is None else mix.record(stats.kept),
        # The development splits of other domains the report scores too (--also-report).
        "also_report": {name: {"source": run.stored_path(source), "target": run.stored_path(target)}
                        for name, (source, target) in (options.also_report or {}).items()},
    }
    write_json_atomic(run.data_path, info)
    # config.json last: its presence marks a run whose set-up is complete.
    write_json_atomic(run.config_path, config.to_dict())
    log(
        f"training pairs: {stats.kept} kept of {stats.pairs} ({stats.too_long} longer than "
        f"{config.max_len} tokens dropped, {stats.empty} empty skipped); vocabularies "
        f"{len(source_vocab)} {options.src} / {len(target_vocab)} {options.tgt}"
    )
    return config, info


def left_out_most(counts: dict[str, int], vocabulary: Vocabulary) -> int:
    """The most times the training split holds a word ``vocabulary`` leaves out (0 when
    it holds every word): one pass over the word types."""
    return max((count for token, count in counts.items() if token not in vocabulary), default=0)


def _missing_folders(path: pathlib.Path) -> list[pathlib.Path]:
    """``path`` and the folders above it that do not exist yet, innermost first: what
    creating it makes (the default ``runs/`` of a first run, say)."""
    missing = []
    for folder in (path, *path.absolute().parents):
        if folder.exists():
            break
        missing.append(folder)
    return missing


def _remove_run_data(run: RunDir, made: list[pathlib.Path]) -> None:
    """What a failed :func:`prepare` wrote: the whole directory if it made it, and the
    folders it made above it while they are empty (another run may have begun in one);
    else only the files and folders a run's set-up writes."""
    if made:
        shutil.rmtree(run.path, ignore_errors=True)
        for folder in made[1:]:
            try:
                folder.rmdir()
            except OSError:  # not empty: something else is in it now
                break
        return
    for path in (run.config_path, run.data_path, *run.path.glob("vocab.*.txt"),
                 *run.path.glob("spm.*.model")):
        path.unlink(missing_ok=True)
    shutil.rmtree(run.prepared, ignore_errors=True)
    shutil.rmtree(run.heldout, ignore_errors=True)
    prepared.remove_stale(run.prepared)
