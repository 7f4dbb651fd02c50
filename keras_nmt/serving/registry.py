"""The models a server serves: each version an :class:`OnnxTranslator`, found by name and
version (or version label) as TF Serving finds its servables.

The models come from a ``models.config`` (TF Serving's format, read by
:func:`keras_nmt.export.serving_files.read_models_config`: names, base paths, version
policies, labels) or from one model of an export directory (its newest version). Every
version served must hold the ONNX files ``keras-nmt export --onnx`` writes
(:mod:`keras_nmt.export.layout`). Loading costs one onnxruntime session a version;
nothing here grows with a corpus.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib

from keras_nmt.errors import ExportError, RequestError
from keras_nmt.export import layout, serving_files
from keras_nmt.serving.onnx_translator import OnnxTranslator


@dataclasses.dataclass(eq=False)  # hashed by identity: a batch key
class Servable:
    name: str
    version: int
    translator: OnnxTranslator
    int8: bool

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


def load_servable(name: str, base_path: pathlib.Path, version: int, int8: bool = False,
                  threads: int | None = None) -> Servable:
    """Version ``version`` of the model whose versions lie in ``base_path``."""
    directory = layout.onnx_dir(base_path.parent, base_path.name, version)
    translator = OnnxTranslator.from_export_dir(
        directory, _metadata_stem(directory, name), threads, int8=int8
    )
    return Servable(name, version, translator, int8)


class Registry:
    """Model name -> its served versions, and each model's version labels."""

    def __init__(self, servables: list[Servable], labels: dict[str, dict[str, int]] | None = None):
        self.models: dict[str, dict[int, Servable]] = {}
        for servable in servables:
            self.models.setdefault(servable.name, {})[servable.version] = servable
        self.labels = {name: dict(found) for name, found in (labels or {}).items()}
        for name, found in self.labels.items():
            for label, version in found.items():
                if version not in self.models.get(name, {}):
                    raise ExportError(f"model {name!r}: label {label!r} names version "
                                      f"{version}, which is not served")

    @classmethod
    def from_export_dir(cls, export_dir: str | os.PathLike, name: str | None = None,
                        config: str | os.PathLike | None = None, int8: bool = False,
                        threads: int | None = None) -> "Registry":
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
            found = layout.versions(export_dir / name)
            if not found:
                raise ExportError(f"{export_dir / name} holds no exported version")
            return cls([load_servable(name, export_dir / name, found[-1], int8, threads)])
        entries = serving_files.read_models_config(config)
        servables = [load_servable(entry.name, entry.base_path, version, int8, threads)
                     for entry in entries for version in entry.chosen_versions()]
        return cls(servables, {entry.name: entry.labels for entry in entries})

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
        return [s for name in sorted(self.models) for _, s in sorted(self.models[name].items())]
