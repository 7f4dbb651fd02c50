"""A synthetic parallel corpus with the shape of news text, of any size: for measuring
how every stage's time and memory grow with the corpus (``bench.scale``), not for
learning to translate (the built-in corpus, :mod:`keras_nmt.corpus.builtin`, is that).

Generated from a seed, copied from no corpus: Zipfian vocabularies of a given number of
word types a side, made of syllables; lognormal line lengths with a few very long lines
and a few empty sides; commas, numbers and a final period, so that after word
tokenization a pair has about 27-30 tokens a side, as the paper's WMT'14 news text has.

Cost: linear in the pairs written, in chunks of 50,000 lines; memory holds one chunk and
the word types (``types`` strings a side).
"""

from __future__ import annotations

import pathlib

import numpy as np

LANGS = ("en", "fr")
HELD_OUT_PAIRS = 500  # the valid and test splits' lines

_SYLLABLES = {
    "en": ("ta", "ro", "mi", "ne", "sa", "lo", "ber", "ton", "ka", "ri", "den", "vel", "mar",
           "is", "on", "ar", "el", "pre", "st", "ling", "ham", "ford", "wi", "ty", "ex", "co",
           "gra", "sh", "ple", "quo", "tr", "ow"),
    "fr": ("la", "ré", "mi", "no", "sé", "lou", "ber", "ton", "ca", "ri", "dé", "vel", "mar",
           "ais", "on", "eau", "el", "pré", "st", "ière", "ham", "fort", "oi", "té", "ex", "co",
           "gra", "ch", "ple", "quê", "tr", "ou"),
}


def _types(lang: str, count: int):
    """``count`` distinct word types, shortest for the most frequent ranks."""
    syllables = _SYLLABLES[lang]
    base = len(syllables)
    words = []
    for rank in range(count):
        n, parts = rank + 1, []
        while n:
            n, digit = divmod(n - 1, base)
            parts.append(syllables[digit])
        word = "".join(parts)
        # Proper-noun-like capitals in the rarer ranks, as in news text.
        words.append(word.capitalize() if rank % 13 == 7 and rank > 200 else word)
    return np.array(words, dtype=object)


def write_corpus(directory: pathlib.Path, pairs: int, types: int, seed: int = 0) -> dict:
    """train.en/train.fr with ``pairs`` lines, valid and test with :data:`HELD_OUT_PAIRS`;
    returns what was written (pairs, types a side, the training files' bytes).

    Source lengths are lognormal (median 22 words, long right tail, capped at 120);
    1 line in 2,000 is very long (150-400 words) and 1 in 2,000 pairs has an empty side.
    The target has about 1.05 times the source's words. Words are drawn from a Zipf law
    (exponent 1) over ``types`` types a side; about 8% carry a comma, a few are numbers,
    and every sentence ends with a period: after word tokenization a pair has about
    27-30 tokens a side."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / ".complete").unlink(missing_ok=True)
    rng = np.random.default_rng(seed)
    vocab = {lang: _types(lang, types) for lang in LANGS}
    weights = 1.0 / np.arange(1, types + 1)
    cdf = np.cumsum(weights) / weights.sum()
    chunk = 50_000

    def lines(count: int, rng) -> dict[str, list[str]]:
        src_len = np.clip(np.round(rng.lognormal(np.log(22), 0.45, count)), 1, 120).astype(int)
        very_long = rng.random(count) < 1 / 2000
        src_len[very_long] = rng.integers(150, 400, very_long.sum())
        ratio = rng.lognormal(np.log(1.05), 0.15, count)
        tgt_len = np.clip(np.round(src_len * ratio), 1, 440).astype(int)
        out = {}
        for lang, lengths in zip(LANGS, (src_len, tgt_len)):
            total = int(lengths.sum())
            words = vocab[lang][np.searchsorted(cdf, rng.random(total))]
            punctuation = rng.random(total)
            words = np.where(punctuation < 0.08, words + ",", words)
            numbers = punctuation > 0.985
            words[numbers] = rng.integers(1, 5000, numbers.sum()).astype(str).astype(object)
            ends = np.cumsum(lengths)
            starts = ends - lengths
            text = []
            for a, b in zip(starts.tolist(), ends.tolist()):
                line = " ".join(words[a:b])
                text.append(line[:1].upper() + line[1:].rstrip(",") + ".")
            out[lang] = text
        empty = np.flatnonzero(rng.random(count) < 1 / 2000)
        for i in empty.tolist():
            out[LANGS[i % 2]][i] = ""
        return out

    for split, count, split_seed in (("train", pairs, seed), ("valid", HELD_OUT_PAIRS, seed + 1),
                                     ("test", HELD_OUT_PAIRS, seed + 2)):
        split_rng = np.random.default_rng(split_seed) if split != "train" else rng
        files = {lang: open(directory / f"{split}.{lang}", "w", encoding="utf-8") for lang in LANGS}
        try:
            for start in range(0, count, chunk):
                for lang, text in lines(min(chunk, count - start), split_rng).items():
                    files[lang].write("\n".join(text) + "\n")
        finally:
            for f in files.values():
                f.close()
    (directory / ".complete").write_text("")
    return {"pairs": pairs, "types_per_side": types,
            "train_bytes": sum((directory / f"train.{lang}").stat().st_size for lang in LANGS)}
