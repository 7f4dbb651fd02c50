"""onnxruntime-web's files, as this package's ``package-lock.json`` pins them.

The web export copies three files of its WebAssembly build (the CPU kernels, SIMD and
threads) into every folder. They come from the npm registry only, installed with
``npm ci`` from the lock file: into this package's folder by the install command of the
README (``npm ci --prefix keras_nmt/web``), or, where that was not run, by the first
export into a cache folder keyed by the lock file's hash. Cost: one ``npm ci`` (about 150
MB of packages) per lock file and machine; after that, nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import shutil
import subprocess

from keras_nmt.core.errors import ExportError

HERE = pathlib.Path(__file__).resolve().parent
PACKAGE = "onnxruntime-web"
# The WebAssembly build without WebGPU or WebGL: the ES module, its loader and the kernels.
FILES = ("ort.wasm.min.mjs", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm")
# The package has no licence file: its package.json names the licence and the version.
LICENSE = "package.json"


def pinned_version(lock: pathlib.Path = HERE / "package-lock.json") -> str:
    """The onnxruntime-web version the lock file pins."""
    packages = json.loads(lock.read_text(encoding="utf-8"))["packages"]
    return packages[f"node_modules/{PACKAGE}"]["version"]


def _installed(prefix: pathlib.Path, version: str) -> pathlib.Path | None:
    """``prefix``'s onnxruntime-web dist folder, if it holds ``version`` and every file."""
    folder = prefix / "node_modules" / PACKAGE
    try:
        found = json.loads((folder / "package.json").read_text(encoding="utf-8"))["version"]
    except (OSError, ValueError, KeyError):
        return None
    dist = folder / "dist"
    return dist if found == version and all((dist / name).is_file() for name in FILES) else None


def cache_folder() -> pathlib.Path:
    """Where an export installs the pinned packages when the package's folder lacks them."""
    lock = (HERE / "package-lock.json").read_bytes()
    base = pathlib.Path(os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache")
    return base / "keras-nmt" / f"web-{hashlib.sha256(lock).hexdigest()[:16]}"


def _npm_ci(prefix: pathlib.Path) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise ExportError("a web export needs onnxruntime-web from npm, and npm is not "
                          "installed: install Node.js 20 and npm, then run "
                          f"npm ci --prefix {HERE}")
    prefix.mkdir(parents=True, exist_ok=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(HERE / name, prefix / name)
    done = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--prefix", str(prefix)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise ExportError(f"npm ci of {PACKAGE} failed: {last}")


def runtime_dist() -> pathlib.Path:
    """The folder holding :data:`FILES` of the pinned onnxruntime-web: this package's
    own install, else the cache's, else installed into the cache now (:class:`ExportError`,
    one line, where npm is missing or fails)."""
    version = pinned_version()
    for prefix in (HERE, cache_folder()):
        found = _installed(prefix, version)
        if found is not None:
            return found
    _npm_ci(cache_folder())
    found = _installed(cache_folder(), version)
    if found is None:
        raise ExportError(f"npm ci did not install {PACKAGE} {version} into {cache_folder()}")
    return found
