"""The models a server serves: each version an :class:`OnnxTranslator`, found by name and
version (or version label) as TF Serving finds its servables.

The models come from a ``models.config`` (TF Serving's format, read by
:func:`keras_nmt.export.serving_files.read_models_config`: names, base paths, version
policies, labels) or from one model of an export directory (its newest version). Every
version served must hold the ONNX files ``keras-nmt export --onnx`` writes
(:mod:`keras_nmt.export.layout`). Loading costs one onnxruntime session a version;
nothing here grows with a corpus.

As TF Serving polls its file system, :meth:`Registry.poll` looks at each model's base
path again: a version its policy now serves is loaded, one it no longer serves is
unloaded, and the new set of versions replaces the old one at once (a request holds the
:class:`Servable` it found, so it finishes on the version it started on). A version
that fails to load is reported and skipped until its files change; the versions served
before stay.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import pathlib
from typing import Callable

from keras_nmt.core.errors import ExportError, RequestError
from keras_nmt.export import layout, serving_files
from keras_nmt.export.serving_files import ModelEntry
from keras_nmt.decoding.onnx_translator import OnnxTranslator

DEFAULT_DECODE_RATIO = 2.0  # the config's max_decode_ratio, for exports that do not say


@dataclasses.dataclass(eq=False)  # hashed by identity: a batch key
class Servable:
    name: str
    version: int
    translator: OnnxTranslator
    int8: bool
    # The export's max_decode_ratio: the search stops a translation at
    # ceil(ratio * (source tokens + 1)) + 1 tokens, EOS included.
    decode_ratio: float = DEFAULT_DECODE_RATIO

    def describe(self) -> dict:
        """What a client may want to know before asking: languages, search settings,
        limits (``GET /models``)."""
        t = self.translator
        return {
            "name": self.name, "version": self.version, "src": t.src_lang, "tgt": t.tgt_lang,
            "beam": t.beam_size, "alpha": t.alpha, "max_nbest": t.max_nbest,
            "max_source_len": t.max_source_len, "int8": self.int8,
            "shortlist": list(t.shortlist) if t.shortlist else None,
            "alignment": t.aligns,  # POST /translate takes "alignment": true
            "split_sentences": t.split_sentences,  # a line of sentences: each translated alone
        }

    def alignment_cells(self, source_tokens: int) -> int:
        """The most cells the alignment of a sentence of ``source_tokens`` tokens can
        have: a row per target token the search may emit (EOS included), a column per
        source token and EOS; 0 for a sentence without tokens (never decoded)."""
        if source_tokens == 0:
            return 0
        rows = math.ceil(self.decode_ratio * (source_tokens + 1)) + 1
        return rows * (source_tokens + 1)


@dataclasses.dataclass(frozen=True)
class Change:
    """What a poll did to one version: ``kind`` is loaded, unloaded or failed."""

    kind: str
    name: str
    version: int
    reason: str = ""

    def __str__(self) -> str:
        if self.kind == "failed":
            return f"cannot load model {self.name!r} version {self.version}: {self.reason}"
        return f"{self.kind} model {self.name!r} version {self.version}"


def _metadata_stem(directory: pathlib.Path, name: str) -> str:
    """NAME of the NAME.onnx.json in a version's onnx/ directory: the model's own name,
    else the one such file there (a model served under another name than it was
    exported with)."""
    if (directory / layout.metadata_name(name)).is_file():
        return name
    found = sorted(directory.glob("*.onnx.json")) if directory.is_dir() else []
    if len(found) != 1:
        what = "no ONNX model" if not found else f"{len(found)} ONNX models and none named {name}"
        raise ExportError(f"{directory.parent} holds {what} (export it with --onnx)")
    return found[0].name[: -len(".onnx.json")]


def _decode_ratio(metadata: pathlib.Path) -> float:
    try:
        ratio = json.loads(metadata.read_text(encoding="utf-8")).get("max_decode_ratio")
        ratio = DEFAULT_DECODE_RATIO if ratio is None else float(ratio)
    except (OSError, ValueError, TypeError, AttributeError):
        return DEFAULT_DECODE_RATIO  # the translator's own load says what is wrong
    return ratio if math.isfinite(ratio) and ratio > 0 else DEFAULT_DECODE_RATIO


def load_servable(name: str, base_path: pathlib.Path, version: int, int8: bool = False,
                  threads: int | None = None, spin: bool = True) -> Servable:
    """Version ``version`` of the model whose versions lie in ``base_path``; ``spin``:
    whether its onnxruntime threads spin while they wait for work
    (:meth:`OnnxTranslator.from_export_dir`)."""
    directory = layout.onnx_dir(base_path.parent, base_path.name, version)
    stem = _metadata_stem(directory, name)
    translator = OnnxTranslator.from_export_dir(directory, stem, threads, int8=int8,
                                                spin=spin)
    return Servable(name, version, translator, int8,
                    _decode_ratio(directory / layout.metadata_name(stem)))


def _files_signature(directory: pathlib.Path) -> tuple:
    """What a version's ONNX files look like now (names, sizes, times): a version that
    failed is tried again once this changes."""
    try:
        return tuple(sorted((p.name, s.st_size, s.st_mtime_ns)
                            for p in directory.iterdir() for s in [p.stat()]))
    except OSError:
        return ()


class Registry:
    """Model name -> its served versions, and each model's version labels."""

    def __init__(self, servables: list[Servable], labels: dict[str, dict[str, int]] | None = None,
                 sources: tuple[ModelEntry, ...] = (), int8: bool = False,
                 threads: int | None = None, spin: bool = True):
        models: dict[str, dict[int, Servable]] = {}
        for servable in servables:
            models.setdefault(servable.name, {})[servable.version] = servable
        # Replaced whole, never changed in place: a reader that took it sees one state.
        self.models = models
        self.labels = {name: dict(found) for name, found in (labels or {}).items()}
        for name, found in self.labels.items():
            for label, version in found.items():
                if version not in self.models.get(name, {}):
                    raise ExportError(f"model {name!r}: label {label!r} names version "
                                      f"{version}, which is not served")
        self.sources = tuple(sources)  # where poll() looks for versions
        self.int8 = int8
        self.threads = threads
        self.spin = spin  # load_servable's, for the versions a poll loads
        self._failed: dict[tuple[str, int], tuple] = {}  # (name, version) -> its files then

    @classmethod
    def from_export_dir(cls, export_dir: str | os.PathLike, name: str | None = None,
                        config: str | os.PathLike | None = None, int8: bool = False,
                        threads: int | None = None, spin: bool = True) -> "Registry":
        """The models of ``config`` (default: EXPORT_DIR/models.config when there is
        one), or with ``name`` (or without a models.config) the newest version of that
        model (default ``nmt``) of EXPORT_DIR. :class:`ExportError` (one line) for
        anything missing or broken."""
        export_dir = pathlib.Path(export_dir)
        if not export_dir.is_dir():
            raise ExportError(f"{export_dir} is not a directory")
        if config is None and name is None and (export_dir / serving_files.CONFIG_NAME).is_file():
            config = export_dir / serving_files.CONFIG_NAME
        if config is None:
            name = name or "nmt"
            entries = [ModelEntry(name, export_dir / name, "latest", 1, (), {})]
            if not layout.versions(export_dir / name):
                raise ExportError(f"{export_dir / name} holds no exported version")
        else:
            entries = serving_files.read_models_config(config)
        servables = [load_servable(entry.name, entry.base_path, version, int8, threads, spin)
                     for entry in entries for version in entry.chosen_versions()]
        return cls(servables, {entry.name: entry.labels for entry in entries}, tuple(entries),
                   int8, threads, spin)

    def find(self, name: str, version: int | None = None, label: str | None = None) -> Servable:
        """The servable asked for (the newest version by default); 404 as TF Serving
        words it when there is none."""
        versions = self.models.get(name, {})
        if label is not None:
            version = self.labels.get(name, {}).get(label)
            if version is None:
                raise RequestError(404, f"Unrecognized servable version label: {label}")
        if version is None and versions:
            return versions[max(versions)]
        if version in versions:
            return versions[version]
        request = f"Latest({name})" if version is None else f"Specific({name}, {version})"
        raise RequestError(404, f"Servable not found for request: {request}")

    def servables(self) -> list[Servable]:
        models = self.models
        return [s for name in sorted(models) for _, s in sorted(models[name].items())]

    def poll(self, check: Callable[[Servable], None] | None = None) -> list[Change]:
        """Load the versions each model's policy serves now and unload the others, then
        put the new set in place at once; the changes made. ``check(servable)`` may
        refuse a loaded version by raising (a :class:`~keras_nmt.core.errors.UserError`).
        A version that fails to load or is refused is skipped (and tried again once its
        files change); a model none of whose wanted versions loads keeps those it had.
        Runs in a thread: it loads onnxruntime sessions."""
        models = dict(self.models)
        changes: list[Change] = []
        for entry in self.sources:
            had = models.get(entry.name, {})
            kept = self._wanted(entry, had, check, changes)
            if not kept or set(kept) == set(had):
                continue
            changes += [Change("unloaded", entry.name, v) for v in sorted(set(had) - set(kept))]
            models[entry.name] = kept
        if any(change.kind != "failed" for change in changes):
            self.models = models
        return changes

    def _wanted(self, entry: ModelEntry, had: dict[int, Servable], check,
                changes: list[Change]) -> dict[int, Servable]:
        """The versions of ``entry`` to serve now, loaded, newest first as the policy
        picks them; the failures appended to ``changes``."""
        found = layout.versions(entry.base_path)
        if entry.policy == "specific":
            candidates = [v for v in sorted(set(entry.specific), reverse=True) if v in found]
        else:
            candidates = sorted(found, reverse=True)
        count = entry.count if entry.policy == "latest" else len(candidates)
        labelled = set(self.labels.get(entry.name, {}).values())
        kept: dict[int, Servable] = {}
        for version in candidates:
            if len(kept) >= count and version not in labelled:
                continue
            if version in had:
                kept[version] = had[version]
                continue
            servable = self._load(entry, version, check, changes)
            if servable is not None:
                kept[version] = servable
        return kept

    def _load(self, entry: ModelEntry, version: int, check,
              changes: list[Change]) -> Servable | None:
        directory = layout.onnx_dir(entry.base_path.parent, entry.base_path.name, version)
        signature = _files_signature(directory)
        if self._failed.get((entry.name, version)) == signature:
            return None  # failed before, and nothing has changed since
        try:
            servable = load_servable(entry.name, entry.base_path, version, self.int8,
                                     self.threads, self.spin)
            if check is not None:
                check(servable)
        except Exception as error:  # noqa: BLE001 (a half-copied version may raise anything)
            self._failed[(entry.name, version)] = signature
            reason = " ".join(str(error).split())[:500] or type(error).__name__
            changes.append(Change("failed", entry.name, version, reason))
            return None
        self._failed.pop((entry.name, version), None)
        changes.append(Change("loaded", entry.name, version))
        return servable
