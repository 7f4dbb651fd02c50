"""Spelling rules the built-in corpus's grammar applies as it emits words: French
elision and contraction ("de" + "le" -> "du", "le" + "homme" -> "l'homme") and English
"a" -> "an".

French orthography is applied as tokens are emitted: every elision or contraction
involves the first word of a noun phrase or of a verb, so the word that triggers it is
always known at that point.
"""

FR_VOWEL_ONSET = frozenset("aeiouyhàâäéèêëîïôöùûüœæ")
# A determiner before a vowel-initial noun; decided before contraction, so
# "de" + "l'homme" stays "de l'homme" rather than becoming "du homme".
FR_PRE_VOWEL = {"le": "l'", "la": "l'", "ce": "cet", "sa": "son"}
FR_CONTRACTIONS = {("de", "le"): "du", ("de", "les"): "des", ("à", "le"): "au",
                   ("à", "les"): "aux", ("de", "des"): "de"}
# Elision after contraction, so that "de des hôpitaux" -> "d'hôpitaux".
FR_ELISIONS = {"de": "d'", "que": "qu'", "ne": "n'", "lorsque": "lorsqu'"}
# Words after which the next phrase-initial word may contract or elide.
FR_TRIGGERS = frozenset(("de", "à", *FR_ELISIONS))

# English "a" -> "an" goes by sound, not spelling.
EN_CONSONANT_SOUND = frozenset(("european", "useful", "university"))

ELISION_PREFIXES: tuple[str, ...] = ("l'", "d'", "qu'", "j'", "n'", "s'", "c'", "lorsqu'", "jusqu'")
