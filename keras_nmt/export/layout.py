"""Where an export's files lie, for the code that writes them and the code that reads them
(no TensorFlow here: the onnxruntime path reads exports too)::

    EXPORT_DIR/NAME/VERSION/          the SavedModel, in TF Serving's layout
    EXPORT_DIR/NAME/VERSION/onnx/     with --onnx: NAME.onnx, NAME.forced.onnx,
                                      NAME.onnx.json, the vocabularies (and
                                      NAME.int8.onnx, NAME.spm.LANG.model; with
                                      --constrained NAME.constrained.onnx and
                                      NAME.constrained.int8.onnx)
    EXPORT_DIR/models.config          :mod:`keras_nmt.export.serving_files`
    EXPORT_DIR/SERVING.md

The ONNX model lives inside the version it was exported with, so that it is moved into
place together with its SavedModel, and an export without --onnx cannot leave an older
model's ONNX file looking like the current one. TF Serving reads only the SavedModel's
own files in a version directory and ignores ``onnx/``.

Older keras-nmt versions wrote the ONNX files at the top of EXPORT_DIR, where nothing
says which version they came from; :func:`find_onnx_dir` refuses them.
"""

from __future__ import annotations

import os
import pathlib

from keras_nmt.core.errors import ExportError

ONNX_DIR = "onnx"


def versions(model_dir: str | os.PathLike) -> list[int]:
    """The version numbers under EXPORT_DIR/NAME, lowest first (none: an empty list)."""
    model_dir = pathlib.Path(model_dir)
    if not model_dir.is_dir():
        return []
    return sorted(int(p.name) for p in model_dir.iterdir() if p.name.isdigit() and p.is_dir())


def onnx_dir(export_dir: str | os.PathLike, name: str, version: int) -> pathlib.Path:
    """The directory of version ``version``'s ONNX files."""
    return pathlib.Path(export_dir) / name / str(version) / ONNX_DIR


def metadata_name(name: str) -> str:
    return f"{name}.onnx.json"


def find_onnx_dir(export_dir: str | os.PathLike, name: str,
                  version: int | None = None) -> pathlib.Path:
    """The directory holding the ONNX model of ``version`` (default: the newest version)
    of model ``name`` in EXPORT_DIR. ``export_dir`` may also be such a directory itself
    (EXPORT_DIR/NAME/VERSION/onnx). :class:`ExportError` (one line) when the version
    chosen has no ONNX model: a newest version exported without --onnx never falls back
    to an older one's model."""
    export_dir = pathlib.Path(export_dir)
    if not export_dir.is_dir():
        raise ExportError(f"{export_dir} is not a directory")
    metadata = metadata_name(name)
    model_dir = export_dir / name
    found = versions(model_dir)
    if not found:
        if version is None and (export_dir / metadata).is_file():
            return export_dir
        raise ExportError(f"{model_dir} holds no exported version and {export_dir} no "
                          f"{metadata} (was the model exported with --onnx?)")
    if version is not None and version not in found:
        raise ExportError(f"{model_dir} has no version {version} (it has "
                          f"{', '.join(map(str, found))})")
    chosen = found[-1] if version is None else version
    if (onnx_dir(export_dir, name, chosen) / metadata).is_file():
        return onnx_dir(export_dir, name, chosen)
    if version is not None:
        raise ExportError(f"{model_dir / str(chosen)} has no ONNX model (it was exported "
                          "without --onnx)")
    with_onnx = [v for v in found if (onnx_dir(export_dir, name, v) / metadata).is_file()]
    if with_onnx:
        raise ExportError(
            f"{model_dir / str(chosen)}, the newest version of {name!r}, has no ONNX model (it "
            f"was exported without --onnx): export again with --onnx, or pick --model-version "
            f"{with_onnx[-1]} (the newest that has one)"
        )
    if (export_dir / metadata).is_file():
        raise ExportError(
            f"{export_dir / metadata} was written by an older keras-nmt, which did not record "
            f"which version of {name!r} it belongs to: export the run again with --onnx"
        )
    raise ExportError(f"{model_dir / str(chosen)} has no ONNX model (was the model exported "
                      "with --onnx?)")
