"""``keras-nmt web EXPORT_DIR --out FOLDER``: a static folder that translates in the
browser and in Node.js, offline, from an ONNX export.

The folder::

    index.html page.mjs web.css sw.js    the page and its service worker (offline), with
    figures.mjs page.css                 keras-nmt serve's page's figures and styles
    translator.mjs text_rules.mjs        the JavaScript module: onnx-translate's pipeline
    cli.mjs                              Node.js: stdin -> stdout, as onnx-translate
    model/web.json                       what the module reads: languages, limits, files
    model/rules.json                     the text rules as data (keras_nmt.text.rule_data)
    model/NAME(.int8).onnx, vocab.*.txt, dictionary.json
    ort/                                 onnxruntime-web's WebAssembly build and licence

Nothing in it is fetched from elsewhere. The int8 model is taken where the export has one
(its ``DynamicQuantizeMatMul`` and ``MatMulInteger`` run in onnxruntime-web's WebAssembly
build), else the float one. Word runs only: SentencePiece has no WebAssembly build on npm
kept by its own project, so such an export is refused in one line. The folder is written
beside its place and renamed into it: an interrupted export leaves the old one whole.
Cost: copying the model and the runtime (about 30 MB), no conversion.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import os
import pathlib
import shutil
import tempfile

from keras_nmt import __version__
from keras_nmt.core.atomic import json_text
from keras_nmt.core.constants import BOS_ID, EOS_ID, PAD_ID, UNK, UNK_ID
from keras_nmt.core.errors import ExportError
from keras_nmt.decoding.onnx_translator import load_metadata
from keras_nmt.export import layout
from keras_nmt.lexicon.unk_dictionary import load_dictionary
from keras_nmt.text import codecs, rule_data
from keras_nmt.web import runtime

JS = runtime.HERE / "js"
# The module, the Node.js command and the page, copied as they are.
SCRIPTS = ("translator.mjs", "text_rules.mjs", "cli.mjs", "index.html", "page.mjs",
           "web.css", "sw.js")
# The server page's own figures (heat map, confidence colours) and styles, shared.
SERVER_PAGE = pathlib.Path(__file__).resolve().parents[1] / "serving" / "static"
SHARED = ("figures.mjs", "page.css")
FORMAT = 1  # of web.json: translator.mjs refuses another
MARK = "model/web.json"  # what makes a folder a web export (replaced without asking)


@dataclasses.dataclass(frozen=True)
class WebFolder:
    """A written folder: its place, whether its model is int8, and each part's weight
    in bytes, raw and gzip-compressed (what a server that compresses sends)."""

    path: pathlib.Path
    int8: bool
    sizes: dict[str, tuple[int, int]]


def _chosen_model(metadata: dict, onnx_dir: pathlib.Path, int8: bool) -> tuple[str, bool]:
    quantized = (metadata.get("int8") or {}).get("model")
    if int8 and quantized and (onnx_dir / quantized).is_file():
        return quantized, True
    return metadata["model"], False


def _web_metadata(metadata: dict, model: str, int8: bool, dictionary: str | None) -> dict:
    """web.json: what translator.mjs reads, from NAME.onnx.json and the package's constants."""
    keys = ("src", "tgt", "max_source_len", "beam_size", "alpha", "max_decode_ratio")
    return {
        "format": FORMAT, "keras_nmt": __version__,
        **{key: metadata.get(key) for key in keys},
        "nbest": int(metadata.get("nbest", 1)),
        "shortlist": metadata.get("shortlist"),
        "rare_sources": [int(i) for i in metadata.get("rare_sources") or ()],
        "split_sentences": bool(metadata.get("split_sentences", False)),
        "unk_replace": dictionary is not None,
        "int8": int8,
        "reserved": {"pad_id": PAD_ID, "unk_id": UNK_ID, "bos_id": BOS_ID, "eos_id": EOS_ID,
                     "unk": UNK},
        "files": {"model": f"model/{model}", "rules": "model/rules.json",
                  "source_vocab": "model/vocab.src.txt", "target_vocab": "model/vocab.tgt.txt",
                  "dictionary": dictionary and f"model/{dictionary}"},
    }


def _write_model(target: pathlib.Path, onnx_dir: pathlib.Path, metadata: dict,
                 int8: bool) -> dict:
    """The model, vocabularies, dictionary and rules into ``target``/model/; returns the
    web.json to write once every file is there."""
    model, chosen_int8 = _chosen_model(metadata, onnx_dir, int8)
    folder = target / "model"
    folder.mkdir()
    shutil.copyfile(onnx_dir / model, folder / model)
    shutil.copyfile(onnx_dir / metadata["source_vocab"], folder / "vocab.src.txt")
    shutil.copyfile(onnx_dir / metadata["target_vocab"], folder / "vocab.tgt.txt")
    dictionary = None
    if metadata.get("unk_replace") and metadata.get("dictionary"):
        dictionary = "dictionary.json"
        entries = load_dictionary(onnx_dir / str(metadata["dictionary"]))
        (folder / dictionary).write_text(json_text(entries, ensure_ascii=False), encoding="utf-8")
    rules = rule_data.rule_document((metadata["src"], metadata["tgt"]))
    (folder / "rules.json").write_text(json_text(rules, ensure_ascii=False), encoding="utf-8")
    return _web_metadata(metadata, model, chosen_int8, dictionary)


def _write_scripts(target: pathlib.Path) -> None:
    for name in SCRIPTS:
        shutil.copyfile(JS / name, target / name)
    for name in SHARED:
        shutil.copyfile(SERVER_PAGE / name, target / name)
    dist = runtime.runtime_dist()
    (target / "ort").mkdir()
    for name in runtime.FILES:
        shutil.copyfile(dist / name, target / "ort" / name)
    shutil.copyfile(dist.parent / runtime.LICENSE, target / "ort" / runtime.LICENSE)


def _write_manifest(target: pathlib.Path, web: dict) -> None:
    """web.json, with the folder's files (what the service worker caches) and an id
    that changes with any of them."""
    assets = sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file())
    digest = hashlib.sha256()
    for name in assets:
        digest.update(name.encode() + b"\0" + (target / name).read_bytes())
    web = {**web, "id": digest.hexdigest()[:16], "assets": assets + [MARK]}
    (target / MARK).write_text(json_text(web, indent=1, ensure_ascii=False) + "\n",
                               encoding="utf-8")


def sizes(folder: pathlib.Path) -> dict[str, tuple[int, int]]:
    """Each file's (bytes, gzip-compressed bytes), by path within ``folder``."""
    found = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        found[path.relative_to(folder).as_posix()] = (len(data), len(gzip.compress(data, 6)))
    return found


def _place(built: pathlib.Path, out: pathlib.Path) -> None:
    """``built`` renamed to ``out``; an older web export there is replaced, anything
    else refused."""
    if out.exists():
        if not (out / MARK).is_file():
            raise ExportError(f"{out} exists and is not a web export: choose another --out")
        old = out.with_name(out.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(out, old)
        os.replace(built, out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(built, out)


def write_web_folder(export_dir: str | os.PathLike, out: str | os.PathLike, name: str = "nmt",
                     version: int | None = None, int8: bool = True) -> WebFolder:
    """The web folder of ``name`` (its newest version, or ``version``) in ``export_dir``,
    written to ``out`` (:class:`ExportError`, one line, for an export it cannot use)."""
    onnx_dir = layout.find_onnx_dir(export_dir, name, version)
    metadata = load_metadata(onnx_dir / layout.metadata_name(name))
    if metadata.get("tokenizer", codecs.WORD) != codecs.WORD:
        raise ExportError("a web export runs word-tokenized models only: SentencePiece has no "
                          "WebAssembly build on npm kept by its own project, so its pieces "
                          "could not be made exactly as in Python")
    out = pathlib.Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    built = pathlib.Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    built.chmod(0o755)  # mkdtemp's 0700 would keep a static server of another user out
    try:
        web = _write_model(built, onnx_dir, metadata, int8)
        _write_scripts(built)
        _write_manifest(built, web)
        _place(built, out)
    finally:
        shutil.rmtree(built, ignore_errors=True)
    return WebFolder(out, web["int8"], sizes(out))
