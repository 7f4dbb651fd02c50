"""Generated lines for the text rules' agreement tests (tests/test_text_agreement.py: the
TensorFlow twins, tests/test_web_rules.py: the JavaScript rules): the same lines, drawn with
a fixed seed from pools chosen for the rules."""

import random
import sys
import unicodedata

from keras_nmt.text.twin_check import KNOWN_DIFFERENCES

# The languages the lines are compared in.
LANGS = ("en", "fr", "zh")

# What the rules look at, for the generated lines.
WORDS = ["the", "man", "is", "Mr", "Dr", "No", "M", "MM", "etc", "vol", "p", "a", "J", "U.S",
         "p.m", "i.e", "qu'on", "l'homme", "aujourd'hui", "don't", "John's", "rock'n'roll",
         "C’est", "e-mail", "km/h", "IHNED.cz", "3.5", "1,000", "100 000", "2", "Ça", "État",
         "Ελληνικά", "Русский", "中文", "日本語", "ひらがな", "カタカナ", "עברית", "العربية",
         "😀", "👨\u200d👩\u200d👧", "🇫🇷", "e\u0301", "H₂O", "½", "Ⅻ", "ǅ"]
PUNCTUATION = list(".,;:!?…．。｡！？'\"`’‘“”«»‹›„()[]{}「」『』（）［］｛｝〈〉《》【】〔〕〖〗¿¡"
                   "-–—/\\%$€&@#*+=<>|~^_") + ["...", "....", ". . .", "?!"]
SPACES = list(" \t\r\n\x00\x01\x0b\x0c\x1c\x1f\x7f\x85\u00a0\u1680\u2000\u2007\u200a\u200b"
              "\u2028\u2029\u202f\u205f\u3000\ufeff")


def _assigned_characters() -> list[str]:
    """Every assigned character but those the engines are known to read apart."""
    apart = {c for points in KNOWN_DIFFERENCES.values() for c in points}
    return [chr(c) for c in range(sys.maxunicode + 1)
            if unicodedata.category(chr(c)) not in ("Cn", "Cs") and c not in apart]


def generated_lines(count: int, seed: int) -> list[str]:
    """``count`` lines drawn with ``seed``: words and abbreviations the rules name, every
    kind of punctuation and quote they treat, every kind of space and control character,
    and any assigned character, glued together or spaced, up to 40 pieces a line."""
    rng = random.Random(seed)
    anything = _assigned_characters()
    pools = (WORDS, PUNCTUATION, SPACES, anything)
    lines = []
    for _ in range(count):
        pieces = []
        for _ in range(rng.randint(0, 40)):
            pool = pools[rng.choices(range(4), weights=(6, 4, 2, 1))[0]]
            pieces.append(rng.choice(pool))
            pieces.append(rng.choice(("", " ", " ", " ")))
        lines.append("".join(pieces))
    return lines
