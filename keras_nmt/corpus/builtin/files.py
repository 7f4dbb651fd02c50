"""The built-in corpus on disk: ``{train,valid,test}.{en,fr,align}`` and ``builtin.json``,
written once per spec and found complete again on later calls."""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
from collections.abc import Iterable
from typing import Any

from keras_nmt.core.atomic import write_bytes_atomic, write_json_atomic
from keras_nmt.corpus.builtin.generate import (
    GENERATOR_VERSION, BuiltinCorpusSpec, corpus_stats, generate_corpus,
)
from keras_nmt.corpus.builtin.dictionary import SOURCE_LANG, TARGET_LANG
from keras_nmt.corpus.readers import SPLITS
from keras_nmt.text.word import detokenize

_FORMAT_VERSION = 1

METADATA_FILE = "builtin.json"
CORPUS_FILES: tuple[str, ...] = tuple(
    f"{split}.{ext}" for split in SPLITS for ext in (SOURCE_LANG, TARGET_LANG, "align")
)


def _read_metadata(directory: pathlib.Path) -> dict[str, Any] | None:
    try:
        with open(directory / METADATA_FILE, encoding="utf-8") as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def _is_complete(directory: pathlib.Path, spec: BuiltinCorpusSpec) -> bool:
    meta = _read_metadata(directory)
    if (meta is None or meta.get("format") != _FORMAT_VERSION
            or meta.get("generator_version") != GENERATOR_VERSION
            or meta.get("spec") != dataclasses.asdict(spec)):
        return False
    sizes = meta.get("files")
    if not isinstance(sizes, dict):
        return False
    for name in CORPUS_FILES:
        try:
            if (directory / name).stat().st_size != sizes.get(name):
                return False
        except OSError:
            return False
    return True


def _write_lines(path: pathlib.Path, lines: Iterable[str]) -> int:
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    write_bytes_atomic(path, data)
    return len(data)


def write_corpus(directory: str | os.PathLike[str],
                 spec: BuiltinCorpusSpec = BuiltinCorpusSpec()) -> pathlib.Path:
    """Writes the corpus for ``spec`` into ``directory`` unless already there.

    Files: ``{train,valid,test}.{en,fr,align}`` (UTF-8, LF, one sentence or
    Pharaoh alignment per line) and ``builtin.json`` (spec, stats, file sizes).
    Each file is replaced atomically (:mod:`keras_nmt.core.atomic`), and builtin.json
    is removed first and written last, so a crash in between leaves no
    builtin.json and the next call regenerates. Other files in ``directory`` are
    left alone. Two processes writing the same spec at once write the same bytes,
    so either may finish first.
    """
    directory = pathlib.Path(directory)
    if _is_complete(directory, spec):
        return directory
    corpus = generate_corpus(spec)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / METADATA_FILE).unlink(missing_ok=True)
    sizes: dict[str, int] = {}
    for split, pairs in corpus.items():
        sizes[f"{split}.{SOURCE_LANG}"] = _write_lines(
            directory / f"{split}.{SOURCE_LANG}", (detokenize(p.source, SOURCE_LANG) for p in pairs))
        sizes[f"{split}.{TARGET_LANG}"] = _write_lines(
            directory / f"{split}.{TARGET_LANG}", (detokenize(p.target, TARGET_LANG) for p in pairs))
        sizes[f"{split}.align"] = _write_lines(
            directory / f"{split}.align", (p.pharaoh() for p in pairs))
    write_json_atomic(directory / METADATA_FILE, {
        "format": _FORMAT_VERSION,
        "generator_version": GENERATOR_VERSION,
        "source_lang": SOURCE_LANG,
        "target_lang": TARGET_LANG,
        "spec": dataclasses.asdict(spec),
        "stats": corpus_stats(corpus),
        "files": sizes,
    })
    return directory
