"""The hypothesis strategies and settings of the property-based tests (test_fuzz,
test_fuzz_export): any Unicode text a user can paste, and how many examples to draw.

KERAS_NMT_FUZZ_EXAMPLES sets how many examples (batches of 1-8 lines) the properties draw
(default 50, for CI; a longer check before a release draws 2000 or more). The examples are the same on
every run (conftest's "repeatable" profile); ``pytest --hypothesis-profile explore`` draws
new ones.
"""

import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

EXAMPLES = int(os.environ.get("KERAS_NMT_FUZZ_EXAMPLES", "50"))
LINES_PER_BATCH = 8

# Surrogates (Cs) are excluded: they cannot be encoded in UTF-8.
ANY_CHAR = st.characters(exclude_categories=("Cs",))
# The two regex engines carry different Unicode versions (the regex package is newer
# than TensorFlow's RE2): a code point assigned in between, say a letter of a new CJK
# extension, is a letter to one and not to the other. Agreement is checked on code
# points assigned as of Python's unicodedata (Unicode 14) plus all the rest
# (control, format, private use...); the other properties take any code point.
ASSIGNED_CHAR = st.characters(exclude_categories=("Cs", "Cn"))
EMOJI = st.sampled_from(["😀", "👍🏽", "👨\u200d👩\u200d👧", "🇫🇷", "\u2764\ufe0f", "🏳️\u200d🌈"])
WORDS = st.sampled_from(["the", "man", "is", "here", ".", ",", "l'", "homme", "'s", "3.5", "..."])


def line_strategy(chars):
    return st.one_of(
        st.text(chars, max_size=60),
        st.text(chars, min_size=500, max_size=3000),  # very long, every category
        st.lists(st.one_of(WORDS, EMOJI, st.text(chars, max_size=3)), max_size=400).map(" ".join),
        st.text(st.sampled_from(" \t\r\x00\x0b\x0c\x1c\x85\u00a0\u2028\u2029\u202f\u3000\ufeff"),
                max_size=20),  # nothing but spaces and separators
    )


LINE = line_strategy(ANY_CHAR)


def fuzz(examples: int):
    return settings(max_examples=max(1, examples), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
