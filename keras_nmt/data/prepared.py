"""The training split as token ids on disk: one tokenization pass writes them, training
reads any pair by its index (docs/data.md, "The prepared training split").

The folder ``RUN_DIR/prepared/`` (:attr:`keras_nmt.rundir.run_directory.RunDir.prepared`)
holds ``train.SRC.ids`` (the kept pairs' source ids, no EOS, one flat little-endian uint16
array, uint32 for a larger vocabulary), ``train.SRC.offsets`` (int64, kept + 1: pair i is
``ids[offsets[i]:offsets[i+1]]``), the same for TGT, with :class:`Sampling` the copies
``train.SRC.sampleK.*`` (epoch E reads copy E mod copies), and ``train.json`` (counts, dtypes,
statistics), written last. It is renamed into place whole: a crash leaves only a temporary
folder, which the next start removes. :func:`prepare_split` runs the graph tokenizer in
tf.data and maps provisional ids to the vocabulary's in one sequential pass.
Cost: linear in the corpus; memory holds the distinct tokens and one chunk. Training reads
through ``np.memmap``, one vectorized gather a side: any order costs the same, and memory
does not grow with the corpus. Each sampled copy costs the ids' disk space and a sampler pass.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import os
import pathlib
import shutil
import tempfile
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from keras_nmt.core.atomic import replace_folder
from keras_nmt.core.constants import UNK_ID
from keras_nmt.corpus.readers import ParallelFiles, count_lines, line_count_error
from keras_nmt.corpus.scan import SplitStats
from keras_nmt.core.errors import CorpusError, PreparedError
from keras_nmt.text.vocab import Vocabulary

SPLIT = "train"
FORMAT = 1
CHUNK = 2048  # lines tokenized per call; a few chunks run at once
REMAP_CHUNK = 1 << 22  # ids remapped per step of the second pass
_LENGTH = np.dtype("<u2")  # a kept pair's side holds at most max_len tokens
# The longest side a length file holds (config.MAX_LEN_LIMIT keeps max_len within it).
MAX_LENGTH = int(np.iinfo(_LENGTH).max)


def ids_dtype(vocab_size: int) -> np.dtype:
    return np.dtype("<u2") if vocab_size <= 1 << 16 else np.dtype("<u4")


SAMPLE_CHUNK = 8192  # pairs resegmented per step of a sampled copy


def _names(lang: str, copy: int | None = None) -> tuple[str, str]:
    stem = f"{SPLIT}.{lang}" if copy is None else f"{SPLIT}.{lang}.sample{copy}"
    return f"{stem}.ids", f"{stem}.offsets"


@dataclasses.dataclass(frozen=True)
class Sampling:
    """Subword regularisation's copies of a split: ``copies`` of every kept pair, each side
    resegmented by ``resegment[side](best ids of a chunk of pairs, rngs)``, which gives
    one list of rows per generator (as many rows as given, none longer than max_len).
    Copy K draws from a NumPy generator seeded by (``seed``, K, side): the same seed
    gives the same copies. ``progress(done, total)`` counts the rows done of copies x
    sides x pairs."""
    copies: int
    resegment: tuple[Callable[[list[list[int]], Sequence[np.random.Generator]],
                              list[list[list[int]]]], ...]
    seed: int
    progress: Callable[[int, int], None] = lambda done, total: None


def _mapped(path: pathlib.Path, dtype) -> np.ndarray:
    """``path`` as a read-only array (an empty file, which cannot be mapped, as an empty one)."""
    if path.stat().st_size == 0:
        return np.zeros(0, dtype)
    return np.memmap(path, dtype, "r")


def ragged_take(values: np.ndarray, offsets: np.ndarray, rows: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``rows`` of the ragged array ``values`` whose row i is
    ``values[offsets[i]:offsets[i + 1]]``: (their values, flat, in order; their lengths,
    int64). One vectorized index, however many rows."""
    rows = np.asarray(rows, np.int64)
    starts = np.asarray(offsets[rows], np.int64)
    lengths = np.asarray(offsets[rows + 1], np.int64) - starts
    positions = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths) + np.arange(
        int(lengths.sum()), dtype=np.int64)
    return np.asarray(values[positions]), lengths


def ragged_reorder(values: np.ndarray, lengths: np.ndarray, order: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """The rows of a flat ragged array (``values``, row lengths ``lengths``) in ``order``."""
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    return ragged_take(values, offsets, order)


class PreparedSplit:
    """A prepared training split, read by pair index (:meth:`gather`). Maps its files
    read-only and holds no data of its own: any number of threads may gather at once.
    Reading a pair costs the same at any corpus size."""

    def __init__(self, directory: str | os.PathLike, src: str, tgt: str):
        self._maps: dict[int | None, list[tuple[np.ndarray, np.ndarray]]] | None = None
        self.directory = pathlib.Path(directory)
        manifest = self.directory / f"{SPLIT}.json"
        try:
            self.info = json.loads(manifest.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise PreparedError(f"no prepared training data in {self.directory} "
                                f"({manifest.name} is missing)") from None
        if self.info.get("format") != FORMAT or self.info.get("langs") != [src, tgt]:
            raise PreparedError(f"{manifest} is not a prepared {src}-{tgt} split of this version")
        self.count = int(self.info["count"])
        self._sides = []
        for lang in (src, tgt):
            side = self.info["sides"][lang]
            dtype = np.dtype(side["dtype"])
            paths = [self.directory / name for name in _names(lang)]
            self._check_sizes(paths, side["tokens"] * dtype.itemsize)
            self._sides.append((dtype, *paths))
        samples = self.info.get("samples") or {}
        self.copies = int(samples.get("copies", 0))
        for copy in range(self.copies):
            for lang, (dtype, _, _) in zip((src, tgt), self._sides):
                self._check_sizes([self.directory / name for name in _names(lang, copy)],
                                  samples["tokens"][lang][copy] * dtype.itemsize)
        # Mapped once, here: several reading threads share them. Copy None is the best
        # segmentation, copies 0 .. copies - 1 the sampled ones.
        self._maps = {
            copy: [(_mapped(self.directory / _names(lang, copy)[0], dtype),
                    _mapped(self.directory / _names(lang, copy)[1], np.dtype("<i8")))
                   for lang, (dtype, _, _) in zip((src, tgt), self._sides)]
            for copy in (None, *range(self.copies))
        }

    def _check_sizes(self, paths: list[pathlib.Path], ids_bytes: int) -> None:
        """PreparedError unless the ids and offsets files hold what train.json says."""
        for path, size in zip(paths, (ids_bytes, (self.count + 1) * 8)):
            if not path.is_file():
                raise PreparedError(f"{self.directory} lacks {path.name}, which {SPLIT}.json "
                                    "lists: prepare the run again")
            if path.stat().st_size != size:
                raise PreparedError(f"{path} holds {path.stat().st_size} bytes, {SPLIT}.json "
                                    f"says {size}: prepare the run again")

    def close(self) -> None:
        self._maps = None  # the mappings close with their last reference

    def __del__(self):
        self.close()

    def gather(self, indices: np.ndarray, epochs: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
        """Pairs by index -> (source ids, source lengths, target ids, target lengths):
        ids int32 and flat, lengths int64, no EOS. With sampled copies and ``epochs``
        (one per index), pair i of epoch E comes from copy E mod copies; otherwise each
        pair in its best segmentation."""
        indices = np.asarray(indices, np.int64)
        if self.copies and epochs is not None:
            copies = np.asarray(epochs, np.int64) % self.copies
            groups = [(int(c), np.flatnonzero(copies == c)) for c in np.unique(copies)]
        else:
            groups = [(None, np.arange(len(indices)))]
        # The rows gathered copy by copy, then put back into the given order.
        order = np.argsort(np.concatenate([rows for _, rows in groups]), kind="stable")
        out: list[np.ndarray] = []
        for side in range(len(self._sides)):
            parts = [ragged_take(*self._maps[copy][side], indices[rows]) for copy, rows in groups]
            values, lengths = ragged_reorder(np.concatenate([p[0] for p in parts]),
                                             np.concatenate([p[1] for p in parts]), order)
            out += [values.astype(np.int32), lengths]
        return tuple(out)

    def token_counts(self, side: int, size: int) -> np.ndarray:
        """int64 [size]: how often each id stands on one side (0 source, 1 target) of
        the kept pairs, the best segmentation's. One streamed pass over the side's ids:
        memory holds one chunk, whatever the corpus size."""
        dtype, ids_path, _ = self._sides[side]
        counts = np.zeros(size, np.int64)
        left = ids_path.stat().st_size
        with open(ids_path, "rb") as ids:
            # Never asked for more than is left: read(n) allocates n bytes first.
            while left and (chunk := ids.read(min(left, REMAP_CHUNK * dtype.itemsize))):
                left -= len(chunk)
                found = np.bincount(np.frombuffer(chunk, dtype), minlength=size)
                if found.size > size:
                    raise PreparedError(f"{ids_path} holds ids of {found.size} words, not "
                                        f"{size}: prepare the run again")
                counts += found
        return counts

    def pair(self, index: int) -> tuple[list[int], list[int]]:
        """One pair's (source ids, target ids), without EOS."""
        source, _, target, _ = self.gather(np.array([index]))
        return source.tolist(), target.tolist()


class MixedSplit:
    """A run's own prepared split and another's (``train --mix``) read as one: index i
    below ``own.count`` is the own pair i, ``own.count + j`` the other's pair j, whose ids
    are ids of the same vocabularies. Each epoch holds the own pairs and
    ``drawn_per_epoch`` of the other's (:func:`keras_nmt.data.pipelines.mixed_pair_indices`); the
    other's are read in their best segmentation, and only those drawn are read."""

    def __init__(self, own: PreparedSplit, other: PreparedSplit, drawn_per_epoch: int):
        if other.count == 0 or drawn_per_epoch < 1:
            raise ValueError("a mix draws at least one pair an epoch from a split that has some")
        self.own, self.other, self.drawn_per_epoch = own, other, drawn_per_epoch
        self.count, self.copies, self.directory, self.info = (
            own.count, own.copies, own.directory, own.info)

    def gather(self, indices: np.ndarray, epochs: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
        """:meth:`PreparedSplit.gather` of the combined indices, in their order."""
        indices = np.asarray(indices, np.int64)
        theirs = indices >= self.own.count
        own = self.own.gather(indices[~theirs],
                              None if epochs is None else np.asarray(epochs)[~theirs])
        other = self.other.gather(indices[theirs] - self.own.count)
        # The gathered rows are the own ones, then the other's: back into the given order.
        order = np.argsort(np.concatenate([np.flatnonzero(~theirs), np.flatnonzero(theirs)]),
                           kind="stable")
        out: list[np.ndarray] = []
        for side in (0, 2):
            out += ragged_reorder(np.concatenate([own[side], other[side]]),
                                  np.concatenate([own[side + 1], other[side + 1]]), order)
        return tuple(out)

    def close(self) -> None:
        self.own.close()
        self.other.close()


def exists(directory: str | os.PathLike) -> bool:
    return (pathlib.Path(directory) / f"{SPLIT}.json").is_file()


# ----------------------------------------------------------------------------- writing


class _Side:
    """One language's share of the pass: provisional ids and lengths written to disk,
    counts per provisional id. Token sides map each distinct token (bytes) to a
    provisional id; id sides (SentencePiece) take the encoder's ids as they are."""

    def __init__(self, directory: pathlib.Path, lang: str, tokens: bool):
        self.lang = lang
        self.tokens = tokens
        self.table: dict[bytes, int] = {}
        self.counts = np.zeros(0, np.int64)
        self.ids_path = directory / f"{lang}.provisional"
        self.lengths_path = directory / f"{lang}.lengths"
        self.ids_file = open(self.ids_path, "wb")
        self.lengths_file = open(self.lengths_path, "wb")
        self.total = 0

    def add(self, values: np.ndarray, lengths: np.ndarray, uniques=None) -> None:
        if len(lengths) and int(lengths.max()) > MAX_LENGTH:
            # Cast, it would wrap and misalign every later pair, unseen by the size checks.
            raise PreparedError(f"a {self.lang} side of {int(lengths.max()):,} tokens does not "
                                f"fit the prepared split's lengths (at most {MAX_LENGTH:,})")
        if self.tokens:  # values index ``uniques``, this chunk's distinct tokens
            table, before = self.table, len(self.table)
            # setdefault(t, len(table)): a new token takes the next provisional id.
            known = np.fromiter((table.setdefault(t, len(table)) for t in uniques.tolist()),
                                np.int64, len(uniques))
            for token in uniques[known >= before].tolist():
                # TF's tokenizer passes invalid UTF-8 through: check each token once.
                token.decode("utf-8")
            values = known[values]
        values = values.astype(np.uint32)
        counts = np.bincount(values)
        if len(counts) > len(self.counts):
            counts[: len(self.counts)] += self.counts
            self.counts = counts
        else:
            self.counts[: len(counts)] += counts
        self.ids_file.write(values.tobytes())
        self.lengths_file.write(lengths.astype(_LENGTH).tobytes())
        self.total += len(values)

    def close(self) -> None:
        self.ids_file.close()
        self.lengths_file.close()

    def token_counts(self, vocabulary: Vocabulary | None = None) -> collections.Counter:
        """Counts by token: the table's (token sides) or ``vocabulary``'s (id sides)."""
        if self.tokens:
            names = [t.decode("utf-8") for t in self.table]
        else:
            names = list(vocabulary.tokens) + [f"<id {i}>" for i in
                                                range(len(vocabulary), len(self.counts))]
        return collections.Counter({names[i]: int(c) for i, c in enumerate(self.counts) if c})

    def mapping(self, vocabulary: Vocabulary) -> np.ndarray:
        """Provisional id -> vocabulary id (UNK for tokens outside it)."""
        if not self.tokens:
            return np.arange(max(len(self.counts), 1), dtype=np.int64)
        ids = {token: i for i, token in enumerate(vocabulary.tokens)}
        mapping = np.full(max(len(self.table), 1), UNK_ID, np.int64)
        for token, provisional in self.table.items():
            mapping[provisional] = ids.get(token.decode("utf-8"), UNK_ID)
        return mapping

    def write_final(self, vocabulary: Vocabulary, directory: pathlib.Path) -> dict[str, Any]:
        """The second pass: provisional ids -> vocabulary ids in the final dtype, and
        lengths -> offsets, both streamed."""
        dtype = ids_dtype(len(vocabulary))
        mapping = self.mapping(vocabulary)
        ids_name, offsets_name = _names(self.lang)
        with open(self.ids_path, "rb") as src, open(directory / ids_name, "wb") as dst:
            while chunk := src.read(REMAP_CHUNK * 4):
                dst.write(mapping[np.frombuffer(chunk, np.uint32)].astype(dtype).tobytes())
        with open(self.lengths_path, "rb") as src, open(directory / offsets_name, "wb") as dst:
            end = 0
            dst.write(np.zeros(1, "<i8").tobytes())
            while chunk := src.read(REMAP_CHUNK * _LENGTH.itemsize):
                offsets = end + np.cumsum(np.frombuffer(chunk, _LENGTH), dtype=np.int64)
                dst.write(offsets.astype("<i8").tobytes())
                end = int(offsets[-1])
        self.ids_path.unlink()
        self.lengths_path.unlink()
        return {"dtype": dtype.str, "tokens": self.total, "vocabulary": len(vocabulary)}


def _chunks(files: ParallelFiles, tokenizers, max_len: int) -> Iterator[tuple]:
    """The split tokenized by the graph tokenizers, chunk by chunk, in file order: per
    chunk (pairs, empty, too long) and per side the kept pairs' values and lengths
    (token sides: indices into the chunk's distinct tokens, and those tokens)."""
    import tensorflow as tf

    from keras_nmt.data import pipelines as data

    def tokenize(source_lines, target_lines):
        sides = [tokenizer(lines) for tokenizer, lines in zip(tokenizers, (source_lines, target_lines))]
        lengths = [side.row_lengths() for side in sides]
        nonempty = (lengths[0] > 0) & (lengths[1] > 0)
        keep = nonempty & (lengths[0] <= max_len) & (lengths[1] <= max_len)
        counts = tf.stack([tf.size(keep, tf.int64),
                           tf.reduce_sum(tf.cast(~nonempty, tf.int64)),
                           tf.reduce_sum(tf.cast(nonempty & ~keep, tf.int64))])
        out = [counts]
        for side in sides:
            kept = tf.ragged.boolean_mask(side, keep)
            if kept.dtype == tf.string:
                uniques, index = tf.unique(kept.flat_values, out_idx=tf.int32)
                out.append((index, kept.row_lengths(), uniques))
            else:
                out.append((kept.flat_values, kept.row_lengths()))
        return tuple(out)

    dataset = (data.text_pairs(files).batch(CHUNK)
               .map(tokenize, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
               .prefetch(4))
    for counts, *sides in dataset.as_numpy_iterator():
        yield counts, sides


def prepare_split(
    files: ParallelFiles,
    directory: pathlib.Path,
    langs: tuple[str, str],
    tokenizers: tuple[Callable, Callable],
    max_len: int,
    vocabularies: Callable[[SplitStats], tuple[Vocabulary, Vocabulary]],
    progress: Callable[[int], None] = lambda pairs: None,
    sampling: Sampling | None = None,
) -> tuple[SplitStats, tuple[Vocabulary, Vocabulary]]:
    """Tokenize ``files`` once with the graph ``tokenizers`` (lines [N] -> ragged tokens,
    or ragged ids for a subword model), keep the pairs with 1 to ``max_len`` tokens a
    side, count, choose the vocabularies with ``vocabularies(stats)`` and write the
    prepared split into ``directory`` (replaced atomically). Returns the statistics (as
    :func:`keras_nmt.corpus.scan.scan_training_split` gives them) and the vocabularies.

    With ``sampling``, its copies of the kept pairs are written too (:class:`Sampling`).

    Raises CorpusError for invalid UTF-8 in a kept pair or line counts that differ,
    naming the file and line. (SentencePiece runs read every line in Python to train
    their models, which checks it is UTF-8.)"""
    if max_len > MAX_LENGTH:
        raise PreparedError(f"max_len {max_len:,} does not fit the prepared split's lengths "
                            f"(at most {MAX_LENGTH:,})")
    directory = pathlib.Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(directory)
    work = pathlib.Path(tempfile.mkdtemp(dir=directory.parent, prefix=f".{directory.name}.",
                                         suffix=".tmp"))
    try:
        stats = SplitStats()
        sides: list[_Side] = []
        for chunk_index, (counts, chunk) in enumerate(_chunks(files, tokenizers, max_len)):
            if not sides:
                sides = [_Side(work, lang, len(part) == 3) for lang, part in zip(langs, chunk)]
            pairs, empty, too_long = (int(c) for c in counts)
            stats.pairs += pairs
            stats.empty += empty
            stats.too_long += too_long
            stats.kept += pairs - empty - too_long
            for side, (values, lengths, *uniques) in zip(sides, chunk):
                side.add(values, lengths, *uniques)
            progress(stats.pairs)
        for side in sides:
            side.close()
        _check_whole(files, stats.pairs)
        if sides:
            stats.source_tokens, stats.target_tokens = (side.total for side in sides)
            if all(side.tokens for side in sides):
                stats.source_counts, stats.target_counts = (s.token_counts() for s in sides)
        chosen = vocabularies(stats)
        if sides and not sides[0].tokens:
            stats.source_counts, stats.target_counts = (
                s.token_counts(v) for s, v in zip(sides, chosen))
        manifest = {"format": FORMAT, "langs": list(langs), "count": stats.kept,
                    "max_len": max_len, "sides": {}, "train": stats.summary()}
        for lang, side, vocabulary in zip(langs, sides, chosen):
            manifest["sides"][lang] = side.write_final(vocabulary, work)
        if not sides:  # an empty file: nothing kept, the caller reports it
            for lang, vocabulary in zip(langs, chosen):
                for name in _names(lang):
                    (work / name).write_bytes(np.zeros(1, "<i8").tobytes() if "offsets" in name else b"")
                manifest["sides"][lang] = {"dtype": ids_dtype(len(vocabulary)).str, "tokens": 0,
                                           "vocabulary": len(vocabulary)}
        if sampling and stats.kept:
            manifest["samples"] = _write_samples(work, langs, manifest, sampling)
        (work / f"{SPLIT}.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n",
                                            encoding="utf-8")
        replace_folder(work, directory, work.with_name(work.name.replace(".tmp", ".old.tmp")))
        remove_stale(directory)
    except UnicodeDecodeError:
        shutil.rmtree(work, ignore_errors=True)
        files.check()  # finds the file and line, and says so in a CorpusError
        raise CorpusError(f"{files.source} or {files.target} holds text that is not UTF-8") from None
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return stats, chosen


def _write_samples(work: pathlib.Path, langs: Sequence[str], manifest: dict[str, Any],
                   sampling: Sampling) -> dict[str, Any]:
    """Write ``sampling.copies`` resegmented copies of the best-segmentation ids in
    ``work``, SAMPLE_CHUNK pairs at a time (memory: one chunk a copy); their entry of
    train.json. All copies of a chunk are drawn in one call, so each sentence's
    candidate segmentations are searched once, not once a copy."""
    count, done = manifest["count"], 0
    tokens: dict[str, list[int]] = {}  # a side's copies' token counts
    for side, lang in enumerate(langs):
        dtype = np.dtype(manifest["sides"][lang]["dtype"])
        ids_name, offsets_name = _names(lang)
        best = np.memmap(work / ids_name, dtype, "r")
        offsets = np.memmap(work / offsets_name, "<i8", "r")
        rngs = [np.random.default_rng([sampling.seed, copy, side])
                for copy in range(sampling.copies)]
        ends = [0] * sampling.copies
        with contextlib.ExitStack() as stack:
            files = [tuple(stack.enter_context(open(work / name, "wb"))
                           for name in _names(lang, copy)) for copy in range(sampling.copies)]
            for _, offsets_file in files:
                offsets_file.write(np.zeros(1, "<i8").tobytes())
            for start in range(0, count, SAMPLE_CHUNK):
                stop = min(start + SAMPLE_CHUNK, count)
                rows = [best[offsets[i]:offsets[i + 1]].tolist() for i in range(start, stop)]
                copies = sampling.resegment[side](rows, rngs)
                if len(copies) != sampling.copies or any(len(c) != len(rows) for c in copies):
                    raise PreparedError(
                        f"resegmenting {len(rows)} pairs into {sampling.copies} copies gave "
                        f"{[len(c) for c in copies]} rows")
                for copy, (sampled, (ids_file, offsets_file)) in enumerate(zip(copies, files)):
                    lengths = np.array([len(row) for row in sampled], np.int64)
                    ids_file.write(np.fromiter((t for row in sampled for t in row), dtype,
                                               int(lengths.sum())).tobytes())
                    offsets_file.write((ends[copy] + np.cumsum(lengths)).astype("<i8").tobytes())
                    ends[copy] += int(lengths.sum())
                done += (stop - start) * sampling.copies
                sampling.progress(done, count * len(langs) * sampling.copies)
        del best, offsets
        tokens[lang] = ends
    return {"copies": sampling.copies, "seed": sampling.seed, "tokens": tokens}


def _check_whole(files: ParallelFiles, pairs: int) -> None:
    """The pass read pairs until the shorter file ended: both must have ended there,
    and every line must be UTF-8 (TF's tokenizer passes invalid bytes through)."""
    counts = count_lines(files.source), count_lines(files.target)
    if counts[0] != counts[1]:
        raise line_count_error(files, *counts)
    assert counts[0] == pairs, (counts, pairs)


def remove_stale(directory: pathlib.Path) -> None:
    """Remove what a killed preparation left next to ``directory``: its temporary folders."""
    for stale in directory.parent.glob(f".{directory.name}.*.tmp"):
        shutil.rmtree(stale, ignore_errors=True)
