"""A run's model for TF Serving (and ONNX): what ``keras-nmt export`` does.

:func:`export` writes EXPORT_DIR/NAME/VERSION/ (a SavedModel in TF Serving's layout), EXPORT_DIR/
models.config and EXPORT_DIR/SERVING.md (:mod:`keras_nmt.export.layout`). The SavedModel is
written into a temporary directory next to its final place, loaded back with the TF1 session
loader (the code path TF Serving uses) and checked against the Keras model's own beam search
on a few sentences, and only then renamed to VERSION. With --onnx, VERSION/onnx/ holds
NAME.onnx (the translate_ids signature converted by tf2onnx), NAME.forced.onnx (force
decoding: token log-probabilities and attention, for scoring and alignments without
TensorFlow), NAME.onnx.json and the vocabularies, written after onnx.checker and
onnxruntime checks and before that rename, so the ONNX models arrive with their SavedModel;
with --int8 also NAME.int8.onnx, its weights
quantized to int8 (:mod:`keras_nmt.export.quantize`), written only when its BLEU on a sample
of the run's sentences is within a stated bound of the float model's. With --constrained the
SavedModel also has ``translate_ids_constrained`` (the lexically constrained search over
ids) and, with --onnx, NAME.constrained.onnx (and with --int8 NAME.constrained.int8.onnx)
is its conversion, each checked to decode the check sentences' constraints as the Keras
model does (the int8 one: to meet them). An export that fails leaves nothing behind.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import re
import shutil
import tempfile
from typing import Callable

from keras_nmt.core.atomic import write_json_atomic, write_text_atomic
from keras_nmt.core.errors import ExportError
from keras_nmt.export import layout
from keras_nmt.lexicon.table import marked_sources, shortlist_inputs
from keras_nmt.rundir.run_directory import RunDir
from keras_nmt.text import codecs
from keras_nmt.lexicon.unk_dictionary import dictionary_text
from keras_nmt.decoding.unk_replace import on_by_default

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
# Checked at every export: a sentence of every kind of bad input the serving signature
# must take (empty, blank, emoji and control characters, a runaway line), plus
# sentences made of source-vocabulary words (see _check_sentences).
BAD_INPUTS = ("", " \t ", "😀 \x07\x1b «ok» !", "word " * 2000)
SENTENCEPIECE_SPACE = "\u2581"  # "▁", how a SentencePiece piece marks a word start
# The int8 check: BLEU on INT8_SAMPLE sentences of the run's valid split (the training
# split when it has none), evenly spread; the int8 model is refused when it scores more
# than INT8_MAX_DROP BLEU below the float model there.
INT8_SAMPLE = 300
INT8_MAX_DROP = 1.0


@dataclasses.dataclass(frozen=True)
class ExportRequest:
    """What to export and how (``keras-nmt export``'s options)."""

    run_dir: str | pathlib.Path
    out: str | pathlib.Path
    name: str = "nmt"
    version: int | None = None  # None: 1 + the highest existing
    beam: int | None = None  # None: the run's beam_size
    nbest: int = 1
    attention: bool = False
    onnx: bool = False
    weights: str = "reported"  # rundir.WEIGHTS (RunDir.inspect)
    shortlist: tuple[int, int] | None = None  # (F, B): vocabulary selection by default
    int8: bool = False  # also NAME.int8.onnx (needs onnx)
    int8_max_drop: float = INT8_MAX_DROP  # BLEU the int8 model may lose on the sample
    split_sentences: bool = True  # the string signatures and onnx-translate split lines
    # Every <unk> replaced by its most attended source word through the run's
    # dictionary.tsv, in the SavedModel and onnxruntime alike (a word run that attends);
    # None: the run's default (keras_nmt.decoding.unk_replace.on_by_default)
    unk_replace: bool | None = None
    # Also the constrained search: translate_ids_constrained and NAME.constrained.onnx (a
    # conversion more, so asked for)
    constrained: bool = False


def next_version(model_dir: pathlib.Path) -> int:
    return max(layout.versions(model_dir), default=0) + 1


def _prepare_out(out: pathlib.Path, name: str, version: int | None) -> tuple[pathlib.Path, int]:
    """Create EXPORT_DIR/NAME, prove it writable, and pick the version directory."""
    model_dir = out / name
    try:
        model_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=model_dir):
            pass
    except OSError as error:
        raise ExportError(f"cannot write to {model_dir}: {error.strerror or error}") from None
    if version is None:
        version = next_version(model_dir)
    if (model_dir / str(version)).exists():
        raise ExportError(f"{model_dir / str(version)} already exists (pick another --model-version)")
    return model_dir, version


def _check_sentences(source_vocab) -> list[str]:
    """Four sentences of 3, 6, 9 and 12 frequent source words, a line of the first two
    (a capital starts the second: two sentences where lines are split), then BAD_INPUTS.
    SentencePiece pieces count as words without their word-start mark."""
    pieces = (t.lstrip(SENTENCEPIECE_SPACE) for t in source_vocab.tokens[4:])
    words = [t for t in pieces if t.isalpha()] or ["hello"]
    made = [" ".join(words[3 * n : 6 * n + 3]) + " ." for n in range(4)]
    return made + [f"{made[0]} {made[1][:1].upper()}{made[1][1:]}"] + list(BAD_INPUTS)


def _check_constraints(translator) -> tuple[list[str], list]:
    """The constrained check: the first four check sentences, each with constraints of
    frequent target words (a phrase of one word, one to avoid, a prefix, a phrase of two
    words), as :class:`~keras_nmt.decoding.constraints.LineConstraints`."""
    from keras_nmt.decoding.constraints import LineConstraints

    lines = _check_sentences(translator.source_vocab)[:4]
    pieces = (t.lstrip(SENTENCEPIECE_SPACE) for t in translator.target_vocab.tokens[4:])
    words = list(dict.fromkeys(t for t in pieces if t.isalpha()))[:5] or ["hello"] * 5
    words += words[-1:] * (5 - len(words))
    return lines, [LineConstraints((words[0],)), LineConstraints(avoid=(words[1],)),
                   LineConstraints(prefix=words[2]), LineConstraints((f"{words[3]} {words[4]}",))]


def _sentence_constraints(translator, found: list) -> list:
    """:class:`~keras_nmt.decoding.constraints.SentenceConstraints` of unsplit lines, as the
    translator encodes them."""
    encoder = translator.constraint_encoder()
    return [encoder.encode(c) for c in found]


def constrained_check(run_fn, translator, beam_size: int, alpha: float,
                      shortlist: tuple[int, int] | None = None, what: str = "model",
                      exact: bool = True) -> None:
    """A ``translate_ids_constrained`` path (``run_fn``: feed dict -> outputs) decodes the
    check constraints (:func:`_check_constraints`) as the Keras model does, each line
    whole; without ``exact`` (the int8 model), it only has to meet them."""
    from keras_nmt.export import parity

    lines, found = _check_constraints(translator)
    encoded = _sentence_constraints(translator, found)
    decoded = parity.run_ids(run_fn, translator.encode(lines), translator.target_vocab,
                             beam_size, alpha, shortlist=shortlist,
                             rare=_rare_sources(translator, shortlist), constraints=encoded)
    unmet = [n for n, (d, c) in enumerate(zip(decoded, encoded)) if not c.met_by(d.tokens)]
    if unmet:
        raise ExportError(f"self-check failed: the constrained {what} misses the constraints "
                          f"of check sentence(s) {unmet}")
    if not exact:
        return
    reference = translator.translate(lines, beam_size=beam_size, alpha=alpha,
                                     shortlist=shortlist, split_sentences=False,
                                     unk_replace=False, constraints=found)
    result = parity.compare(parity.from_translations(reference), decoded)
    if not parity.agrees(result, allow_ties=True):
        raise ExportError(f"self-check failed: the constrained {what} differs from the Keras "
                          f"model ({result})")


def self_check(savedmodel_dir: pathlib.Path, translator, beam_size: int, alpha: float,
               shortlist: tuple[int, int] | None = None, split_sentences: bool = True,
               dictionary: dict[str, str] | None = None, constrained: bool = False) -> None:
    """The SavedModel in the TF1 session loader translates like the Keras model (lines
    split into sentences, or not, as the SavedModel does; with ``dictionary``, every
    ``<unk>`` replaced through it; with ``constrained``, its constrained signature too,
    :func:`constrained_check`)."""
    from keras_nmt.export import parity
    from keras_nmt.export.loaders import SessionModel

    lines = _check_sentences(translator.source_vocab)
    reference = translator.translate(lines, beam_size=beam_size, alpha=alpha, shortlist=shortlist,
                                     split_sentences=split_sentences,
                                     unk_replace=dictionary is not None, dictionary=dictionary)
    session = SessionModel(savedmodel_dir)
    try:
        outputs = session.run("serving_default", sentences=lines)
        if constrained:
            constrained_check(lambda feeds: session.run("translate_ids_constrained", **feeds),
                              translator, beam_size, alpha, shortlist, "SavedModel signature")
    finally:
        session.close()
    result = parity.compare(parity.from_translations(reference),
                            parity.from_string_outputs(outputs))
    truncated = [t.truncated for t in reference]
    # Equally scored alternatives are allowed, but not for most sentences: a wrong text
    # codec in the graph (another language's SentencePiece model) keeps every score.
    if (not parity.agrees(result, allow_ties=True) or result["identical"] < 0.5
            or list(outputs["truncated"]) != truncated):
        raise ExportError(
            f"self-check failed: the SavedModel differs from the Keras model ({result})"
        )


def _rare_sources(translator, shortlist):
    """The source ids a selecting search batches apart (None without selection)."""
    return translator.lexicon.rare_sources() if shortlist else None


def onnx_check(onnx_path: pathlib.Path, translator, beam_size: int, alpha: float,
               shortlist: tuple[int, int] | None = None) -> None:
    """The ONNX model in onnxruntime decodes like the Keras model."""
    from keras_nmt.export import parity
    from keras_nmt.export.onnx_conversion import OnnxModel

    # Empty sentences never reach the model: the onnxruntime path answers "" itself. Each
    # line is one sentence here, as translate_ids decodes it (splitting is Python's work).
    lines = [line for line in _check_sentences(translator.source_vocab) if line.strip()]
    reference = translator.translate(lines, beam_size=beam_size, alpha=alpha, shortlist=shortlist,
                                     split_sentences=False)
    decoded = parity.run_ids(OnnxModel(onnx_path).run, translator.encode(lines),
                             translator.target_vocab, beam_size, alpha, shortlist=shortlist,
                             rare=_rare_sources(translator, shortlist))
    result = parity.compare(parity.from_translations(reference), decoded)
    if not parity.agrees(result, allow_ties=True):
        raise ExportError(f"self-check failed: the ONNX model differs from the Keras model ({result})")


def forced_check(directory: pathlib.Path, name: str, translator) -> dict:
    """The force-decoding ONNX model, run by the onnxruntime path
    (:meth:`~keras_nmt.decoding.onnx_translator.OnnxTranslator.align`), gives the Keras
    model's token log-probabilities and attention
    (:func:`~keras_nmt.evaluation.forced.force_decode`) within float32 rounding, on the
    check sentences paired with their translations, an empty target and an empty pair."""
    from keras_nmt.evaluation.forced import force_decode
    from keras_nmt.export import parity
    from keras_nmt.decoding.onnx_translator import OnnxTranslator

    sources = [line for line in _check_sentences(translator.source_vocab)
               if line.strip() and len(line) < 200]
    targets = [t.text for t in translator.translate(sources, beam_size=1, split_sentences=False)]
    sources, targets = sources + [sources[0], ""], targets + ["", ""]
    reference = force_decode(translator, sources, targets, attention=True)
    served = OnnxTranslator.from_export_dir(directory, name=name).align(sources, targets)
    result = parity.compare_forced(reference, served)
    if not parity.agrees_forced(result):
        raise ExportError(f"self-check failed: the force-decoding ONNX model differs from "
                          f"the Keras model ({result})")
    return result


def _int8_files(run):
    """The split the int8 check samples: the run's valid split, else its training split."""
    needed_for = "the int8 check of export --int8"
    files = (run.run.split_files("valid", needed_for=needed_for)
             or run.run.split_files("train", needed_for=needed_for))
    if files is None:
        raise ExportError(f"{run.run.path} names no valid or training split to check int8 on")
    return files


def _sample_pairs(run, count: int) -> tuple[list[str], list[str]]:
    """``count`` pairs spread evenly through the run's valid split (else its training split)."""
    files = _int8_files(run)
    pairs = [(s, t) for s, t in files.pairs() if s.strip() and t.strip()]
    if not pairs:
        raise ExportError(f"{files.source} has no sentence to check int8 on")
    step = max(1, len(pairs) // count)
    chosen = pairs[::step][:count]
    return [s for s, _ in chosen], [t for _, t in chosen]


def int8_check(float_path: pathlib.Path, int8_path: pathlib.Path, run, translator,
               beam_size: int, alpha: float, shortlist, max_drop: float,
               count: int = INT8_SAMPLE) -> dict:
    """BLEU of the float and the int8 ONNX models on a sample of the run's sentences;
    :class:`ExportError` when the int8 one is more than ``max_drop`` below."""
    from keras_nmt.evaluation.scoring import bleu
    from keras_nmt.export import parity
    from keras_nmt.export.onnx_conversion import OnnxModel

    sources, references = _sample_pairs(run, count)
    source_ids = translator.encode(sources)
    scores = {}
    for label, path in (("float", float_path), ("int8", int8_path)):
        decoded = parity.run_ids(OnnxModel(path).run, source_ids, translator.target_vocab,
                                 beam_size, alpha, batch_size=64, shortlist=shortlist,
                                 rare=_rare_sources(translator, shortlist))
        texts = [translator.target_codec.detokenize(d.tokens) for d in decoded]
        scores[label] = bleu(texts, references)[0]
    drop = scores["float"] - scores["int8"]
    report = {"sentences": len(sources), "bleu_float": scores["float"],
              "bleu_int8": scores["int8"], "max_drop": max_drop}
    if drop > max_drop:
        raise ExportError(
            f"the int8 model is refused: BLEU {scores['int8']:.2f} against {scores['float']:.2f} "
            f"for the float model on {len(sources)} sentences of the run (a drop of {drop:.2f}, "
            f"more than {max_drop:g}); export without --int8, or allow more with --int8-max-drop"
        )
    return report


def write_int8(directory: pathlib.Path, name: str, run, translator, settings, max_drop: float,
               log) -> dict:
    """NAME.int8.onnx next to NAME.onnx, checked (:func:`int8_check`); its entry for
    NAME.onnx.json."""
    from keras_nmt.export import quantize

    from keras_nmt.export.onnx_conversion import OnnxModel

    log("quantizing the ONNX model to int8 (onnxruntime dynamic quantization)")
    float_path, int8_path = directory / f"{name}.onnx", directory / f"{name}.int8.onnx"
    done = quantize.quantize(float_path, int8_path)
    log(f"checking the int8 model's BLEU against the float model's on {INT8_SAMPLE} sentences")
    check = int8_check(float_path, int8_path, run, translator, settings.beam_size,
                       settings.alpha, settings.shortlist, max_drop)
    log(f"int8 BLEU {check['bleu_int8']:.2f}, float {check['bleu_float']:.2f} "
        f"({check['sentences']} sentences)")
    constrained = None
    if settings.constrained:
        # The same quantization; its BLEU is the plain int8 model's (the same weights and
        # steps), so the check is that it still meets the constraints.
        log("quantizing the constrained ONNX model to int8")
        constrained_path = directory / f"{name}.constrained.int8.onnx"
        quantize.quantize(directory / f"{name}.constrained.onnx", constrained_path)
        constrained_check(OnnxModel(constrained_path).run, translator, settings.beam_size,
                          settings.alpha, settings.shortlist, "int8 ONNX model", exact=False)
        constrained = constrained_path.name
    return {"model": int8_path.name, "constrained": constrained, "check": check,
            "gemm_split": done["gemm_split"],
            "folded": done["folded"], "int8_columns": done["int8_columns"],
            "quantized_ops": {op: n for op, n in done["int8_ops"].items()
                              if "Integer" in op or "Quant" in op}}


def write_onnx(directory: pathlib.Path, name: str, run, weights: str, settings,
               tokenizer: str, log, lexicon_table=None,
               dictionary: dict[str, str] | None = None) -> None:
    """NAME.onnx, NAME.onnx.json and the vocabularies (and, for a SentencePiece run, its
    models NAME.spm.SRC.model / NAME.spm.TGT.model; with ``settings.unk_replace``, the
    ``dictionary`` as NAME.dictionary.tsv), written into ``directory``. Each conversion
    runs in a process of its own (:func:`~keras_nmt.export.onnx_conversion.convert_apart`)
    over the run's ``weights``: the export's peak memory is one conversion's."""
    from keras_nmt.export import onnx_conversion as onnx_export

    def conversion(path: pathlib.Path, **kind) -> tuple[list[str], list[str]]:
        return onnx_export.convert_apart(onnx_export.Conversion(
            str(run.run.path), weights, str(path), nbest=settings.nbest,
            shortlist=lexicon_table is not None, attention=settings.unk_replace, **kind))

    log(f"converting translate_ids to ONNX (opset {onnx_export.OPSET}; takes a while)")
    path = directory / f"{name}.onnx"
    inputs, outputs = conversion(path)
    # The int8 model has no force-decoding twin: scores and the attention drawn for a reader come
    # from the float model, as exact as the Keras model's.
    log("converting force decoding to ONNX (scores and alignments without TensorFlow)")
    forced_path = directory / f"{name}.forced.onnx"
    forced_inputs, forced_outputs = conversion(forced_path, force_decoding=True)
    constrained = None
    if settings.constrained:
        log("converting translate_ids_constrained to ONNX")
        constrained_path = directory / f"{name}.constrained.onnx"
        names = conversion(constrained_path, constrained=True)
        constrained = {"model": constrained_path.name, "inputs": names[0], "outputs": names[1]}
    vocabularies = {}
    for role, lang, vocabulary in (("source_vocab", run.src, run.source_vocab),
                                   ("target_vocab", run.tgt, run.target_vocab)):
        vocabularies[role] = f"{name}.vocab.{lang}.txt"
        vocabulary.save(directory / vocabularies[role])
    models = {}
    if tokenizer == codecs.SENTENCEPIECE:
        # The onnxruntime path encodes and decodes with these (keras_nmt.text codecs).
        for role, lang in (("source_spm", run.src), ("target_spm", run.tgt)):
            models[role] = f"{name}.spm.{lang}.model"
            shutil.copyfile(run.run.sentencepiece_path(lang), directory / models[role])
    unknown_words = None
    if settings.unk_replace:
        unknown_words = f"{name}.dictionary.tsv"
        write_text_atomic(directory / unknown_words, dictionary_text(dictionary or {}))
    write_json_atomic(directory / layout.metadata_name(name), {
        "model": f"{name}.onnx",
        "src": run.src,
        "tgt": run.tgt,
        "tokenizer": tokenizer,
        **vocabularies,
        **models,
        "max_source_len": settings.max_source_len,
        # onnx-translate and keras-nmt serve split lines as the SavedModel does, by the
        # rules of the source language ("src").
        "split_sentences": settings.split_sentences,
        "beam_size": settings.beam_size,
        "alpha": settings.alpha,
        "nbest": settings.nbest,
        "shortlist": list(settings.shortlist) if settings.shortlist else None,
        # The source ids whose sentences the graph decodes over the whole vocabulary
        # under selection: the onnxruntime path batches them apart.
        "rare_sources": [] if lexicon_table is None else
        [int(i) for i in marked_sources(lexicon_table).nonzero()[0]],
        # The onnxruntime path replaces each <unk> of a translation through this
        # dictionary (source<TAB>target), at the attention the search returns.
        "unk_replace": settings.unk_replace,
        "dictionary": unknown_words,
        "max_decode_ratio": float(run.config.max_decode_ratio),
        "opset": onnx_export.OPSET,
        "inputs": inputs,
        "outputs": outputs,
        "forced": {"model": forced_path.name, "inputs": forced_inputs,
                   "outputs": forced_outputs},
        # The constrained search (export --constrained): the model that decodes the
        # sentences with phrases to include or avoid, or a prefix; None: none.
        "constrained": constrained,
        "int8": None,
    })


def _unknown_words(run) -> dict[str, str]:
    """The dictionary an export that replaces ``<unk>`` carries: the run's dictionary.tsv,
    or none (every unknown word copied). Refused, in one line, where there is nothing to
    replace by: a SentencePiece run (its pieces spell every word) or one without attention."""
    from keras_nmt.core.config import check_attention

    if run.source_codec.kind != codecs.WORD:
        raise ExportError("--unk-replace needs a word run: a SentencePiece run's pieces spell "
                          "every word, and its <unk> is a character no piece holds")
    check_attention("--unk-replace", [run.config])
    return run.run.load_dictionary() or {}


def export(args: ExportRequest, log: Callable[[str], None] = lambda message: None) -> pathlib.Path:
    """Do the export; returns the version directory. ``log`` hears each stage."""
    if not NAME.fullmatch(args.name):
        raise ExportError(f"the model name must be letters, digits, '_', '.', '-', got {args.name!r}")
    run = RunDir(args.run_dir).inspect(args.weights)
    search_settings = run.run.search_settings(run.config)  # tuned, or the config's
    beam_size = args.beam or search_settings["beam_size"]
    if args.nbest > beam_size:
        raise ExportError(f"--nbest ({args.nbest}) cannot exceed the beam size ({beam_size})")
    if args.int8 and not args.onnx:
        raise ExportError("--int8 quantizes the ONNX model: add --onnx")
    if args.int8:
        _int8_files(run)  # a corpus left behind fails now, not after the export's work
    if args.unk_replace is None:
        args = dataclasses.replace(
            args, unk_replace=on_by_default(run.config, run.source_codec.kind))
    dictionary = _unknown_words(run) if args.unk_replace else None
    lexicon = None
    if args.shortlist:
        lexicon = run.run.load_lexicon()
        shortlist_inputs(args.shortlist, lexicon)
    out = pathlib.Path(args.out)
    from keras_nmt.export import serving_files

    serving_files.models_config(out, args.name)  # an unreadable one stops us before any work
    model_dir, version = _prepare_out(out, args.name, args.version)
    final = model_dir / str(version)

    log(f"loading {run.run.path}")
    from keras_nmt.export import savedmodel
    from keras_nmt.decoding.keras_translator import Translator, default_max_source_len

    # Exports compute in float32 whatever the run trained in: the weights are float32,
    # CPUs serve float32 fastest, and onnxruntime has few bfloat16 kernels.
    model = run.run.load_model(files=run, precision="float32")
    # The run's own text codecs (word or SentencePiece): the Python ones for the
    # reference translations, their graph twins for the SavedModel.
    tokenizer = run.source_codec.kind
    translator = Translator(model, run.source_codec, run.target_codec, lexicon=lexicon)
    table = None if lexicon is None else lexicon.selection_table()
    settings = savedmodel.ExportSettings(
        beam_size=beam_size,
        alpha=float(search_settings["alpha"]),
        nbest=args.nbest,
        attention=args.attention,
        max_source_len=default_max_source_len(run.config.max_len),
        shortlist=args.shortlist,
        split_sentences=args.split_sentences,
        unk_replace=args.unk_replace,
        constrained=args.constrained,
    )
    # Everything, the ONNX files included, is written into a temporary directory (a name
    # TF Serving ignores, not an integer) and renamed into place once all of it is checked.
    staging = pathlib.Path(tempfile.mkdtemp(dir=model_dir, prefix=f".{version}.tmp-"))
    try:
        selection = f", shortlist {args.shortlist[0]},{args.shortlist[1]}" if args.shortlist else ""
        unsplit = "" if args.split_sentences else ", lines not split into sentences"
        replaced = ", <unk> replaced" if args.unk_replace else ""
        constrained = ", with the constrained search" if args.constrained else ""
        log(f"exporting SavedModel (beam {beam_size}, alpha {settings.alpha:g}{selection}"
            f"{unsplit}{replaced}{constrained})")
        unknown_words = None
        if args.unk_replace:
            from keras_nmt.decoding.unk_replace_graph import UnknownWords

            unknown_words = UnknownWords(run.target_vocab, run.tgt, dictionary)
        archive = savedmodel.build_archive(
            model, run.run.graph_encoders(), settings, lexicon_table=table,
            unknown_words=unknown_words,
        )
        savedmodel.write_savedmodel(archive, staging)
        log("checking the SavedModel with the TF1 session loader")
        self_check(staging, translator, beam_size, settings.alpha, args.shortlist,
                   settings.split_sentences, dictionary, args.constrained)
        if args.onnx:
            onnx_staging = staging / layout.ONNX_DIR
            onnx_staging.mkdir()
            write_onnx(onnx_staging, args.name, run, args.weights, settings, tokenizer, log,
                       lexicon_table=table, dictionary=dictionary)
            log("checking the ONNX models (search, force decoding) with onnx.checker and onnxruntime")
            onnx_check(onnx_staging / f"{args.name}.onnx", translator, beam_size, settings.alpha,
                       args.shortlist)
            forced_check(onnx_staging, args.name, translator)
            if args.constrained:
                from keras_nmt.export.onnx_conversion import OnnxModel

                constrained_check(
                    OnnxModel(onnx_staging / f"{args.name}.constrained.onnx").run, translator,
                    beam_size, settings.alpha, args.shortlist, "ONNX model")
            if args.int8:
                int8 = write_int8(onnx_staging, args.name, run, translator, settings,
                                  args.int8_max_drop, log)
                metadata_path = onnx_staging / layout.metadata_name(args.name)
                metadata = json.loads(metadata_path.read_text(encoding="utf-8"))
                write_json_atomic(metadata_path, {**metadata, "int8": int8})
        if final.exists():
            raise ExportError(f"{final} already exists (pick another --model-version)")
        staging.chmod(0o755)  # mkdtemp makes it private; a server may run as another user
        staging.rename(final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)

    write_text_atomic(out / serving_files.CONFIG_NAME, serving_files.models_config(out, args.name))
    write_text_atomic(out / serving_files.SERVING_NAME, serving_files.serving_md(
        args.name, version, savedmodel.signature_summary(settings), onnx=args.onnx,
        tokenizer=tokenizer, constrained=args.constrained,
    ))
    return final


