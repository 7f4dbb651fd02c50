"""Translation with onnxruntime, without TensorFlow or Keras: :class:`OnnxTranslator`.

It reads the newest version's EXPORT_DIR/NAME/VERSION/onnx/ (:mod:`keras_nmt.export.layout`,
``keras-nmt export --onnx``; :mod:`keras_nmt.cli.onnx_translate` is the command) and encodes
with the pure-Python :mod:`keras_nmt.text` codecs. It translates as
:class:`keras_nmt.decoding.keras_translator.Translator` does, by
:func:`keras_nmt.decoding.translation.translate_lines`: one Translation per line, in order,
"" for a blank line, sources cut to ``max_source_len``, lines split into sentences when the
export says so. ``align`` and ``translate(..., align=True)`` run ``NAME.forced.onnx`` and give
:class:`~keras_nmt.evaluation.forced.ForcedPair` objects. Constraints
(:mod:`keras_nmt.decoding.constraints`) run ``NAME.constrained.onnx`` on the constrained
sentences; a line of several sentences with a bare phrase is translated whole, and an export
without that model raises :class:`ExportError`. Both models load when first needed. Cost: the
beam search, growing with sentences x beam x output length (docs/export-serving.md).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import pathlib
import threading
from typing import Callable, Sequence

import numpy as np

from keras_nmt.decoding.constraints import (
    Encoder, Glossary, LineConstraints, attach, check_aligned, constrained_apart,
    empty_lines_unmet, max_output_tokens, padded_arrays,
)
from keras_nmt.decoding.confidence import codec_confidence
from keras_nmt.core.constants import EOS_ID, UNK_ID
from keras_nmt.evaluation.forced import ForcedPair, pad_rows, run_batches, target_tokens
from keras_nmt.core.errors import CodecError, ExportError
from keras_nmt.export import layout
from keras_nmt.text import codecs
from keras_nmt.decoding.translation import (
    Source, Translation, beam_translation, blank, rare_source, read_source, translate_lines,
    unk_rewrite,
)
from keras_nmt.lexicon.unk_dictionary import load_dictionary
from keras_nmt.text.vocab import Vocabulary

INPUTS = ("source_ids", "beam_size", "alpha", "forbid_unk", "max_length")
OUTPUTS = ("ids", "lengths", "scores")
CONSTRAINED_INPUTS = INPUTS + ("include_ids", "avoid_ids", "prefix_ids")
NO_CONSTRAINED_MODEL = ("this export has no constrained model: export the run again with "
                        "--onnx --constrained")
FORCED_INPUTS = ("source_ids", "target_ids")
FORCED_OUTPUTS = ("token_logprobs",)  # and "attention" for RNNsearch
METADATA_KEYS = (
    "src", "tgt", "source_vocab", "target_vocab", "max_source_len", "beam_size", "alpha",
)
# Files a tokenizer needs besides the vocabularies (NAME.onnx.json keys).
TOKENIZER_FILES = {codecs.WORD: (), codecs.SENTENCEPIECE: ("source_spm", "target_spm")}


@dataclasses.dataclass(frozen=True)
class RowSearch:
    """One search's settings over an export (:meth:`OnnxTranslator.row_search`).
    ``decode(rows)``: the rows' Translations, one onnxruntime run (rows of one ``apart``
    key: the constrained model for constrained rows); ``revise(rows, translations)``:
    the force-decoding pass of alignments and older exports' confidences, or None;
    ``blank``: the Translation of a row without tokens, which is never decoded."""

    decode: Callable[[list[Source]], list[Translation]]
    revise: Callable[[list[Source], list[Translation]], list[Translation]] | None
    apart: Callable[[Source], tuple]
    blank: Translation


def load_metadata(path: pathlib.Path) -> dict:
    """NAME.onnx.json of an export, checked to hold what a translator needs
    (:class:`ExportError`, one line, naming what is missing)."""
    try:
        metadata = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ExportError(f"{path} not found (was the model exported with --onnx?)") from None
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise ExportError(f"cannot read {path}: {error}") from None
    if not isinstance(metadata, dict):
        raise ExportError(f"{path} does not hold a JSON object")
    missing = [key for key in METADATA_KEYS if key not in metadata]
    if missing:
        raise ExportError(f"{path} lacks {', '.join(missing)}")
    tokenizer_name = metadata.get("tokenizer", codecs.WORD)
    if tokenizer_name not in TOKENIZER_FILES:
        raise ExportError(f"{path}: tokenizer {tokenizer_name!r} is not supported here")
    missing = [key for key in TOKENIZER_FILES[tokenizer_name] if key not in metadata]
    if missing:
        raise ExportError(f"{path} lacks {', '.join(missing)} (tokenizer {tokenizer_name})")
    return metadata


def _load_codecs(export_dir: pathlib.Path, metadata: dict):
    """(source codec, target codec) of an export (:mod:`keras_nmt.text.codecs`), checked
    against the vocabularies the ONNX model's ids index."""
    kind = metadata.get("tokenizer", codecs.WORD)
    loaded = []
    for side, lang in (("source", metadata["src"]), ("target", metadata["tgt"])):
        vocabulary_name = metadata[f"{side}_vocab"]
        vocabulary = Vocabulary.load(export_dir / vocabulary_name)
        model = metadata.get(f"{side}_spm")
        try:
            loaded.append(codecs.make_codec(
                kind, lang, vocabulary, export_dir / model if model else None, vocabulary_name
            ))
        except CodecError as error:  # says which file and why
            raise ExportError(str(error)) from None
        except (RuntimeError, OSError) as error:  # sentencepiece's own errors for a bad file
            raise ExportError(f"cannot load {export_dir / model}: {error}") from None
    return tuple(loaded)


def _session(path: pathlib.Path, threads: int | None, inputs=INPUTS, outputs=OUTPUTS,
             kind: str = "translate_ids", spin: bool = True):
    import onnxruntime

    if not path.is_file():
        raise ExportError(f"{path} not found (was the model exported with --onnx?)")
    options = onnxruntime.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
    if not spin:
        # A thread without work sleeps instead of spinning: beside other work on the same
        # cores (a server's HTTP under attack), spinning takes the CPU that work needs.
        for pool in ("intra_op", "inter_op"):
            options.add_session_config_entry(f"session.{pool}.allow_spinning", "0")
    try:
        session = onnxruntime.InferenceSession(
            str(path), options, providers=["CPUExecutionProvider"]
        )
    except Exception as error:  # onnxruntime raises its own untyped errors for bad files
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ExportError(f"cannot load {path}: {reason}") from None
    names = {i.name for i in session.get_inputs()}, {o.name for o in session.get_outputs()}
    for role, wanted, have in (("input", inputs, names[0]), ("output", outputs, names[1])):
        missing = [name for name in wanted if name not in have]
        if missing:
            raise ExportError(f"{path} has no {role} {missing[0]!r}: not a {kind} model")
    return session


class OnnxTranslator:
    """Raw sentences in, detokenized translations out, through an onnxruntime session
    running the export's ``translate_ids`` beam search."""

    def __init__(self, session, source_codec, target_codec, max_source_len: int,
                 beam_size: int = 5, alpha: float = 1.0, max_nbest: int = 1,
                 shortlist: tuple[int, int] | None = None,
                 forced_path: pathlib.Path | None = None, threads: int | None = None,
                 split_sentences: bool = False, rare_sources: Sequence[int] = (),
                 dictionary: dict[str, str] | None = None,
                 constrained_path: pathlib.Path | None = None,
                 max_decode_ratio: float | None = None, spin: bool = True):
        self.session = session
        # keras_nmt.text codecs: the word tokenizer or SentencePiece, as exported.
        self.source_codec = source_codec
        self.target_codec = target_codec
        self.source_vocab = source_codec.vocabulary
        self.target_vocab = target_codec.vocabulary
        self.src_lang = source_codec.lang
        self.tgt_lang = target_codec.lang
        self.max_source_len = int(max_source_len)
        self.beam_size = int(beam_size)
        self.alpha = float(alpha)
        self.max_nbest = int(max_nbest)  # hypotheses per sentence the graph returns
        # translate()'s default, the export's: lines split into sentences (as its SavedModel)
        self.split_sentences = bool(split_sentences)
        # The export's vocabulary selection (F, B), when its graph holds a lexical table.
        self.selects = any(i.name == "shortlist_best" for i in session.get_inputs())
        self.shortlist = tuple(shortlist) if shortlist and self.selects else None
        # The source ids whose sentences the graph decodes over the whole vocabulary under
        # selection (keras_nmt.lexicon.table.Lexicon.rare_sources): batched apart from the others.
        self.rare = np.zeros(len(self.source_vocab), bool)
        self.rare[np.asarray(rare_sources, np.int64)] = True
        # An export made with --unk-replace: its dictionary (NAME.dictionary.tsv), and
        # translate() replaces every <unk> through it by default. None: <unk> stays.
        self.dictionary = dictionary
        # Whether the search returns attention (an export made with --unk-replace).
        self.attends = any(o.name == "attention" for o in session.get_outputs())
        # Whether the search returns its tokens' log-probabilities, which a confidence is
        # computed from (exports before it force-decode the output instead).
        self.scores_tokens = any(o.name == "token_logprobs" for o in session.get_outputs())
        if dictionary is not None and not self.attends:
            raise ExportError("an export that replaces <unk> needs a search that returns "
                              "attention: export the run again")
        # NAME.forced.onnx, loaded by the first alignment (translation alone never needs it).
        self.forced_path = forced_path
        self.threads = threads
        self.spin = spin  # whether the sessions' idle threads spin (_session)
        self._forced = None
        self._forced_lock = threading.Lock()  # a server's batch threads may race to load it
        # NAME.constrained.onnx (export --constrained), loaded by the first constrained
        # batch; None: constraints are refused. The decode-ratio rule bounds a constrained
        # output, so its phrases are checked against it (keras_nmt.decoding.constraints.Encoder).
        self.constrained_path = constrained_path
        self.max_decode_ratio = max_decode_ratio
        self._constrained = None

    @classmethod
    def from_export_dir(cls, export_dir: str | os.PathLike, name: str = "nmt",
                        threads: int | None = None, int8: bool = False,
                        version: int | None = None, spin: bool = True) -> "OnnxTranslator":
        """Load NAME.onnx.json of the newest version of ``name`` in EXPORT_DIR (or of
        ``version``; :func:`keras_nmt.export.layout.find_onnx_dir`), its vocabularies (and
        SentencePiece models), then NAME.onnx, or with ``int8`` NAME.int8.onnx (raises
        :class:`ExportError` or VocabularyError naming what is missing or broken).
        ``spin``: whether onnxruntime's threads spin while they wait for work (faster
        alone; without, the CPU goes sooner to other work on the same cores)."""
        export_dir = layout.find_onnx_dir(export_dir, name, version)
        metadata = load_metadata(export_dir / layout.metadata_name(name))
        source_codec, target_codec = _load_codecs(export_dir, metadata)
        try:
            max_source_len = int(metadata["max_source_len"])
            beam_size = int(metadata["beam_size"])
            alpha = float(metadata["alpha"])
            shortlist = metadata.get("shortlist")
            shortlist = None if shortlist is None else (int(shortlist[0]), int(shortlist[1]))
            rare = [int(i) for i in metadata.get("rare_sources") or ()]  # older exports: none
            if any(not 0 <= i < len(source_codec.vocabulary) for i in rare):
                raise ValueError("rare_sources names ids outside the source vocabulary")
        except (TypeError, ValueError, IndexError) as error:
            raise ExportError(f"{name}.onnx.json: {error}") from None
        split = metadata.get("split_sentences", False)  # older exports: lines whole
        if not isinstance(split, bool):
            raise ExportError(f"{name}.onnx.json: split_sentences must be true or false, "
                              f"got {split!r}")
        model = metadata.get("model", f"{name}.onnx")
        if int8:
            if not isinstance(metadata.get("int8"), dict) or "model" not in metadata["int8"]:
                raise ExportError(f"{name}.onnx.json names no int8 model (export with --int8)")
            model = metadata["int8"]["model"]
        session = _session(export_dir / str(model), threads, spin=spin)
        # The graph's n-best width is fixed when it is traced: read it off the output
        # shape when the converter kept it static, else from the metadata.
        width = next(o.shape for o in session.get_outputs() if o.name == "lengths")
        max_nbest = width[1] if len(width) == 2 and isinstance(width[1], int) else int(
            metadata.get("nbest", 1)
        )
        forced = metadata.get("forced")
        forced_path = export_dir / str(forced["model"]) if isinstance(forced, dict) else None
        constrained = metadata.get("constrained")  # older exports and plain ones: none
        constrained_path = None
        if isinstance(constrained, dict) and "model" in constrained:
            constrained_path = export_dir / str(constrained["model"])
            if int8:
                found = metadata["int8"].get("constrained")
                # An int8 model without its constrained twin: constraints are refused
                # rather than decoded by the float model unasked.
                constrained_path = export_dir / str(found) if found else None
        try:
            ratio = metadata.get("max_decode_ratio")
            ratio = None if ratio is None else float(ratio)
        except (TypeError, ValueError) as error:
            raise ExportError(f"{name}.onnx.json: max_decode_ratio: {error}") from None
        dictionary = None
        if metadata.get("unk_replace"):  # older exports: no key, no replacement
            if not metadata.get("dictionary"):
                raise ExportError(f"{name}.onnx.json: unk_replace names no dictionary "
                                  "(export the run again)")
            dictionary = load_dictionary(export_dir / str(metadata["dictionary"]))
        return cls(session, source_codec, target_codec, max_source_len, beam_size, alpha,
                   max_nbest, shortlist, forced_path, threads, split, rare, dictionary,
                   constrained_path, ratio, spin)

    def forced_session(self):
        """The onnxruntime session of NAME.forced.onnx (loaded once); :class:`ExportError`
        when the export has none (an older keras-nmt wrote it)."""
        with self._forced_lock:
            if self._forced is None:
                if self.forced_path is None:
                    raise ExportError("this export has no force-decoding model (it was written "
                                      "by an older keras-nmt): export the run again with --onnx")
                self._forced = _session(self.forced_path, self.threads, FORCED_INPUTS,
                                        FORCED_OUTPUTS, "force-decoding", self.spin)
        return self._forced

    @property
    def constrains(self) -> bool:
        """Whether the export has a constrained model (``export --constrained``)."""
        return self.constrained_path is not None and self.max_decode_ratio is not None

    def constrained_session(self):
        """The onnxruntime session of NAME.constrained.onnx (loaded once);
        :class:`ExportError` when the export has none."""
        with self._forced_lock:
            if self._constrained is None:
                if not self.constrains:
                    raise ExportError(NO_CONSTRAINED_MODEL)
                outputs = (OUTPUTS + (("attention",) if self.attends else ())
                           + (("token_logprobs",) if self.scores_tokens else ()))
                self._constrained = _session(self.constrained_path, self.threads,
                                             CONSTRAINED_INPUTS, outputs,
                                             "translate_ids_constrained", self.spin)
        return self._constrained

    def constraint_encoder(self) -> Encoder:
        """Checks and encodes constraints as this export decodes them: its target codec
        and its longest output (its maximum source length, its decode ratio);
        :class:`ExportError` when the export has no constrained model."""
        if not self.constrains:
            raise ExportError(NO_CONSTRAINED_MODEL)
        return Encoder(self.target_codec, max_output_tokens(
            self.max_source_len, self.max_decode_ratio))

    def constraint_attacher(self, constraints, glossary=None) -> Callable:
        """:func:`keras_nmt.decoding.constraints.attach` with this export's codecs and longest
        output (no lexical table: a bare phrase of a split line keeps the line whole)."""
        return attach(constraints, self.constraint_encoder(),
                                   self.source_codec.tokenize, glossary)

    @property
    def aligns(self) -> bool:
        """Whether the export has a force-decoding model (alignments, scores)."""
        return self.forced_path is not None

    @property
    def gives_confidence(self) -> bool:
        """Whether ``translate(..., confidence=True)`` works: the search returns its
        tokens' log-probabilities, or an older export's force-decoding model gives them."""
        return self.scores_tokens or self.aligns

    def _force(self, source_ids, target_ids, batch_size: int,
               progress: Callable[[int], None] | None = None):
        """:func:`keras_nmt.evaluation.forced.run_batches` through NAME.forced.onnx."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size}")
        session = self.forced_session()
        names = [o.name for o in session.get_outputs()]
        wanted = ["token_logprobs"] + (["attention"] if "attention" in names else [])

        def run(source, target):
            outputs = session.run(wanted, {"source_ids": source, "target_ids": target})
            return outputs[0], outputs[1] if len(outputs) > 1 else None

        positions = batch_size * (self.max_source_len + 1)
        return run_batches(run, source_ids, target_ids, batch_size, positions, progress)

    def align(self, sources: Sequence[str], targets: Sequence[str], batch_size: int = 32,
              progress: Callable[[int], None] | None = None) -> list[ForcedPair]:
        """Force-decode each target given its source, as
        :func:`keras_nmt.evaluation.forced.force_decode` does (nothing cut; ``<unk>`` in a
        word run's target is the unknown word), with the attention of an RNNsearch export
        (None for RNNencdec). Cost: one pass per pair, linear in the pairs' tokens."""
        if len(sources) != len(targets):
            raise ValueError(f"{len(sources)} sources for {len(targets)} targets")
        source_ids = [self.source_codec.encode(line) + [EOS_ID] for line in sources]
        target_side = [target_tokens(self.target_codec, line) for line in targets]
        target_ids = [ids + [EOS_ID] for _, ids in target_side]
        results = self._force(source_ids, target_ids, batch_size, progress)
        return [ForcedPair(tuple(self.source_codec.tokenize(sources[i])),
                           tuple(target_side[i][0]), logprobs, weights,
                           target_ids[i].count(UNK_ID))
                for i, (logprobs, weights) in enumerate(results)]

    def _align_best(self, sources: list[Source], translations: list[Translation],
                    batch_size: int, align: bool = True,
                    confidence: bool = False) -> list[Translation]:
        """``translations`` with their best hypothesis force-decoded against the source as
        the search read it (cut to ``max_source_len``): as their ``alignment`` with
        ``align``, and their ``confidence`` (:mod:`keras_nmt.decoding.confidence`) with
        ``confidence`` (else the one they have is kept)."""
        todo = [i for i, source in enumerate(sources) if source.tokens]
        target_ids = [self.target_vocab.encode(translations[i].tokens) + [EOS_ID] for i in todo]
        results = self._force([sources[i].ids for i in todo], target_ids, batch_size)
        aligned = list(translations)
        for i, ids, (logprobs, weights) in zip(todo, target_ids, results):
            pair = ForcedPair(sources[i].tokens, translations[i].tokens, logprobs, weights,
                              ids.count(UNK_ID))
            found = (codec_confidence(logprobs, translations[i].tokens, self.target_codec)
                     if confidence else translations[i].confidence)
            aligned[i] = dataclasses.replace(translations[i],
                                             alignment=pair if align else None,
                                             confidence=found)
        return aligned

    def source(self, sentence: str) -> Source:
        """A sentence's tokens and ids, cut to ``max_source_len`` tokens (Translator's rule)."""
        return read_source(self.source_codec, self.max_source_len, sentence)

    def source_ids(self, line: str) -> tuple[list[int], int]:
        """A line's source ids with EOS, cut to ``max_source_len`` tokens, and the number
        of tokens cut. No tokens: an empty list."""
        source = self.source(line)
        return (list(source.ids) if source.tokens else []), source.truncated

    def translate(self, lines: Sequence[str], beam_size: int | None = None,
                  alpha: float | None = None, nbest: int = 1, forbid_unk: bool = False,
                  batch_size: int = 32,
                  progress: Callable[[int], None] | None = None,
                  shortlist: tuple[int, int] | bool | None = True,
                  align: bool = False,
                  split_sentences: bool | None = None,
                  unk_replace: bool | None = None,
                  confidence: bool = False,
                  constraints: Sequence[LineConstraints | None] | None = None,
                  glossary: Glossary | None = None) -> list[Translation]:
        """One translation per line, in order (see :meth:`Translator.translate`).
        ``shortlist``: True, the export's vocabulary selection (if it was exported with
        one); (F, B) another one (the export must hold a lexical table); False or None:
        the whole vocabulary. ``align``: each translation's ``alignment`` is its best
        hypothesis force-decoded (NAME.forced.onnx), one more pass per sentence.
        ``split_sentences``: split each line into its sentences and join their
        translations (:func:`keras_nmt.decoding.translation.join_translations`); None: as the
        export does (``self.split_sentences``). ``unk_replace``: every ``<unk>`` of a
        hypothesis becomes the source word its step attended to most, through the
        export's dictionary (:mod:`keras_nmt.decoding.unk_replace`; every word copied without
        one), at the attention the search returns; None: as the export says
        (``--unk-replace``). ``confidence``: each translation's ``confidence``, from the
        log-probabilities the search gave its tokens (an export written before the search
        returned them: its best hypothesis force-decoded by NAME.forced.onnx, one more
        pass per sentence; :class:`ExportError` for an export with neither). ``constraints`` (per line) and
        ``glossary``: what each line's translation must include, avoid and start with, as
        for :meth:`Translator.translate`; the constrained sentences decode in batches of
        their own by NAME.constrained.onnx (:class:`ExportError` for an export without
        it; see the module docstring). ``progress`` hears the lines each batch finished."""
        search = self.row_search(beam_size, alpha, nbest, forbid_unk, batch_size, shortlist,
                                 align, unk_replace, confidence)
        split = self.split_sentences if split_sentences is None else bool(split_sentences)
        check_aligned(lines, constraints)
        constrain = (self.constraint_attacher(constraints, glossary)
                     if constraints is not None or glossary is not None else None)
        return empty_lines_unmet(lines, constraints, translate_lines(
            lines, search.decode, batch_size, read=self.source, skip_empty=search.blank,
            lang=self.src_lang, target_lang=self.tgt_lang, split_sentences=split,
            progress=progress, revise=search.revise, apart=search.apart, constrain=constrain,
        ))

    def row_search(self, beam_size: int | None = None, alpha: float | None = None,
                   nbest: int = 1, forbid_unk: bool = False, batch_size: int = 32,
                   shortlist: tuple[int, int] | bool | None = True, align: bool = False,
                   unk_replace: bool | None = None, confidence: bool = False) -> RowSearch:
        """The search :meth:`translate` runs, its settings checked (ValueError,
        :class:`ExportError`), over rows read by :meth:`source`: what the server batches
        itself. Each ``decode`` call is one onnxruntime run over rows of one ``apart`` key."""
        beam_size = self.beam_size if beam_size is None else int(beam_size)
        alpha = self.alpha if alpha is None else float(alpha)
        if not 1 <= nbest <= self.max_nbest:
            raise ValueError(f"this export returns at most {self.max_nbest} hypotheses per "
                             f"sentence (export with --nbest N for more), got nbest={nbest}")
        if nbest > beam_size:
            raise ValueError(f"nbest ({nbest}) cannot exceed the beam size ({beam_size})")
        if batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size}")
        if shortlist is True:
            shortlist = self.shortlist
        elif shortlist and not self.selects:
            raise ValueError("this export has no lexical table (export with --shortlist F,B)")
        selection, apart = {}, None
        if self.selects:
            frequent, best = shortlist or (0, 0)
            apart = rare_source(self.rare) if frequent or best else None
            selection = {"shortlist_frequent": np.array(frequent, np.int32),
                         "shortlist_best": np.array(best, np.int32)}
        replace = self.dictionary is not None if unk_replace is None else bool(unk_replace)
        if replace and not self.attends:
            raise ValueError("this export's search returns no attention to replace <unk> by "
                             "(export with --unk-replace)")
        if confidence and not self.gives_confidence:
            raise ExportError("this export can compute no confidence (it was written by an "
                              "older keras-nmt): export the run again with --onnx")
        in_search = confidence and self.scores_tokens  # else force-decoded after
        outputs = (list(OUTPUTS) + (["attention"] if replace else [])
                   + (["token_logprobs"] if in_search else []))

        def decode(sources: list[Source]) -> list[Translation]:
            rules, session = {}, self.session
            if any(source.constraints for source in sources):
                session = self.constrained_session()
                rules = dict(zip(CONSTRAINED_INPUTS[len(INPUTS):], padded_arrays(
                    [source.constraints for source in sources])))
            found = session.run(outputs, {
                "source_ids": pad_rows([source.ids for source in sources]),
                "beam_size": np.array(beam_size, np.int32),
                "alpha": np.array(alpha, np.float32),
                "forbid_unk": np.array(bool(forbid_unk)),
                "max_length": np.array(0, np.int32),  # the max_decode_ratio rule
                **selection,
                **rules,
            })
            ids, lengths, scores = found[:3]
            logprobs = found[-1] if in_search else None
            return [beam_translation(self.target_codec, source, ids[row], lengths[row],
                                     scores[row], nbest, found[3][row] if replace else None,
                                     rewrite=unk_rewrite(source, self.dictionary) if replace
                                     else None,
                                     token_logprobs=None if logprobs is None else logprobs[row])
                    for row, source in enumerate(sources)]

        rescored = confidence and not in_search  # an older export's: force-decoded
        revise = (functools.partial(self._align_best, batch_size=batch_size, align=align,
                                    confidence=rescored) if align or rescored else None)
        return RowSearch(decode, revise, constrained_apart(apart), blank(nbest))
