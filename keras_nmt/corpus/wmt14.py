"""The paper's corpus: WMT'14 English-French, downloaded, checked and prepared.

``train.py --data wmt14-en-fr`` calls :func:`prepare`, which

1. downloads the archives of :data:`MANIFEST` into ``CACHE/wmt14-en-fr/downloads/``,
   resuming a partial download (``NAME.part``) with an HTTP Range request, and checks
   each file's size and SHA-256 before using it;
2. extracts the parallel files it needs into ``CACHE/wmt14-en-fr/extracted/``;
3. writes ``train.en/train.fr`` (Europarl v7, Common Crawl, UN, News Commentary v9 and
   the 10^9 French-English corpus, concatenated), ``valid.*`` (newstest2012 followed by
   newstest2013) and ``test.*`` (newstest2014, 3,003 sentences, from its SGM files) into
   ``CACHE/wmt14-en-fr/prepared/`` (``prepared-N/`` with ``max_train_pairs=N``).

Every step is skipped when its output is already complete, and outputs are written under
a temporary name and renamed, so an interrupted prepare is simply run again.

The cache is ``--cache-dir``, else ``$KERAS_NMT_CACHE``, else ``~/.cache/keras-nmt``.
Files come from their statmt.org addresses; with a mirror (``--mirror`` or
``$KERAS_NMT_WMT14_MIRROR``) every file is fetched as ``MIRROR/NAME``. Files placed by
hand in the downloads folder under their names are checked and used as they are.

The paper selected 348M words of this data with Axelrod et al.'s method; that selection
is not reproduced: ``max_train_pairs`` draws a uniform, seeded sample instead.
"""

from __future__ import annotations

import dataclasses
import hashlib
import http.client
import html
import os
import pathlib
import random
import re
import shutil
import tarfile
import urllib.error
import urllib.request
from typing import Callable, Iterator, Sequence

from keras_nmt.core.atomic import open_atomic
from keras_nmt.corpus.readers import file_lines
from keras_nmt.core.errors import CorpusError, DownloadError
from keras_nmt.core.progress import Progress

NAME = "wmt14-en-fr"
CACHE_ENV = "KERAS_NMT_CACHE"
MIRROR_ENV = "KERAS_NMT_WMT14_MIRROR"
DEFAULT_CACHE = pathlib.Path("~/.cache/keras-nmt")
SUBSAMPLE_SEED = 2014
_CHUNK = 1 << 20


@dataclasses.dataclass(frozen=True)
class Archive:
    """One downloadable file: where it lives, what it must be, and what we take from it."""

    url: str
    size: int  # bytes
    sha256: str
    # Corpus name -> (English member, French member) inside the archive.
    members: dict[str, tuple[str, str]]

    @property
    def filename(self) -> str:
        return self.url.rsplit("/", 1)[1]


# Sizes and SHA-256 digests as published in TensorFlow Datasets' checksum lists for its
# wmt14/wmt15 translate builders. The test sets come from the WMT'19 dev archive, which
# holds newstest2012/2013 as plain text and newstest2014 (fr-en, 3,003 sentences) as SGM.
MANIFEST: tuple[Archive, ...] = (
    Archive(
        "http://www.statmt.org/wmt13/training-parallel-europarl-v7.tgz", 657_632_379,
        "0224c7c710c8a063dfd893b0cc0830202d61f4c75c17eb8e31836103d27d96e7",
        {"europarl-v7": ("training/europarl-v7.fr-en.en", "training/europarl-v7.fr-en.fr")},
    ),
    Archive(
        "http://www.statmt.org/wmt13/training-parallel-commoncrawl.tgz", 918_311_367,
        "c7a74e2ea01ac6c920123108627e35278d4ccb5701e15428ffa34de86fa3a9e5",
        {"commoncrawl": ("commoncrawl.fr-en.en", "commoncrawl.fr-en.fr")},
    ),
    Archive(
        "http://www.statmt.org/wmt13/training-parallel-un.tgz", 2_365_634_246,
        "29141b5c1eba149a94f7a59d3b1a834b2e47fe0f8758d68dcd77a3d3f497ee47",
        {"un": ("un/undoc.2000.fr-en.en", "un/undoc.2000.fr-en.fr")},
    ),
    Archive(
        "http://www.statmt.org/wmt14/training-parallel-nc-v9.tgz", 80_418_416,
        "cb8953f292298e6877ae433c98912b927cb0766b303f4540512ddd286c748485",
        {"news-commentary-v9": (
            "training/news-commentary-v9.fr-en.en", "training/news-commentary-v9.fr-en.fr")},
    ),
    Archive(
        "http://www.statmt.org/wmt10/training-giga-fren.tar", 2_595_102_720,
        "3ff8319f6919393520559bfbc7ad6a747ec81b3abc7be9993b338d4b017b4d9a",
        {"giga-fren": ("giga-fren.release2.fixed.en.gz", "giga-fren.release2.fixed.fr.gz")},
    ),
    Archive(
        "http://data.statmt.org/wmt19/translation-task/dev.tgz", 38_654_961,
        "7a7deccf82ebb05ba508dba5eb21356492224e8f630ec4f992132b029b4b25e7",
        {
            "newstest2012": ("dev/newstest2012.en", "dev/newstest2012.fr"),
            "newstest2013": ("dev/newstest2013.en", "dev/newstest2013.fr"),
            # The fr->en files (the pairs are the same both ways); the archive's paths as
            # TensorFlow Datasets' wmt builder reads them.
            "newstest2014": (
                "dev/newstest2014-fren-ref.en.sgm", "dev/newstest2014-fren-src.fr.sgm"),
        },
    ),
)
SPLITS: dict[str, tuple[str, ...]] = {
    "train": ("europarl-v7", "commoncrawl", "un", "news-commentary-v9", "giga-fren"),
    "valid": ("newstest2012", "newstest2013"),
    "test": ("newstest2014",),
}
LANGS = ("en", "fr")


def cache_dir(option: str | os.PathLike | None = None) -> pathlib.Path:
    """``option``, else ``$KERAS_NMT_CACHE``, else ``~/.cache/keras-nmt``."""
    chosen = option or os.environ.get(CACHE_ENV) or DEFAULT_CACHE
    return pathlib.Path(chosen).expanduser()


def mirror_base(option: str | None = None) -> str | None:
    """``option``, else ``$KERAS_NMT_WMT14_MIRROR``, without a trailing slash; None for
    the statmt.org addresses."""
    chosen = option or os.environ.get(MIRROR_ENV)
    return chosen.rstrip("/") if chosen else None


def source_url(archive: Archive, mirror: str | None) -> str:
    mirror = mirror_base(mirror)
    return f"{mirror}/{archive.filename}" if mirror else archive.url


def hand_placement_hint(downloads: pathlib.Path, manifest: Sequence[Archive] = MANIFEST) -> str:
    names = ", ".join(a.filename for a in manifest)
    return (
        f"place the files by hand in {downloads} ({names}; from the statmt.org addresses in "
        f"keras_nmt/corpus/wmt14.py) and run again, or pass --data DIR with train/valid/test.en/.fr"
    )


# ---------------------------------------------------------------------------- download


def sha256_of(path: pathlib.Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def _verify(path: pathlib.Path, archive: Archive, hint: str) -> None:
    """Raise DownloadError (after moving the file aside) unless size and digest match."""
    size = path.stat().st_size
    problem = None
    if size != archive.size:
        problem = f"has {size} bytes, expected {archive.size}"
    else:
        digest = sha256_of(path)
        if digest != archive.sha256:
            problem = f"has SHA-256 {digest}, expected {archive.sha256}"
    if problem:
        rejected = path.with_name(path.name + ".rejected")
        os.replace(path, rejected)
        raise DownloadError(
            f"{archive.filename} {problem}; it was not used (moved to {rejected}); {hint}"
        )


def _fetch(url: str, part: pathlib.Path, expected_size: int, progress: Progress,
           timeout: float) -> None:
    """Append the rest of ``url`` to ``part``, from its current size (HTTP Range)."""
    have = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"User-Agent": "keras-nmt"})
    if have:
        request.add_header("Range", f"bytes={have}-")
    with urllib.request.urlopen(request, timeout=timeout) as response:
        if have and response.status != 206:  # the server ignored the range: start over
            have = 0
        announced = response.headers.get("Content-Length")
        received = 0
        with open(part, "ab" if have else "wb") as out:
            while True:
                block = response.read(_CHUNK)
                if not block:
                    break
                out.write(block)
                received += len(block)
                have += len(block)
                progress.update(
                    f"downloading {part.name[:-5]}: {have / 1e6:,.1f} / {expected_size / 1e6:,.1f} MB"
                )
    # http.client returns a short body without complaint when the peer closes early.
    if announced is not None and received < int(announced):
        raise http.client.IncompleteRead(b"", int(announced) - received)


def download(archive: Archive, downloads: pathlib.Path, mirror: str | None = None,
             attempts: int = 3, timeout: float = 60.0, quiet: bool = False,
             manifest: Sequence[Archive] = MANIFEST) -> pathlib.Path:
    """The checked local copy of ``archive``, downloading (or resuming) it if needed.

    A connection that breaks part-way is resumed from where it stopped, up to
    ``attempts`` times in this call; the partial file stays for the next call otherwise.
    """
    downloads.mkdir(parents=True, exist_ok=True)
    path = downloads / archive.filename
    hint = hand_placement_hint(downloads, manifest)
    if path.exists():
        _verify(path, archive, hint)
        return path
    part = path.with_name(path.name + ".part")
    url = source_url(archive, mirror)
    progress = Progress(log_seconds=30.0, enabled=not quiet)
    failure = ""
    for _ in range(attempts):
        before = part.stat().st_size if part.exists() else 0
        try:
            # A response read to its end is the whole file as the server sees it; a
            # wrong size or digest is then for _verify to report.
            _fetch(url, part, archive.size, progress, timeout)
            failure = ""
            break
        except urllib.error.HTTPError as error:
            if error.code == 416 and before >= archive.size:
                failure = ""  # nothing left to fetch: the part is whole
                break
            progress.close()
            raise DownloadError(f"cannot download {url}: HTTP {error.code} {error.reason}; {hint}") from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as error:
            reason = getattr(error, "reason", None) or error
            if isinstance(error, http.client.IncompleteRead):
                reason = "the connection broke before the end"
            failure = f"cannot download {url}: {reason}"
            if not part.exists() or part.stat().st_size == before:
                break  # no progress (server unreachable): do not insist
    progress.close()
    if failure:
        kept = f" ({part.stat().st_size} bytes kept in {part}, resumed next time)" if part.exists() else ""
        raise DownloadError(f"{failure}{kept}; {hint}")
    os.replace(part, path)
    _verify(path, archive, hint)
    return path


# ---------------------------------------------------------------------------- extraction


def _extract(archive_path: pathlib.Path, archive: Archive, extracted: pathlib.Path) -> dict[str, tuple[pathlib.Path, pathlib.Path]]:
    """Each corpus of ``archive`` as (English file, French file) under ``extracted``,
    taken from the archive in one streaming pass (only the members needed)."""
    wanted: dict[str, pathlib.Path] = {}
    corpora = {}
    for corpus, members in archive.members.items():
        paths = []
        for lang, member in zip(LANGS, members):
            suffix = ".gz" if member.endswith(".gz") else (".sgm" if member.endswith(".sgm") else "")
            target = extracted / f"{corpus}.{lang}{suffix}"
            wanted[member] = target
            paths.append(target)
        corpora[corpus] = tuple(paths)
    todo = {m: p for m, p in wanted.items() if not p.exists()}
    if todo:
        extracted.mkdir(parents=True, exist_ok=True)
        try:
            with tarfile.open(archive_path, "r|*") as tar:
                for info in tar:
                    target = todo.pop(info.name.lstrip("./"), None)
                    if target is None or not info.isfile():
                        continue
                    with tar.extractfile(info) as src, open_atomic(target, "wb") as dst:
                        shutil.copyfileobj(src, dst, _CHUNK)
                    if not todo:
                        break
        except (tarfile.TarError, EOFError, OSError) as error:
            raise CorpusError(f"{archive_path}: cannot read the archive ({error})") from None
        if todo:
            raise CorpusError(
                f"{archive_path} lacks {', '.join(sorted(todo))}: not the WMT'14 archive expected"
            )
    return corpora


_SEGMENT = re.compile(r"<seg[^>]*>(.*)</seg>", re.IGNORECASE)


def sgm_lines(path: pathlib.Path) -> Iterator[str]:
    """The text of each ``<seg>`` of an SGM file, in file order, entities decoded."""
    for line in file_lines(path, errors="replace"):
        match = _SEGMENT.search(line)
        if match:
            yield html.unescape(match.group(1)).strip()


def _plain_lines(path: pathlib.Path) -> Iterator[str]:
    # Real WMT files hold a few invalid UTF-8 bytes; they become U+FFFD rather than
    # stopping a multi-hour prepare.
    return file_lines(path, errors="replace")


def _corpus_pairs(en: pathlib.Path, fr: pathlib.Path) -> Iterator[tuple[str, str]]:
    read = sgm_lines if en.suffix == ".sgm" else _plain_lines
    sources, targets = read(en), read(fr)
    count = 0
    for count, (s, t) in enumerate(zip(sources, targets), start=1):
        yield s, t
    if next(sources, None) is not None or next(targets, None) is not None:
        raise CorpusError(f"{en} and {fr} differ in length after line {count}")


# ---------------------------------------------------------------------------- preparation


def _write_split(out: pathlib.Path, split: str, pairs: Iterator[tuple[str, str]],
                 keep: Callable[[int], bool] = lambda index: True) -> int:
    """Write ``split.en``/``split.fr`` atomically (:func:`keras_nmt.core.atomic.open_atomic`)."""
    written = 0
    with open_atomic(out / f"{split}.en", "w", encoding="utf-8", newline="\n") as en, \
            open_atomic(out / f"{split}.fr", "w", encoding="utf-8", newline="\n") as fr:
        for index, (s, t) in enumerate(pairs):
            if keep(index):
                # A line must stay one line: TextLineDataset splits on \n only.
                en.write(s.replace("\n", " ") + "\n")
                fr.write(t.replace("\n", " ") + "\n")
                written += 1
    return written


def _chain(corpora: dict[str, tuple[pathlib.Path, pathlib.Path]], names: Sequence[str]) -> Iterator[tuple[str, str]]:
    for name in names:
        yield from _corpus_pairs(*corpora[name])


def subsample_mask(total: int, count: int, seed: int = SUBSAMPLE_SEED) -> bytearray:
    """One byte per pair, 1 for the ``count`` pairs drawn out of ``total`` (the same for
    the same arguments); a byte a pair keeps 40M pairs in 40 MB."""
    mask = bytearray(total)
    for index in random.Random(seed).sample(range(total), min(count, total)):
        mask[index] = 1
    return mask


def prepare(
    cache: str | os.PathLike | None = None,
    mirror: str | None = None,
    max_train_pairs: int | None = None,
    log: Callable[[str], None] = print,
    manifest: Sequence[Archive] | None = None,
    quiet: bool = False,
) -> pathlib.Path:
    """Download, check, extract and lay out the corpus; returns the prepared directory
    (``train``, ``valid`` and ``test`` ``.en``/``.fr``). Raises DownloadError or
    CorpusError with a one-line message."""
    root = cache_dir(cache) / NAME
    downloads, extracted = root / "downloads", root / "extracted"
    out = root / ("prepared" if max_train_pairs is None else f"prepared-{max_train_pairs}")
    done = out / ".complete"
    if done.exists():
        log(f"{NAME}: using the prepared corpus in {out}")
        return out
    corpora: dict[str, tuple[pathlib.Path, pathlib.Path]] = {}
    manifest = MANIFEST if manifest is None else manifest
    for archive in manifest:
        path = download(archive, downloads, mirror, quiet=quiet, manifest=manifest)
        log(f"{NAME}: {archive.filename} checked (SHA-256 {archive.sha256[:12]}...); extracting")
        corpora.update(_extract(path, archive, extracted))
    out.mkdir(parents=True, exist_ok=True)
    keep: Callable[[int], bool] = lambda index: True
    if max_train_pairs is not None:
        total = sum(1 for _ in _chain(corpora, SPLITS["train"]))
        mask = subsample_mask(total, max_train_pairs)
        keep = mask.__getitem__
        log(f"{NAME}: sampling {min(total, max_train_pairs)} of {total} training pairs (seed {SUBSAMPLE_SEED})")
    counts = {
        split: _write_split(out, split, _chain(corpora, names), keep if split == "train" else (lambda i: True))
        for split, names in SPLITS.items()
    }
    done.write_text("".join(f"{split} {count}\n" for split, count in counts.items()))
    log(f"{NAME}: prepared {counts['train']} training, {counts['valid']} valid and "
        f"{counts['test']} test pairs in {out}")
    return out
