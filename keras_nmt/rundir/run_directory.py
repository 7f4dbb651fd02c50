"""The run directory: everything a training run writes, and all that translation needs.

    RUN_DIR/config.json        the Config (written once, before training starts)
    RUN_DIR/data.json          languages, tokenizer, corpus location, split statistics
                               (files inside RUN_DIR named relative to it: a run can move)
    RUN_DIR/vocab.SRC.txt      source vocabulary, one token per line
    RUN_DIR/vocab.TGT.txt      target vocabulary
    RUN_DIR/spm.LANG.model     SentencePiece models (``--tokenizer sentencepiece`` only)
    RUN_DIR/prepared/          the training split as token ids (keras_nmt.data.prepared)
    RUN_DIR/checkpoints/       model + optimizer + step + data position (for --resume)
    RUN_DIR/best/              the weights with the best development score(s)
    RUN_DIR/recent/            the model weights of the last checkpoints (averaging only)
    RUN_DIR/averaged/          their average (keras-nmt average, or average_checkpoints)
    RUN_DIR/lexicon.npz        the lexical table p(t|s) for vocabulary selection, and how
                               it was built (keras-nmt lexicon, or the end of training)
    RUN_DIR/search.json        beam size and alpha tuned on a development set
                               (keras-nmt evaluate --tune); translate, evaluate and
                               export decode with them unless told otherwise
    RUN_DIR/tensorboard/       scalars
    RUN_DIR/summary.json       the final report (the paper's Table 2 columns)

:class:`RunDir` is the only code that knows these names. Reading the small files
(:meth:`RunDir.inspect`) needs no TensorFlow, so a command can check its run
directories before TensorFlow's slow import; :meth:`RunDir.load_model` and
:meth:`RunDir.graph_encoders` load it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
from typing import Any

from keras_nmt.core.atomic import write_bytes_atomic, write_json_atomic, write_text_atomic
from keras_nmt.core.config import Config
from keras_nmt.core.errors import CodecError, LexiconError, PreparedError, RunDirError
from keras_nmt.text import codecs
from keras_nmt.text.vocab import Vocabulary

# "reported": the weights the run's own report was made with (summary.json), so that a
# run that averages is translated, scored and exported with the model it reported on.
WEIGHTS = ("reported", "best", "last", "averaged")
# What messages call the splits data.json names.
SPLIT_NAMES = {"train": "training", "valid": "validation", "test": "test"}


@dataclasses.dataclass(frozen=True)
class RunFiles:
    """What a run directory holds for translation, read without TensorFlow."""

    run: "RunDir"
    config: Config
    src: str
    tgt: str
    source_codec: Any  # keras_nmt.text codecs (word or SentencePiece)
    target_codec: Any
    # Directories that have a checkpoint state file, in the order to try them.
    checkpoint_dirs: tuple[pathlib.Path, ...]

    @property
    def source_vocab(self) -> Vocabulary:
        return self.source_codec.vocabulary

    @property
    def target_vocab(self) -> Vocabulary:
        return self.target_codec.vocabulary


class RunDir:
    def __init__(self, path: str | os.PathLike):
        self.path = pathlib.Path(path)
        self._codecs: tuple[Any, Any] | None = None  # read once: vocabularies can be large

    config_path = property(lambda self: self.path / "config.json")
    data_path = property(lambda self: self.path / "data.json")
    summary_path = property(lambda self: self.path / "summary.json")
    checkpoints = property(lambda self: self.path / "checkpoints")
    best = property(lambda self: self.path / "best")
    recent = property(lambda self: self.path / "recent")
    averaged = property(lambda self: self.path / "averaged")
    tensorboard = property(lambda self: self.path / "tensorboard")
    corpus = property(lambda self: self.path / "corpus")
    lexicon_path = property(lambda self: self.path / "lexicon.npz")
    search_path = property(lambda self: self.path / "search.json")
    # unk_dictionary's source<TAB>target lines, read by --unk-replace when no --dictionary
    dictionary_path = property(lambda self: self.path / "dictionary.tsv")
    prepared = property(lambda self: self.path / "prepared")
    heldout = property(lambda self: self.path / "heldout")  # corpus.heldout's two halves

    def vocab_path(self, lang: str) -> pathlib.Path:
        return self.path / f"vocab.{lang}.txt"

    def sentencepiece_path(self, lang: str) -> pathlib.Path:
        return self.path / f"spm.{lang}.model"

    # ------------------------------------------------------------------ writing

    def create(self) -> None:
        """Make the directory and prove it is writable, before any work is done."""
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            probe = self.path / ".write-test"
            probe.write_text("")
            probe.unlink()
        except OSError as error:
            raise RunDirError(f"cannot write to run directory {self.path}: {error.strerror}") from None

    def is_initialised(self) -> bool:
        return self.config_path.is_file() and self.data_path.is_file()

    def has_checkpoint(self) -> bool:
        return (self.checkpoints / "checkpoint").is_file()

    # ------------------------------------------------------------------ reading

    def load_config(self) -> Config:
        try:
            return Config.from_dict(json.loads(self.config_path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            raise RunDirError(f"{self.path} is not a run directory (no config.json)") from None

    def load_data_info(self) -> dict[str, Any]:
        try:
            return json.loads(self.data_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise RunDirError(f"{self.path} is not a run directory (no data.json)") from None

    def parent_run(self) -> RunDir | None:
        """The run this one started from (``--init-from``, data.json's "parent"), while it
        is still a run there; None for a run without a parent or whose parent is gone."""
        parent = self.load_data_info().get("parent")
        if not parent:
            return None
        run = RunDir(parent["run"])
        return run if run.is_initialised() else None

    def stored_path(self, path: str | os.PathLike) -> str:
        """How data.json names a file: relative to the run directory when it is inside
        it (so the run can be moved or copied with it), else absolute."""
        path = pathlib.Path(path).resolve()
        try:
            return path.relative_to(self.path.resolve()).as_posix()
        except ValueError:
            return str(path)

    def stored_location(self, stored: str, info: dict[str, Any]) -> pathlib.Path:
        """Where a path of data.json (:meth:`stored_path`) is now: a relative one is
        inside the run directory wherever it is."""
        path = self.path / stored
        if path.is_absolute() and not path.exists() and info.get("builtin"):
            # Runs made before paths were stored relative: a built-in corpus was always
            # RUN_DIR/corpus, so it moved with the run.
            try:
                return self.corpus / path.relative_to(info["corpus"])
            except (KeyError, TypeError, ValueError):
                pass
        return path

    def split_files(self, split: str, info: dict[str, Any] | None = None, *, needed_for: str):
        """The :class:`~keras_nmt.corpus.readers.ParallelFiles` of a split data.json names,
        or None when it names none. ``needed_for`` says what reads them: a missing file
        is a :class:`RunDirError` that names it and that."""
        from keras_nmt.corpus.readers import ParallelFiles

        info = self.load_data_info() if info is None else info
        entry = info.get("splits", {}).get(split)
        if entry is None:
            return None
        files = ParallelFiles(self.stored_location(entry["source"], info),
                              self.stored_location(entry["target"], info))
        for path in (files.source, files.target):
            if not path.is_file():
                raise RunDirError(
                    f"the {SPLIT_NAMES.get(split, split)} corpus {path} is missing (needed for "
                    f"{needed_for}); copy it back, or write where it is now into "
                    f"{self.data_path}"
                )
        return files

    def prepared_split(self, info: dict[str, Any] | None = None, *, needed_for: str):
        """The run's :class:`~keras_nmt.data.prepared.PreparedSplit` (the training pairs as
        token ids), or None for a run made before data.json named one. A missing or
        damaged one is a :class:`RunDirError` naming it and ``needed_for``."""
        from keras_nmt.data.prepared import PreparedSplit

        info = self.load_data_info() if info is None else info
        if info.get("prepared") is None:
            return None
        try:
            return PreparedSplit(self.stored_location(info["prepared"], info), info["src"], info["tgt"])
        except PreparedError as error:
            raise RunDirError(f"{error} (needed for {needed_for})") from None

    def write_lexicon(self, lexicon) -> None:
        """Store a :class:`~keras_nmt.lexicon.table.Lexicon` (atomically: a crash keeps the old one)."""
        import io

        import numpy as np

        buffer = io.BytesIO()
        counts = {} if lexicon.source_counts is None else {"source_counts": lexicon.source_counts}
        np.savez(buffer, targets=lexicon.targets, probs=lexicon.probs,
                 info=np.array(json.dumps(lexicon.info, sort_keys=True)), **counts)
        write_bytes_atomic(self.lexicon_path, buffer.getvalue())

    def write_dictionary(self, entries: dict[str, str] | None) -> None:
        """Store the unknown-word dictionary (atomically), sorted by source word; None
        removes an older one, which would not speak this run's vocabulary."""
        if entries is None:
            self.dictionary_path.unlink(missing_ok=True)
            return
        from keras_nmt.lexicon.unk_dictionary import dictionary_text

        write_text_atomic(self.dictionary_path, dictionary_text(entries))

    def load_dictionary(self) -> dict[str, str] | None:
        """The unknown-word dictionary :meth:`write_dictionary` stored; None when the run
        has none (its vocabulary lacks no training word, or it predates them)."""
        from keras_nmt.lexicon.unk_dictionary import load_dictionary

        return load_dictionary(self.dictionary_path) if self.dictionary_path.is_file() else None

    def load_lexicon(self):
        """The run's :class:`~keras_nmt.lexicon.table.Lexicon`, checked against its vocabularies.
        Raises :class:`~keras_nmt.core.errors.LexiconError` when there is none or it is unusable."""
        import numpy as np

        from keras_nmt.lexicon.table import Lexicon

        if not self.lexicon_path.is_file():
            raise LexiconError(f"{self.path} has no lexical table: build it with "
                               f"keras-nmt lexicon {self.path}")
        try:
            with np.load(self.lexicon_path, allow_pickle=False) as data:
                # A table written before the source counts were kept has none.
                counts = data["source_counts"] if "source_counts" in data.files else None
                lexicon = Lexicon(data["targets"], data["probs"], json.loads(str(data["info"])),
                                  counts)
        except (OSError, ValueError, KeyError) as error:
            raise LexiconError(f"cannot read {self.lexicon_path}: {error}") from None
        source, target = self.load_vocabularies()
        lexicon.check(len(source), len(target))
        return lexicon

    def write_search_settings(self, tuned: dict[str, Any]) -> None:
        """Store tuned search settings (``beam_size``, ``alpha`` and how they were found)."""
        write_json_atomic(self.search_path, tuned)

    def search_settings(self, config: Config | None = None) -> dict[str, Any]:
        """The beam size and alpha to decode with: those of ``search.json`` when the run
        was tuned (``tuned`` True, with the tuning's record), else the config's."""
        config = config or self.load_config()
        settings = {"beam_size": config.beam_size, "alpha": config.length_alpha, "tuned": False}
        if not self.search_path.is_file():
            return settings
        try:
            tuned = json.loads(self.search_path.read_text(encoding="utf-8"))
            beam, alpha = int(tuned["beam_size"]), float(tuned["alpha"])
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise RunDirError(f"{self.search_path} is unreadable ({error}): remove it or tune "
                              f"again (keras-nmt evaluate --tune)") from None
        if beam < 1 or not alpha >= 0:
            raise RunDirError(f"{self.search_path}: beam_size must be >= 1 and alpha >= 0")
        return {**tuned, "beam_size": beam, "alpha": alpha, "tuned": True}

    def tokenizer(self, info: dict[str, Any] | None = None) -> str:
        """The tokenizer ``data.json`` names (``word`` for runs made before it named one)."""
        info = self.load_data_info() if info is None else info
        return codecs.check_kind(info.get("tokenizer", codecs.WORD), "data.json")

    def load_vocabularies(self) -> tuple[Vocabulary, Vocabulary]:
        return tuple(codec.vocabulary for codec in self.codecs())  # type: ignore[return-value]

    def codecs(self) -> tuple[Any, Any]:
        """(source codec, target codec): how this run turns text into ids and back."""
        if self._codecs is None:
            self._codecs = self._read_codecs()
        return self._codecs

    def _read_codecs(self) -> tuple[Any, Any]:
        info = self.load_data_info()
        kind = self.tokenizer(info)
        return tuple(
            codecs.make_codec(kind, info[side], Vocabulary.load(self.vocab_path(info[side])),
                              self.sentencepiece_path(info[side]), f"vocab.{info[side]}.txt")
            for side in ("src", "tgt")
        )  # type: ignore[return-value]

    def graph_encoders(self) -> tuple[Any, Any]:
        """The graph twins of :meth:`codecs`: what tf.data and an export run."""
        return tuple(codecs.graph_encoder(codec) for codec in self.codecs())  # type: ignore[return-value]

    def load_summary(self) -> Any:
        """summary.json, written at the end of training; None before then. RunDirError
        when it cannot be read."""
        try:
            return json.loads(self.summary_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as error:
            raise RunDirError(f"cannot read {self.summary_path}: {error}") from None

    def reported_weights(self) -> str:
        """Which weights the run's report at the end of training used: "averaged" when
        it averaged and ``averaged/`` holds them, else "best" (also for a run still
        training, one made before summary.json said, or an unreadable summary.json)."""
        try:
            summary = self.load_summary()
        except RunDirError:
            return "best"
        averaged = (isinstance(summary, dict) and summary.get("report_weights") == "averaged"
                    and (self.averaged / "checkpoint").is_file())
        return "averaged" if averaged else "best"

    def inspect(self, weights: str = "reported") -> RunFiles:
        """Read the configuration, languages and codecs, and find where the weights are:
        those of :meth:`reported_weights` for ``weights="reported"``, ``best/`` then
        ``checkpoints/`` for ``"best"`` (a run stopped before its first evaluation has no
        best weights yet), only ``checkpoints/`` for ``"last"``, only ``averaged/`` for
        ``"averaged"``.

        Raises :class:`RunDirError` (or ``ConfigError``, ``VocabularyError``, all
        :class:`~keras_nmt.core.errors.UserError`) with a one-line message."""
        if weights not in WEIGHTS:
            raise ValueError(f"weights must be one of {', '.join(WEIGHTS)}, got {weights!r}")
        if not self.path.exists():
            raise RunDirError(f"run directory not found: {self.path}")
        if not self.path.is_dir():
            raise RunDirError(f"{self.path} is not a directory")
        try:
            config = self.load_config()
            info = self.load_data_info()
            src, tgt = info["src"], info["tgt"]
            source_codec, target_codec = self.codecs()
        except CodecError as error:
            raise RunDirError(str(error)) from None
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise RunDirError(f"{self.path} holds an unreadable file: {error}") from None
        except (KeyError, TypeError, AttributeError) as error:
            raise RunDirError(
                f"{self.path} is not a usable run directory (malformed config.json or data.json: "
                f"{type(error).__name__} {error})"
            ) from None
        except OSError as error:
            raise RunDirError(f"cannot read {self.path}: {error.strerror or error}") from None
        if weights == "reported":
            weights = self.reported_weights()
        candidates = {"best": [self.best, self.checkpoints], "last": [self.checkpoints],
                      "averaged": [self.averaged]}[weights]
        found = tuple(d for d in candidates if (d / "checkpoint").is_file())
        if not found and weights == "averaged":
            raise RunDirError(f"{self.path} holds no averaged weights (run keras-nmt average)")
        if not found:
            raise RunDirError(f"{self.path} holds no trained weights (no checkpoint)")
        return RunFiles(self, config, src, tgt, source_codec, target_codec, found)

    def load_model(self, weights: str = "reported", files: RunFiles | None = None,
                   precision: str | None = None):
        """The run's :class:`~keras_nmt.models.rnnsearch.TranslationModel` with its weights (the
        first directory of :meth:`inspect`'s ``checkpoint_dirs`` that TensorFlow finds a
        checkpoint in). Pass ``files`` when the run was inspected already. It computes in
        the run's precision unless ``precision`` names another (the weights are float32
        in every precision)."""
        import tensorflow as tf

        from keras_nmt.rundir import model_weights
        from keras_nmt.models.rnnsearch import TranslationModel

        files = files or self.inspect(weights)
        model = TranslationModel(files.config, precision=precision)
        latest = self.weights_checkpoint(files)
        try:
            model_weights.read_model(latest, model)
        except RunDirError:
            raise
        except (tf.errors.OpError, ValueError) as error:
            text = str(error).strip()
            reason = text.splitlines()[0] if text else type(error).__name__
            raise RunDirError(f"cannot read the weights in {latest}: {reason}") from None
        return model

    def weights_checkpoint(self, files: RunFiles) -> str:
        """The checkpoint (its prefix) that :meth:`load_model` reads: the newest of the
        first of ``files.checkpoint_dirs`` that TensorFlow finds one in."""
        import tensorflow as tf

        for directory in files.checkpoint_dirs:
            latest = tf.train.latest_checkpoint(str(directory))
            if latest:
                return latest
        raise RunDirError(f"{self.path} holds no trained weights (no checkpoint)")
