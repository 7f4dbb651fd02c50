"""Built-in English-to-French corpus, generated from a lexicon and a small grammar.

The toolkit must train out of the box (``python train.py``) without downloading
anything, so it ships a synthetic corpus instead of data.  A toy corpus is only
useful for an attention model if a plain encoder-decoder finds it hard, so the
grammar deliberately produces the phenomena that make Bahdanau et al. (2015)
attention pay off:

* local reordering: English adjectives precede the noun, French ones follow it,
  and stacked adjectives come out in reverse order ("the European economic
  area" -> "la zone économique européenne"); preverbal English adverbs follow
  the French verb; "does not see" -> "ne voit pas".
* agreement that needs look-ahead or look-back: le/la/les/l', un/une,
  ce/cet/cette/ces, son/sa/ses all depend on the noun, which in English can be
  several adjectives away; adjectives take one of four forms; verbs agree with
  their (possibly coordinated, possibly distant) subject.
* many-to-one and one-to-many tokens: "of the" -> "du", "to the" -> "au",
  "near" -> "près de", "in front of" -> "devant", "needs" -> "a besoin de".
* long sentences: nested prepositional phrases, subject and object relative
  clauses, subordinate and coordinated clauses.  Sentence length is steered by
  a target length drawn first, so the length distribution is predictable.

The grammar (:class:`_Generator`) emits English tokens in English order and
French tokens in French order, each French token carrying the indices of the
English tokens it translates, so the gold alignment is exact by construction.
All reordering in this grammar is local, so a phrase can always emit its
English tokens before the matching French ones.  French elision and
contraction are applied as each phrase's first word is emitted (the word that
triggers them is known then); a contraction merges the alignments of the two
words it fuses ("of" + "the" -> "du").

Everything is pure standard library and driven by an explicit
``random.Random``; no global random state, ``hash()`` or set order is used, so a
spec always yields byte-identical files on every machine and process.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import random
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from typing import Any

from keras_nmt.text.word import detokenize

__all__ = [
    "SOURCE_LANG",
    "TARGET_LANG",
    "BuiltinCorpusSpec",
    "SentencePair",
    "generate_pair",
    "generate_corpus",
    "write_corpus",
    "corpus_stats",
]

SOURCE_LANG = "en"
TARGET_LANG = "fr"

# Bump whenever the lexicon or grammar changes: the same spec then yields a
# different corpus, and write_corpus must not mistake an old one for current.
GENERATOR_VERSION = 1
_FORMAT_VERSION = 1

SPLITS: tuple[str, ...] = ("train", "valid", "test")
METADATA_FILE = "builtin.json"
CORPUS_FILES: tuple[str, ...] = tuple(
    f"{split}.{ext}" for split in SPLITS for ext in (SOURCE_LANG, TARGET_LANG, "align")
)


# --------------------------------------------------------------------------
# Lexicon
# --------------------------------------------------------------------------
# Noun categories restrict which verbs and adjectives combine with a noun so
# that most sentences are at least plausible: H human, A animal,
# O object/abstract, P place.
_ANY = "HAOP"

# (English singular, English plural, French singular, French plural, gender, category)
# No French noun starts with an aspirated h: every h-initial word elides.
_NOUNS: tuple[tuple[str, str, str, str, str, str], ...] = (
    ("man", "men", "homme", "hommes", "m", "H"),
    ("woman", "women", "femme", "femmes", "f", "H"),
    ("child", "children", "enfant", "enfants", "m", "H"),
    ("boy", "boys", "garçon", "garçons", "m", "H"),
    ("girl", "girls", "fille", "filles", "f", "H"),
    ("student", "students", "étudiant", "étudiants", "m", "H"),
    ("pupil", "pupils", "élève", "élèves", "m", "H"),
    ("teacher", "teachers", "professeur", "professeurs", "m", "H"),
    ("doctor", "doctors", "médecin", "médecins", "m", "H"),
    ("nurse", "nurses", "infirmière", "infirmières", "f", "H"),
    ("friend", "friends", "ami", "amis", "m", "H"),
    ("neighbour", "neighbours", "voisine", "voisines", "f", "H"),
    ("farmer", "farmers", "agriculteur", "agriculteurs", "m", "H"),
    ("artist", "artists", "artiste", "artistes", "m", "H"),
    ("engineer", "engineers", "ingénieur", "ingénieurs", "m", "H"),
    ("lawyer", "lawyers", "avocate", "avocates", "f", "H"),
    ("judge", "judges", "juge", "juges", "m", "H"),
    ("king", "kings", "roi", "rois", "m", "H"),
    ("queen", "queens", "reine", "reines", "f", "H"),
    ("soldier", "soldiers", "soldat", "soldats", "m", "H"),
    ("baker", "bakers", "boulanger", "boulangers", "m", "H"),
    ("driver", "drivers", "conducteur", "conducteurs", "m", "H"),
    ("singer", "singers", "chanteuse", "chanteuses", "f", "H"),
    ("actress", "actresses", "actrice", "actrices", "f", "H"),
    ("writer", "writers", "écrivain", "écrivains", "m", "H"),
    ("uncle", "uncles", "oncle", "oncles", "m", "H"),
    ("aunt", "aunts", "tante", "tantes", "f", "H"),
    ("sister", "sisters", "sœur", "sœurs", "f", "H"),
    ("brother", "brothers", "frère", "frères", "m", "H"),
    ("worker", "workers", "ouvrier", "ouvriers", "m", "H"),
    ("minister", "ministers", "ministre", "ministres", "m", "H"),
    ("president", "presidents", "président", "présidents", "m", "H"),
    ("inhabitant", "inhabitants", "habitant", "habitants", "m", "H"),
    ("tourist", "tourists", "touriste", "touristes", "m", "H"),
    ("guest", "guests", "invitée", "invitées", "f", "H"),
    ("dog", "dogs", "chien", "chiens", "m", "A"),
    ("cat", "cats", "chat", "chats", "m", "A"),
    ("horse", "horses", "cheval", "chevaux", "m", "A"),
    ("bird", "birds", "oiseau", "oiseaux", "m", "A"),
    ("cow", "cows", "vache", "vaches", "f", "A"),
    ("mouse", "mice", "souris", "souris", "f", "A"),
    ("bear", "bears", "ours", "ours", "m", "A"),
    ("sheep", "sheep", "mouton", "moutons", "m", "A"),
    ("fish", "fish", "poisson", "poissons", "m", "A"),
    ("rabbit", "rabbits", "lapin", "lapins", "m", "A"),
    ("elephant", "elephants", "éléphant", "éléphants", "m", "A"),
    ("owl", "owls", "chouette", "chouettes", "f", "A"),
    ("bee", "bees", "abeille", "abeilles", "f", "A"),
    ("spider", "spiders", "araignée", "araignées", "f", "A"),
    ("duck", "ducks", "canard", "canards", "m", "A"),
    ("wolf", "wolves", "loup", "loups", "m", "A"),
    ("book", "books", "livre", "livres", "m", "O"),
    ("letter", "letters", "lettre", "lettres", "f", "O"),
    ("table", "tables", "table", "tables", "f", "O"),
    ("chair", "chairs", "chaise", "chaises", "f", "O"),
    ("door", "doors", "porte", "portes", "f", "O"),
    ("window", "windows", "fenêtre", "fenêtres", "f", "O"),
    ("car", "cars", "voiture", "voitures", "f", "O"),
    ("bicycle", "bicycles", "vélo", "vélos", "m", "O"),
    ("key", "keys", "clé", "clés", "f", "O"),
    ("box", "boxes", "boîte", "boîtes", "f", "O"),
    ("bottle", "bottles", "bouteille", "bouteilles", "f", "O"),
    ("glass", "glasses", "verre", "verres", "m", "O"),
    ("plate", "plates", "assiette", "assiettes", "f", "O"),
    ("cup", "cups", "tasse", "tasses", "f", "O"),
    ("bag", "bags", "sac", "sacs", "m", "O"),
    ("newspaper", "newspapers", "journal", "journaux", "m", "O"),
    ("picture", "pictures", "image", "images", "f", "O"),
    ("painting", "paintings", "tableau", "tableaux", "m", "O"),
    ("song", "songs", "chanson", "chansons", "f", "O"),
    ("story", "stories", "histoire", "histoires", "f", "O"),
    ("idea", "ideas", "idée", "idées", "f", "O"),
    ("question", "questions", "question", "questions", "f", "O"),
    ("report", "reports", "rapport", "rapports", "m", "O"),
    ("map", "maps", "carte", "cartes", "f", "O"),
    ("clock", "clocks", "horloge", "horloges", "f", "O"),
    ("umbrella", "umbrellas", "parapluie", "parapluies", "m", "O"),
    ("apple", "apples", "pomme", "pommes", "f", "O"),
    ("cake", "cakes", "gâteau", "gâteaux", "m", "O"),
    ("gift", "gifts", "cadeau", "cadeaux", "m", "O"),
    ("ticket", "tickets", "billet", "billets", "m", "O"),
    ("coat", "coats", "manteau", "manteaux", "m", "O"),
    ("hat", "hats", "chapeau", "chapeaux", "m", "O"),
    ("shoe", "shoes", "chaussure", "chaussures", "f", "O"),
    ("computer", "computers", "ordinateur", "ordinateurs", "m", "O"),
    ("telephone", "telephones", "téléphone", "téléphones", "m", "O"),
    ("flower", "flowers", "fleur", "fleurs", "f", "O"),
    ("stone", "stones", "pierre", "pierres", "f", "O"),
    ("ball", "balls", "ballon", "ballons", "m", "O"),
    ("toy", "toys", "jouet", "jouets", "m", "O"),
    ("egg", "eggs", "œuf", "œufs", "m", "O"),
    ("orange", "oranges", "orange", "oranges", "f", "O"),
    ("envelope", "envelopes", "enveloppe", "enveloppes", "f", "O"),
    ("instrument", "instruments", "instrument", "instruments", "m", "O"),
    ("decision", "decisions", "décision", "décisions", "f", "O"),
    ("law", "laws", "loi", "lois", "f", "O"),
    ("project", "projects", "projet", "projets", "m", "O"),
    ("problem", "problems", "problème", "problèmes", "m", "O"),
    ("agreement", "agreements", "accord", "accords", "m", "O"),
    ("economy", "economies", "économie", "économies", "f", "O"),
    ("policy", "policies", "politique", "politiques", "f", "O"),
    ("tree", "trees", "arbre", "arbres", "m", "O"),
    ("knife", "knives", "couteau", "couteaux", "m", "O"),
    ("photograph", "photographs", "photo", "photos", "f", "O"),
    ("lamp", "lamps", "lampe", "lampes", "f", "O"),
    ("mirror", "mirrors", "miroir", "miroirs", "m", "O"),
    ("pencil", "pencils", "crayon", "crayons", "m", "O"),
    ("ring", "rings", "bague", "bagues", "f", "O"),
    ("house", "houses", "maison", "maisons", "f", "P"),
    ("school", "schools", "école", "écoles", "f", "P"),
    ("church", "churches", "église", "églises", "f", "P"),
    ("hospital", "hospitals", "hôpital", "hôpitaux", "m", "P"),
    ("hotel", "hotels", "hôtel", "hôtels", "m", "P"),
    ("station", "stations", "gare", "gares", "f", "P"),
    ("garden", "gardens", "jardin", "jardins", "m", "P"),
    ("park", "parks", "parc", "parcs", "m", "P"),
    ("city", "cities", "ville", "villes", "f", "P"),
    ("village", "villages", "village", "villages", "m", "P"),
    ("river", "rivers", "rivière", "rivières", "f", "P"),
    ("forest", "forests", "forêt", "forêts", "f", "P"),
    ("street", "streets", "rue", "rues", "f", "P"),
    ("island", "islands", "île", "îles", "f", "P"),
    ("kitchen", "kitchens", "cuisine", "cuisines", "f", "P"),
    ("bedroom", "bedrooms", "chambre", "chambres", "f", "P"),
    ("office", "offices", "bureau", "bureaux", "m", "P"),
    ("library", "libraries", "bibliothèque", "bibliothèques", "f", "P"),
    ("museum", "museums", "musée", "musées", "m", "P"),
    ("shop", "shops", "magasin", "magasins", "m", "P"),
    ("factory", "factories", "usine", "usines", "f", "P"),
    ("university", "universities", "université", "universités", "f", "P"),
    ("bank", "banks", "banque", "banques", "f", "P"),
    ("restaurant", "restaurants", "restaurant", "restaurants", "m", "P"),
    ("airport", "airports", "aéroport", "aéroports", "m", "P"),
    ("bridge", "bridges", "pont", "ponts", "m", "P"),
    ("mountain", "mountains", "montagne", "montagnes", "f", "P"),
    ("beach", "beaches", "plage", "plages", "f", "P"),
    ("country", "countries", "pays", "pays", "m", "P"),
    ("company", "companies", "entreprise", "entreprises", "f", "P"),
    ("theatre", "theatres", "théâtre", "théâtres", "m", "P"),
    ("apartment", "apartments", "appartement", "appartements", "m", "P"),
    ("area", "areas", "zone", "zones", "f", "P"),
    ("market", "markets", "marché", "marchés", "m", "P"),
)

# (English, French m.sg, f.sg, m.pl, f.pl, English order rank, noun categories)
# The rank orders stacked English adjectives the way English does (opinion,
# size/shape, state, colour, origin, purpose); French puts them after the noun
# in the reverse order.  Only adjectives that French places after the noun
# are used, so the reordering rule holds without exceptions.
_ADJECTIVES: tuple[tuple[str, str, str, str, str, int, str], ...] = (
    ("important", "important", "importante", "importants", "importantes", 0, "HOP"),
    ("interesting", "intéressant", "intéressante", "intéressants", "intéressantes", 0, _ANY),
    ("difficult", "difficile", "difficile", "difficiles", "difficiles", 0, "HO"),
    ("easy", "facile", "facile", "faciles", "faciles", 0, "O"),
    ("famous", "célèbre", "célèbre", "célèbres", "célèbres", 0, _ANY),
    ("strange", "étrange", "étrange", "étranges", "étranges", 0, _ANY),
    ("dangerous", "dangereux", "dangereuse", "dangereux", "dangereuses", 0, _ANY),
    ("beautiful", "magnifique", "magnifique", "magnifiques", "magnifiques", 0, _ANY),
    ("useful", "utile", "utile", "utiles", "utiles", 0, "O"),
    ("heavy", "lourd", "lourde", "lourds", "lourdes", 1, "AO"),
    ("light", "léger", "légère", "légers", "légères", 1, "O"),
    ("round", "rond", "ronde", "ronds", "rondes", 1, "O"),
    ("square", "carré", "carrée", "carrés", "carrées", 1, "OP"),
    ("fast", "rapide", "rapide", "rapides", "rapides", 1, "AO"),
    ("slow", "lent", "lente", "lents", "lentes", 1, "AO"),
    ("modern", "moderne", "moderne", "modernes", "modernes", 2, "OP"),
    ("ancient", "ancien", "ancienne", "anciens", "anciennes", 2, "OP"),
    ("recent", "récent", "récente", "récents", "récentes", 2, "O"),
    ("tired", "fatigué", "fatiguée", "fatigués", "fatiguées", 2, "HA"),
    ("happy", "heureux", "heureuse", "heureux", "heureuses", 2, "HA"),
    ("sick", "malade", "malade", "malades", "malades", 2, "HA"),
    ("rich", "riche", "riche", "riches", "riches", 2, "HP"),
    ("poor", "pauvre", "pauvre", "pauvres", "pauvres", 2, "HP"),
    ("empty", "vide", "vide", "vides", "vides", 2, "OP"),
    ("clean", "propre", "propre", "propres", "propres", 2, "OP"),
    ("calm", "calme", "calme", "calmes", "calmes", 2, "HAP"),
    ("noisy", "bruyant", "bruyante", "bruyants", "bruyantes", 2, "HAP"),
    ("cold", "froid", "froide", "froids", "froides", 2, "OP"),
    ("hot", "chaud", "chaude", "chauds", "chaudes", 2, "O"),
    ("red", "rouge", "rouge", "rouges", "rouges", 3, "OP"),
    ("blue", "bleu", "bleue", "bleus", "bleues", 3, "OP"),
    ("green", "vert", "verte", "verts", "vertes", 3, "OP"),
    ("black", "noir", "noire", "noirs", "noires", 3, "AOP"),
    ("white", "blanc", "blanche", "blancs", "blanches", 3, "AOP"),
    ("yellow", "jaune", "jaune", "jaunes", "jaunes", 3, "OP"),
    ("grey", "gris", "grise", "gris", "grises", 3, "AOP"),
    ("pink", "rose", "rose", "roses", "roses", 3, "O"),
    ("European", "européen", "européenne", "européens", "européennes", 4, "HOP"),
    ("French", "français", "française", "français", "françaises", 4, "HOP"),
    ("English", "anglais", "anglaise", "anglais", "anglaises", 4, "HOP"),
    ("German", "allemand", "allemande", "allemands", "allemandes", 4, "HOP"),
    ("Italian", "italien", "italienne", "italiens", "italiennes", 4, "HOP"),
    ("Spanish", "espagnol", "espagnole", "espagnols", "espagnoles", 4, "HOP"),
    ("American", "américain", "américaine", "américains", "américaines", 4, "HOP"),
    ("African", "africain", "africaine", "africains", "africaines", 4, _ANY),
    ("economic", "économique", "économique", "économiques", "économiques", 5, "OP"),
    ("political", "politique", "politique", "politiques", "politiques", 5, "OP"),
    ("social", "social", "sociale", "sociaux", "sociales", 5, "OP"),
    ("public", "public", "publique", "publics", "publiques", 5, "OP"),
    ("national", "national", "nationale", "nationaux", "nationales", 5, "OP"),
    ("international", "international", "internationale", "internationaux",
     "internationales", 5, "OP"),
    ("local", "local", "locale", "locaux", "locales", 5, "HOP"),
    ("chemical", "chimique", "chimique", "chimiques", "chimiques", 5, "O"),
    ("medical", "médical", "médicale", "médicaux", "médicales", 5, "OP"),
    ("musical", "musical", "musicale", "musicaux", "musicales", 5, "O"),
    ("cultural", "culturel", "culturelle", "culturels", "culturelles", 5, "OP"),
)

# (English 3sg, English base = 3pl, French 3sg, French 3pl, subject categories,
#  complements).  A complement is (English preposition, French preposition,
# noun categories).  Where only English has a preposition ("looks at" ->
# "regarde") it is a particle aligned to the verb; where only French has one
# ("answers" -> "répond à") the French preposition is aligned to the verb.
# Multi-word French forms ("a besoin") are space-separated here and split.
_VERBS_DATA: tuple[tuple[str, str, str, str, str, tuple[Any, ...]], ...] = (
    ("sleeps", "sleep", "dort", "dorment", "HA", ()),
    ("runs", "run", "court", "courent", "HA", ()),
    ("laughs", "laugh", "rit", "rient", "H", ()),
    ("smiles", "smile", "sourit", "sourient", "H", ()),
    ("swims", "swim", "nage", "nagent", "HA", ()),
    ("walks", "walk", "marche", "marchent", "HA", ()),
    ("works", "work", "travaille", "travaillent", "H", ()),
    ("dances", "dance", "danse", "dansent", "H", ()),
    ("cries", "cry", "pleure", "pleurent", "HA", ()),
    ("arrives", "arrive", "arrive", "arrivent", "HA", ()),
    ("waits", "wait", "attend", "attendent", "HA", ()),
    ("falls", "fall", "tombe", "tombent", "HAO", ()),
    ("sees", "see", "voit", "voient", "HA", ((None, None, _ANY),)),
    ("reads", "read", "lit", "lisent", "H", ((None, None, "O"),)),
    ("writes", "write", "écrit", "écrivent", "H", ((None, None, "O"),)),
    ("eats", "eat", "mange", "mangent", "HA", ((None, None, "O"),)),
    ("buys", "buy", "achète", "achètent", "H", ((None, None, "OP"),)),
    ("sells", "sell", "vend", "vendent", "H", ((None, None, "OP"),)),
    ("takes", "take", "prend", "prennent", "HA", ((None, None, "O"),)),
    ("finds", "find", "trouve", "trouvent", "HA", ((None, None, _ANY),)),
    ("loves", "love", "aime", "aiment", "H", ((None, None, _ANY),)),
    ("carries", "carry", "porte", "portent", "HA", ((None, None, "HAO"),)),
    ("opens", "open", "ouvre", "ouvrent", "H", ((None, None, "OP"),)),
    ("closes", "close", "ferme", "ferment", "H", ((None, None, "OP"),)),
    ("builds", "build", "construit", "construisent", "H", ((None, None, "OP"),)),
    ("repairs", "repair", "répare", "réparent", "H", ((None, None, "O"),)),
    ("washes", "wash", "lave", "lavent", "H", ((None, None, "O"),)),
    ("visits", "visit", "visite", "visitent", "H", ((None, None, "HP"),)),
    ("leaves", "leave", "quitte", "quittent", "HA", ((None, None, "HP"),)),
    ("helps", "help", "aide", "aident", "HA", ((None, None, "HA"),)),
    ("follows", "follow", "suit", "suivent", "HA", ((None, None, "HA"),)),
    ("knows", "know", "connaît", "connaissent", "H", ((None, None, "HP"),)),
    ("understands", "understand", "comprend", "comprennent", "H", ((None, None, "HO"),)),
    ("meets", "meet", "rencontre", "rencontrent", "H", ((None, None, "H"),)),
    ("forgets", "forget", "oublie", "oublient", "H", ((None, None, "HO"),)),
    ("hears", "hear", "entend", "entendent", "HA", ((None, None, "HAO"),)),
    ("draws", "draw", "dessine", "dessinent", "H", ((None, None, _ANY),)),
    ("protects", "protect", "protège", "protègent", "HA", ((None, None, _ANY),)),
    ("describes", "describe", "décrit", "décrivent", "H", ((None, None, _ANY),)),
    ("watches", "watch", "regarde", "regardent", "HA", ((None, None, _ANY),)),
    ("needs", "need", "a besoin", "ont besoin", "HA", ((None, "de", "HAO"),)),
    ("looks", "look", "regarde", "regardent", "HA", (("at", None, _ANY),)),
    ("looks", "look", "cherche", "cherchent", "HA", (("for", None, _ANY),)),
    ("waits", "wait", "attend", "attendent", "HA", (("for", None, "HAO"),)),
    ("listens", "listen", "écoute", "écoutent", "HA", (("to", None, "HO"),)),
    ("lives", "live", "habite", "habitent", "HA", (("in", None, "P"),)),
    ("answers", "answer", "répond", "répondent", "H", ((None, "à", "H"),)),
    ("obeys", "obey", "obéit", "obéissent", "HA", ((None, "à", "H"),)),
    ("thinks", "think", "pense", "pensent", "H", (("about", "à", _ANY),)),
    ("talks", "talk", "parle", "parlent", "H", (("to", "à", "H"),)),
    ("talks", "talk", "parle", "parlent", "H", (("about", "de", _ANY),)),
    ("talks", "talk", "parle", "parlent", "H", (("to", "à", "H"), ("about", "de", _ANY))),
    ("goes", "go", "va", "vont", "HA", (("to", "à", "P"),)),
    ("comes", "come", "vient", "viennent", "HA", (("from", "de", "P"),)),
    ("belongs", "belong", "appartient", "appartiennent", "O", (("to", "à", "H"),)),
    ("gives", "give", "donne", "donnent", "H", ((None, None, "O"), ("to", "à", "HA"))),
    ("shows", "show", "montre", "montrent", "H", ((None, None, "O"), ("to", "à", "H"))),
    ("sends", "send", "envoie", "envoient", "H", ((None, None, "O"), ("to", "à", "H"))),
    ("explains", "explain", "explique", "expliquent", "H", ((None, None, "O"), ("to", "à", "H"))),
    ("brings", "bring", "apporte", "apportent", "HA", ((None, None, "O"), ("to", "à", "HA"))),
)

# (English tokens, French tokens, categories of the governed noun).
# Every English token of a preposition aligns to every French token of it.
_PREPOSITIONS: tuple[tuple[tuple[str, ...], tuple[str, ...], str], ...] = (
    (("in",), ("dans",), "OP"),
    (("on",), ("sur",), "OP"),
    (("with",), ("avec",), "HAO"),
    (("near",), ("près", "de"), _ANY),
    (("under",), ("sous",), "OP"),
    (("for",), ("pour",), "HA"),
    (("behind",), ("derrière",), _ANY),
    (("in", "front", "of"), ("devant",), _ANY),
    (("without",), ("sans",), "HAO"),
    (("towards",), ("vers",), "HAP"),
)
# Where something is; used after "is"/"are".
_LOCATIVE_PREPOSITIONS = tuple(p for p in _PREPOSITIONS if p[0][0] in
                               ("in", "on", "near", "under", "behind"))

# English before the verb, French after the (first word of the) verb.
_PRE_ADVERBS: tuple[tuple[str, str], ...] = (
    ("often", "souvent"), ("always", "toujours"), ("sometimes", "parfois"),
    ("rarely", "rarement"), ("also", "aussi"),
)
# Clause-final in both languages; equal-length pairs align word by word.
_POST_ADVERBS: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("quickly",), ("rapidement",)), (("slowly",), ("lentement",)),
    (("carefully",), ("soigneusement",)), (("here",), ("ici",)),
    (("now",), ("maintenant",)), (("again",), ("encore",)),
    (("every", "day"), ("chaque", "jour")), (("every", "morning"), ("chaque", "matin")),
)
# Subordinating conjunctions: English word, French words.
_SUBORDINATORS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("when", ("lorsque",)), ("because", ("parce", "que")), ("while", ("pendant", "que")),
)

# Determiner key -> (English sg, English pl, French m.sg, f.sg, pl); "" = no token.
_DETERMINERS: dict[str, tuple[str, str, str, str, str]] = {
    "the": ("the", "the", "le", "la", "les"),
    "a": ("a", "some", "un", "une", "des"),
    "this": ("this", "these", "ce", "cette", "ces"),
    "his": ("his", "his", "son", "sa", "ses"),
    "her": ("her", "her", "son", "sa", "ses"),
    "its": ("its", "its", "son", "sa", "ses"),
    "their": ("their", "their", "leur", "leur", "leurs"),
    "two": ("", "two", "", "", "deux"),
    "three": ("", "three", "", "", "trois"),
    "several": ("", "several", "", "", "plusieurs"),
    "every": ("every", "", "chaque", "chaque", ""),
    # English bare plural ("reads books"): French still needs "des", which is
    # aligned to the noun.
    "bare": ("", "", "", "", "des"),
}
# (cumulative probability, key).  Where an indefinite is not wanted (negated
# objects, "without") it is replaced by "the".
_SINGULAR_DETS = ((0.55, "the"), (0.63, "this"), (0.67, "his"), (0.71, "her"),
                  (0.715, "its"), (0.74, "their"), (0.78, "every"), (1.0, "a"))
_PLURAL_DETS = ((0.50, "the"), (0.60, "this"), (0.64, "his"), (0.67, "her"),
                (0.70, "their"), (0.75, "two"), (0.79, "three"), (0.84, "several"),
                (0.92, "a"), (1.0, "bare"))
_INDEFINITE = frozenset(("a", "bare"))


def _rank(adjective: tuple[Any, ...]) -> int:
    return adjective[5]


# ---------------------------------------------------------------- orthography
# French orthography is applied as tokens are emitted: every elision or
# contraction involves the first word of a noun phrase or of a verb, so the
# word that triggers it is always known at that point.
_FR_VOWEL_ONSET = frozenset("aeiouyhàâäéèêëîïôöùûüœæ")
# A determiner before a vowel-initial noun; decided before contraction, so
# "de" + "l'homme" stays "de l'homme" rather than becoming "du homme".
_FR_PRE_VOWEL = {"le": "l'", "la": "l'", "ce": "cet", "sa": "son"}
_FR_CONTRACTIONS = {("de", "le"): "du", ("de", "les"): "des", ("à", "le"): "au",
                    ("à", "les"): "aux", ("de", "des"): "de"}
# Elision after contraction, so that "de des hôpitaux" -> "d'hôpitaux".
_FR_ELISIONS = {"de": "d'", "que": "qu'", "ne": "n'", "lorsque": "lorsqu'"}
# Words after which the next phrase-initial word may contract or elide.
_FR_TRIGGERS = frozenset(("de", "à", *_FR_ELISIONS))

# English "a" -> "an" goes by sound, not spelling.
_EN_CONSONANT_SOUND = frozenset(("european", "useful", "university"))

ELISION_PREFIXES: tuple[str, ...] = ("l'", "d'", "qu'", "j'", "n'", "s'", "c'", "lorsqu'", "jusqu'")

_MAX_DEPTH = 4

# Target-length bands: (cumulative probability, low, high), inclusive.  The
# realised length tracks the target to within a few tokens, so about 40% of
# sentences exceed 30 tokens and about 15% exceed 50.
_LENGTH_BANDS: tuple[tuple[float, int, int], ...] = (
    (0.30, 4, 12), (0.60, 13, 30), (0.85, 31, 50), (1.0, 51, 95),
)


# --------------------------------------------------------------------------
# Derived tables (built once at import, in lexicon order, so deterministic)
# --------------------------------------------------------------------------
_Complement = tuple[str | None, str | None, str]


@dataclasses.dataclass(frozen=True, slots=True)
class _Verb:
    en_sg: str
    en_base: str
    fr_sg: tuple[str, ...]
    fr_pl: tuple[str, ...]
    subjects: str
    complements: tuple[_Complement, ...]
    particle: str | None      # English-only preposition right after the verb
    min_cost: int             # fewest English tokens of verb + complements
    prep_tokens: int          # English prepositions emitted by the complements


def _make_verb(row: tuple[Any, ...]) -> _Verb:
    en_sg, en_base, fr_sg, fr_pl, subjects, comps = row
    particle = comps[0][0] if comps and comps[0][0] and not comps[0][1] else None
    cost = 1 + sum(2 + (1 if ep else 0) for ep, _, _ in comps)
    preps = sum(1 for ep, fp, _ in comps if ep and fp)
    return _Verb(en_sg, en_base, tuple(fr_sg.split()), tuple(fr_pl.split()),
                 subjects, comps, particle, cost, preps)


_VERBS: tuple[_Verb, ...] = tuple(_make_verb(r) for r in _VERBS_DATA)
# Nouns with a 7th field: French vowel onset (elision before the noun).
_NOUN_ROWS = tuple(n + (n[2][0] in _FR_VOWEL_ONSET,) for n in _NOUNS)
_EN_AN = frozenset(w for w in [n[0] for n in _NOUNS] + [a[0] for a in _ADJECTIVES]
                   if w[0].lower() in "aeiou" and w.lower() not in _EN_CONSONANT_SOUND)
_CATEGORIES = tuple(_ANY)


def _index(items: Iterable[Any], key: Any) -> dict[str, tuple[Any, ...]]:
    return {c: tuple(x for x in items if key(x, c)) for c in _CATEGORIES}


_ADJS_BY_CAT = _index(_ADJECTIVES, lambda a, c: c in a[6])
_INTRANSITIVE = tuple(v for v in _VERBS if not v.complements)
_SUBJECT_VERBS = _index(_VERBS, lambda v, c: c in v.subjects)
_INTRANSITIVE_BY_SUBJECT = _index(_INTRANSITIVE, lambda v, c: c in v.subjects)
# Verbs whose first complement is a bare direct object can be gapped in an
# object relative clause ("the book that the man reads").
_GAP_VERBS = _index(_VERBS, lambda v, c: bool(v.complements)
                    and v.complements[0][0] is None and v.complements[0][1] is None
                    and c in v.complements[0][2])
# Noun pools for every category string the grammar asks for.
_NOUN_POOLS: dict[str, tuple[tuple[Any, ...], ...]] = {
    cats: tuple(n for n in _NOUN_ROWS if n[5] in cats)
    for cats in sorted({_ANY, *(v.subjects for v in _VERBS),
                        *(c[2] for v in _VERBS for c in v.complements),
                        *(p[2] for p in _PREPOSITIONS)})
}


def _quantize(table: Sequence[tuple[float, str]], steps: int = 1000) -> tuple[str, ...]:
    # A draw is then one multiply and one index, not a loop.
    out = []
    for k in range(steps):
        x = (k + 0.5) / steps
        out.append(next(key for cum, key in table if x < cum))
    return tuple(out)


_SINGULAR_DET_DRAW = _quantize(_SINGULAR_DETS)
_PLURAL_DET_DRAW = _quantize(_PLURAL_DETS)


def _randint(rng: random.Random, low: int, high: int) -> int:
    # random.randint is several times slower and this runs often per sentence.
    return low + int(rng.random() * (high - low + 1))


def _draw_target_length(rng: random.Random) -> int:
    u = rng.random()
    for cum, low, high in _LENGTH_BANDS:
        if u < cum:
            return _randint(rng, low, high)
    return _LENGTH_BANDS[-1][2]


# --------------------------------------------------------------------------
# Grammar
# --------------------------------------------------------------------------
class _Generator:
    """Emits one sentence: English tokens plus aligned French tokens.

    French is stored as parallel lists: ``fw`` (words), ``fs`` (for each word
    the English index it mainly translates) and ``fx`` (further
    (English, French) links for words with several sources).  Most words have
    one source, so this avoids a tuple per word and lets the alignment be
    built with ``zip`` at the end.

    Every phrase-building method takes a budget of English tokens and tries to
    use about that many; callers pass the leftover on, so a sentence ends up
    close to its drawn target length.  The code favours speed (local aliases,
    positional calls): the default corpus is ~7 noun phrases x 31,500
    sentences.
    """

    __slots__ = ("rng", "rand", "en", "fw", "fs", "fx")

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.rand = rng.random
        self.en: list[str] = []
        self.fw: list[str] = []
        self.fs: list[int] = []
        self.fx: list[tuple[int, int]] = []

    def fr_start(self, word: str, src: int) -> None:
        """Appends the first word of a phrase, contracting with or eliding the
        preposition/complementizer/negation before it."""
        fw = self.fw
        if fw:
            prev = fw[-1]
            merged = _FR_CONTRACTIONS.get((prev, word))
            if merged is not None:
                fw[-1] = merged
                self.fx.append((src, len(fw) - 1))
                return
            elided = _FR_ELISIONS.get(prev)
            if elided is not None and word[0] in _FR_VOWEL_ONSET:
                fw[-1] = elided
        fw.append(word)
        self.fs.append(src)

    def fr_multi(self, word: str, src: Sequence[int]) -> None:
        """Appends a French word translating several English tokens."""
        j = len(self.fw)
        self.fw.append(word)
        self.fs.append(src[0])
        for i in src[1:]:
            self.fx.append((i, j))

    # ------------------------------------------------------------ noun phrases
    def noun_core(self, noun: tuple[Any, ...], plural: bool, det: str,
                  adjectives: Sequence[tuple[Any, ...]]) -> int:
        """Determiner, adjectives and noun: English order, then French order.

        Returns the number of English tokens emitted.
        """
        en, fw, fs = self.en, self.fw, self.fs
        row = _DETERMINERS[det]
        if plural:
            det_en, det_fr, noun_en, noun_fr = row[1], row[4], noun[1], noun[3]
            form = 4 if noun[4] == "f" else 3  # index into an adjective row
        else:
            det_en, noun_en, noun_fr = row[0], noun[0], noun[2]
            if noun[4] == "f":
                det_fr, form = row[3], 2
            else:
                det_fr, form = row[2], 1
            if noun[6]:
                det_fr = _FR_PRE_VOWEL.get(det_fr, det_fr)
        d = len(en)
        if det_en:
            if det_en == "a" and (adjectives[0][0] if adjectives else noun_en) in _EN_AN:
                det_en = "an"
            en.append(det_en)
            first_adj = d + 1
        else:
            first_adj = d
        n = first_adj
        if adjectives:
            for adj in adjectives:
                en.append(adj[0])
            n += len(adjectives)
        en.append(noun_en)
        if fw and fw[-1] in _FR_TRIGGERS:
            self.fr_start(det_fr, d if det_en else n)
            # "de" is last only after "de des" -> "de": "d'hôpitaux".
            if noun[6] and fw[-1] == "de":
                fw[-1] = "d'"
        else:
            fw.append(det_fr)
            fs.append(d if det_en else n)
        fw.append(noun_fr)
        fs.append(n)
        if adjectives:
            for k in range(len(adjectives) - 1, -1, -1):
                fw.append(adjectives[k][form])
                fs.append(first_adj + k)
        return n + 1 - d

    def noun_phrase(self, budget: int, cats: str, depth: int, plural: bool | None = None,
                    bare_ok: bool = False, indef_ok: bool = True) -> tuple[bool, bool, str]:
        """Returns (feminine, plural, category) of the head, for agreement."""
        rand, en = self.rand, self.en
        pool = _NOUN_POOLS[cats]
        noun = pool[int(rand() * len(pool))]
        if plural is None:
            plural = rand() < 0.3
        det = (_PLURAL_DET_DRAW if plural else _SINGULAR_DET_DRAW)[int(rand() * 1000)]
        if det in _INDEFINITE and (not indef_ok or det == "bare" and not bare_ok):
            det = "the"
        spare = budget - (1 if det == "bare" else 2)
        adjectives: Sequence[tuple[Any, ...]] = ()
        if spare > 0:
            r = rand()
            if r >= 0.62:
                adjectives = []
                count = 1 if r < 0.89 else 2 if r < 0.98 else 3
                pool_a = _ADJS_BY_CAT[noun[5]]
                ranks = []
                for _ in range(min(count, spare)):
                    adj = pool_a[int(rand() * len(pool_a))]
                    # One adjective per rank avoids "French German" and
                    # duplicates, and keeps the English order well defined.
                    if adj[5] not in ranks:
                        ranks.append(adj[5])
                        adjectives.append(adj)
                if len(adjectives) > 1:
                    adjectives.sort(key=_rank)
        spare = budget - self.noun_core(noun, plural, det, adjectives)
        fem, cat = noun[4] == "f", noun[5]
        mods = 0
        while spare >= 3 and depth < _MAX_DEPTH and mods < 2:
            sub = spare if mods == 1 or spare < 8 else 3 + int(rand() * (spare - 2))
            before = len(en)
            r = rand()
            if r < 0.3:
                self.prepositional_phrase(sub, depth + 1, _PREPOSITIONS)
            elif r < 0.5 and cat != "A":
                self.genitive(sub, depth + 1)
            else:
                self.relative_clause(fem, plural, cat, sub, depth + 1)
                # A second modifier after a relative clause would attach
                # ambiguously; stop here.
                break
            spare -= len(en) - before
            mods += 1
        return fem, plural, cat

    def prepositional_phrase(self, budget: int, depth: int,
                             preps: Sequence[tuple[tuple[str, ...], tuple[str, ...], str]]) -> None:
        prep = preps[int(self.rand() * len(preps))]
        en_words = prep[0]
        if len(en_words) + 2 > budget:
            prep = preps[0]
            en_words = prep[0]
        self.emit_fixed(en_words, prep[1], pairwise=False)
        # "sans des livres" is wrong French; keep "without" definite.
        self.noun_phrase(budget - len(en_words), prep[2], depth, None, False,
                         en_words[0] != "without")

    def genitive(self, budget: int, depth: int) -> None:
        self.fs.append(len(self.en))
        self.en.append("of")
        self.fw.append("de")
        self.noun_phrase(budget - 1, _ANY, depth)

    def relative_clause(self, fem: bool, plural: bool, cat: str, budget: int,
                        depth: int) -> None:
        rand, en, fw, fs = self.rand, self.en, self.fw, self.fs
        r = rand()
        subject_verbs = _SUBJECT_VERBS[cat]
        gap_verbs = _GAP_VERBS[cat]
        fs.append(len(en))
        if r < 0.45 and subject_verbs:
            verb = subject_verbs[int(rand() * len(subject_verbs))]
            if verb.min_cost + 1 > budget:
                pool = _INTRANSITIVE_BY_SUBJECT[cat]
                verb = pool[int(rand() * len(pool))]
            en.append(("who" if rand() < 0.6 else "that") if cat == "H"
                      else ("which" if rand() < 0.5 else "that"))
            fw.append("qui")
            self.verb_group(verb, plural, budget - 1, depth)
        elif r < 0.8 and gap_verbs and budget >= 4:
            verb = gap_verbs[int(rand() * len(gap_verbs))]
            en.append(("whom" if rand() < 0.2 else "that") if cat == "H"
                      else ("which" if rand() < 0.5 else "that"))
            fw.append("que")
            rest = budget - 1 - (verb.min_cost - 2)
            sub_budget = 2 + (int(rand() * (rest - 1)) if rest > 2 else 0) // 2
            start = len(en)
            sub_plural = self.noun_phrase(sub_budget, verb.subjects, depth + 1)[1]
            self.verb_group(verb, sub_plural, budget - 1 - (len(en) - start), depth, True)
        else:
            en.append("who" if cat == "H" else ("which" if rand() < 0.5 else "that"))
            fw.append("qui")
            self.predicate(fem, plural, cat, budget - 1, depth)

    # ---------------------------------------------------------------- clauses
    def verb_group(self, verb: _Verb, plural: bool, budget: int, depth: int,
                   gap: bool = False) -> None:
        rand, en, fw, fs = self.rand, self.en, self.fw, self.fs
        start = len(en)
        # 0 plain, 1 "does not", 2 "never", 3 preverbal adverb.
        slack = budget - verb.min_cost
        r = rand()
        mode = 0
        if r < 0.19 and slack >= 3:
            mode = 1 if r < 0.08 and slack >= 4 else 2 if r < 0.11 else 3
        neg = adv = -1
        extra_src: tuple[int, ...] = ()
        if mode == 0:
            v = start
            en.append(verb.en_base if plural else verb.en_sg)
        elif mode == 1:
            en.append("do" if plural else "does")
            en.append("not")
            en.append(verb.en_base)
            neg, v = start + 1, start + 2
            extra_src = (start,)
        else:
            if mode == 2:
                en.append("never")
                neg = start
            else:
                adverb = _PRE_ADVERBS[int(rand() * len(_PRE_ADVERBS))]
                en.append(adverb[0])
                adv = start
            v = start + 1
            en.append(verb.en_base if plural else verb.en_sg)
        if verb.particle and not gap:
            extra_src += (len(en),)
            en.append(verb.particle)
        fr_forms = verb.fr_pl if plural else verb.fr_sg
        if neg >= 0:
            fw.append("ne")
            fs.append(neg)
            self.fr_start(fr_forms[0], v)
        else:
            fw.append(fr_forms[0])
            fs.append(v)
        if extra_src:
            j = len(fw) - 1
            for i in extra_src:
                self.fx.append((i, j))
        if neg >= 0:
            fw.append("pas" if mode == 1 else "jamais")
            fs.append(neg)
        elif adv >= 0:
            fw.append(adverb[1])
            fs.append(adv)
        if len(fr_forms) > 1:
            for w in fr_forms[1:]:
                self.fr_multi(w, (v, *extra_src))

        comps = verb.complements
        if gap:
            comps = comps[1:]
        extra = budget - (len(en) - start) - verb.prep_tokens - 2 * len(comps)
        adjunct = 0
        if extra >= 3 and (not comps or rand() < 0.3):
            adjunct = extra if not comps else 3 + int(rand() * (extra - 2))
            extra -= adjunct
        # Direct objects of a negated verb take "de" in French ("ne lit pas de
        # livre"); keeping them definite sidesteps that rule.
        indef_ok = mode == 0 or mode == 3
        last = len(comps) - 1
        for k, (ep, fp, cats) in enumerate(comps):
            if fp:
                if ep:
                    fs.append(len(en))
                    en.append(ep)
                    fw.append(fp)
                else:
                    self.fr_multi(fp, (v, *extra_src))
                share = extra if k == last else int(rand() * (extra + 1)) if extra > 0 else 0
                before = len(en)
                self.noun_phrase(2 + share, cats, depth + 1)
            else:
                share = extra if k == last else int(rand() * (extra + 1)) if extra > 0 else 0
                before = len(en)
                self.noun_phrase(2 + share, cats, depth + 1, None,
                                 indef_ok and not ep, indef_ok)
            extra -= len(en) - before - 2
        left = budget - (len(en) - start)
        if left >= 1 and rand() < 0.12:
            adv_en, adv_fr = _POST_ADVERBS[int(rand() * len(_POST_ADVERBS))]
            self.emit_fixed(adv_en, adv_fr)
            left -= len(adv_en)
        if left >= 3 and depth < _MAX_DEPTH and (adjunct or rand() < 0.5):
            self.prepositional_phrase(left, depth + 1, _PREPOSITIONS)

    def emit_fixed(self, en_words: Sequence[str], fr_words: Sequence[str],
                   pairwise: bool = True) -> None:
        """A fixed expression.  Equal-length ones align word by word when
        ``pairwise``; otherwise every English word aligns to every French one."""
        en, fw, fs = self.en, self.fw, self.fs
        base = len(en)
        en.extend(en_words)
        if len(en_words) == 1 or pairwise and len(en_words) == len(fr_words):
            for k, w in enumerate(fr_words):
                fw.append(w)
                fs.append(base if len(en_words) == 1 else base + k)
        else:
            idx = tuple(range(base, base + len(en_words)))
            for w in fr_words:
                self.fr_multi(w, idx)

    def predicate(self, fem: bool, plural: bool, cat: str, budget: int, depth: int) -> None:
        """Copula: "is/are ADJ [and ADJ]" agreeing with the subject, or "is/are PP"."""
        rand, en, fw, fs = self.rand, self.en, self.fw, self.fs
        start = v = len(en)
        en.append("are" if plural else "is")
        r = rand()
        if r < 0.11 and budget >= 4:
            en.append("not" if r < 0.08 else "never")
            fw.append("ne")
            fs.append(v + 1)
            self.fr_start("sont" if plural else "est", v)
            fw.append("pas" if r < 0.08 else "jamais")
            fs.append(v + 1)
        else:
            fw.append("sont" if plural else "est")
            fs.append(v)
            if r < 0.19 and budget >= 4:
                adv_en, adv_fr = _PRE_ADVERBS[int(rand() * len(_PRE_ADVERBS))]
                fs.append(len(en))
                en.append(adv_en)
                fw.append(adv_fr)
        left = budget - (len(en) - start)
        if left >= 3 and depth < _MAX_DEPTH and rand() < 0.35:
            self.prepositional_phrase(left, depth + 1, _LOCATIVE_PREPOSITIONS)
            return
        pool = _ADJS_BY_CAT[cat]
        form = (3 if plural else 1) + (1 if fem else 0)
        first = pool[int(rand() * len(pool))]
        a = len(en)
        en.append(first[0])
        fw.append(first[form])
        fs.append(a)
        if left >= 3 and rand() < 0.25:
            second = pool[int(rand() * len(pool))]
            if second is not first:
                en.append("and")
                en.append(second[0])
                fw.append("et")
                fw.append(second[form])
                fs.append(a + 1)
                fs.append(a + 2)

    def clause(self, budget: int, depth: int) -> None:
        rand, en = self.rand, self.en
        start = len(en)
        if budget >= 3 and rand() < 0.14:
            extra = budget - 3
            sb = 2 + (int(rand() * (extra + 1)) if extra > 0 and rand() < 0.5 else 0)
            fem, plural, cat = self.noun_phrase(sb, _ANY, depth)
            self.predicate(fem, plural, cat, budget - (len(en) - start), depth)
            return
        verb = _VERBS[int(rand() * len(_VERBS))]
        if verb.min_cost + 2 > budget:
            verb = _INTRANSITIVE[int(rand() * len(_INTRANSITIVE))]
        extra = budget - verb.min_cost - 2
        if extra >= 5 and rand() < 0.07:
            # Coordinated subject: French verb goes plural, and masculine
            # unless both conjuncts are feminine.
            half = int(rand() * ((extra - 1) // 2 + 1))
            self.noun_phrase(2 + half // 2, verb.subjects, depth + 1)
            self.fs.append(len(en))
            en.append("and")
            self.fw.append("et")
            self.noun_phrase(2 + half - half // 2, verb.subjects, depth + 1)
            plural = True
        else:
            if extra > 0 and rand() < 0.35:
                share = int(rand() * (extra + 1))
            else:
                share = int(rand() * (extra // 3 + 1)) if extra >= 3 else 0
            plural = self.noun_phrase(2 + share, verb.subjects, depth)[1]
        self.verb_group(verb, plural, budget - (len(en) - start), depth)

    def sentence(self, target: int) -> None:
        rng, rand, en, fw, fs = self.rng, self.rand, self.en, self.fw, self.fs
        limit = target - 1  # the final "."
        if limit >= 14 and rand() < 0.12:
            word, fr_words = _SUBORDINATORS[int(rand() * len(_SUBORDINATORS))]
            self.emit_fixed((word,), fr_words)
            self.clause(_randint(rng, 3, min(15, limit - 10)), 1)
            fs.append(len(en))
            en.append(",")
            fw.append(",")
        left = limit - len(en)
        self.clause(left if left <= 30 else _randint(rng, 12, 30), 0)
        while True:
            left = limit - len(en)
            if left < 5:
                break
            r = rand()
            if r < 0.55:
                c = len(en)
                en.append(",")
                en.append("and" if r < 0.4 else "but")
                fw.append(",")
                fw.append("et" if r < 0.4 else "mais")
                fs.append(c)
                fs.append(c + 1)
            else:
                word, fr_words = _SUBORDINATORS[int(rand() * len(_SUBORDINATORS))]
                self.emit_fixed((word,), fr_words)
            left = limit - len(en)
            self.clause(left if left <= 32 else _randint(rng, 10, 30), 1)
        fs.append(len(en))
        en.append(".")
        fw.append(".")

    def finish(self, capitalize: bool) -> SentencePair:
        en, fw = self.en, self.fw
        if capitalize and en:
            en[0] = en[0][:1].upper() + en[0][1:]
            fw[0] = fw[0][:1].upper() + fw[0][1:]
        links = list(zip(self.fs, range(len(fw))))
        if self.fx:
            links += self.fx
        links.sort()
        return SentencePair(tuple(en), tuple(fw), tuple(links))


# --------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class BuiltinCorpusSpec:
    """What to generate; equal specs give byte-identical corpora."""

    seed: int = 1234
    train_size: int = 30000
    valid_size: int = 500
    test_size: int = 1000
    # Longer drawn target lengths are clamped; a sentence that still exceeds
    # it is redrawn.
    max_source_tokens: int = 100

    def __post_init__(self) -> None:
        for name in ("train_size", "valid_size", "test_size"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.max_source_tokens < 8:
            raise ValueError(f"max_source_tokens must be >= 8, got {self.max_source_tokens}")


@dataclasses.dataclass(frozen=True)
class SentencePair:
    """One English sentence, its French translation and their word alignment."""

    source: tuple[str, ...]
    target: tuple[str, ...]
    # Sorted (source index, target index) pairs; every token of both sides
    # occurs in at least one link.
    alignment: tuple[tuple[int, int], ...]

    def pharaoh(self) -> str:
        """The alignment as one line of space-separated ``i-j`` items."""
        return " ".join(map(_LINK_TEXT.__getitem__, self.alignment))


class _LinkCache(dict):  # type: ignore[type-arg]
    # Formatting ~1M links per corpus is a noticeable share of write time;
    # there are only a few thousand distinct (i, j) pairs.
    def __missing__(self, key: tuple[int, int]) -> str:
        text = self[key] = f"{key[0]}-{key[1]}"
        return text


_LINK_TEXT = _LinkCache()


def generate_pair(rng: random.Random, target_length: int | None = None, *,
                  max_source_tokens: int | None = None) -> SentencePair:
    """One sentence pair; its source length lands within a few tokens of
    ``target_length`` (drawn from the built-in length distribution if None).
    """
    if target_length is None:
        target_length = _draw_target_length(rng)
    if max_source_tokens is not None:
        # Leave room for the small overshoot of the budgeted grammar.
        target_length = min(target_length, max_source_tokens - 4)
    gen = _Generator(rng)
    gen.sentence(max(4, target_length))
    return gen.finish(capitalize=True)


def _noun_phrase_pair(det: str, noun: str, adjectives: Sequence[str] = (),
                      plural: bool = False, prep: str | None = None) -> SentencePair:
    """A single noun phrase, for tests and inspection.

    ``det`` is an English determiner ("the", "a", "some", "this", "these",
    "his", "their", "two", "every", ...; "" for a bare plural), ``noun`` an
    English singular noun, ``adjectives`` English adjectives in the order
    given, ``prep`` an optional English preposition ("of", "to", "from",
    "near", "in front of", ...).  No capitalization, no final period.
    """
    det_keys = {"the": ("the", None), "a": ("a", False), "an": ("a", False),
                "some": ("a", True), "this": ("this", False), "these": ("this", True),
                "his": ("his", None), "her": ("her", None), "its": ("its", None),
                "their": ("their", None), "two": ("two", True), "three": ("three", True),
                "several": ("several", True), "every": ("every", False), "": ("bare", True)}
    key, forced = det_keys[det]
    if forced is not None:
        plural = forced
    nouns = {n[0]: n for n in _NOUN_ROWS}
    adjs = {a[0].lower(): a for a in _ADJECTIVES}
    gen = _Generator(random.Random(0))
    if prep is not None:
        words = tuple(prep.split())
        simple = {("of",): ("de",), ("to",): ("à",), ("from",): ("de",), ("about",): ("de",)}
        fr_words = simple.get(words) or next(p[1] for p in _PREPOSITIONS if p[0] == words)
        gen.emit_fixed(words, fr_words, pairwise=False)
    gen.noun_core(nouns[noun], plural, key, [adjs[a.lower()] for a in adjectives])
    return gen.finish(capitalize=False)


def generate_corpus(spec: BuiltinCorpusSpec) -> dict[str, list[SentencePair]]:
    """Train/valid/test pairs for ``spec``; no sentence occurs twice anywhere.

    Test is drawn first, then valid, then train, each from its own seeded
    stream, so changing ``train_size`` leaves the evaluation splits unchanged.
    A pair is rejected if its source or its target was seen before, in any
    split, which also removes duplicates within a split.
    """
    seen_src: set[tuple[str, ...]] = set()
    seen_tgt: set[tuple[str, ...]] = set()
    result: dict[str, list[SentencePair]] = {}
    for split in ("test", "valid", "train"):
        size = getattr(spec, f"{split}_size")
        # A string seed is hashed with SHA-512 by random.Random, so the stream
        # is the same in every process (unlike hash()).
        rng = random.Random(f"keras-nmt-builtin/{GENERATOR_VERSION}/{spec.seed}/{split}")
        pairs: list[SentencePair] = []
        attempts, max_attempts = 0, 20 * size + 1000
        while len(pairs) < size:
            attempts += 1
            if attempts > max_attempts:
                raise RuntimeError(f"could not draw {size} distinct pairs for {split!r}")
            pair = generate_pair(rng, max_source_tokens=spec.max_source_tokens)
            if len(pair.source) > spec.max_source_tokens:
                continue
            if pair.source in seen_src or pair.target in seen_tgt:
                continue
            seen_src.add(pair.source)
            seen_tgt.add(pair.target)
            pairs.append(pair)
        result[split] = pairs
    return {split: result[split] for split in SPLITS}


def corpus_stats(corpus: dict[str, list[SentencePair]]) -> dict[str, Any]:
    """Pairs, lengths and vocabulary sizes, as stored in builtin.json."""
    stats: dict[str, Any] = {}
    src_vocab: set[str] = set()
    tgt_vocab: set[str] = set()
    for split, pairs in corpus.items():
        src_lens = [len(p.source) for p in pairs]
        tgt_lens = [len(p.target) for p in pairs]
        count = max(len(pairs), 1)  # empty splits report zeros
        stats[split] = {
            "pairs": len(pairs),
            "mean_source_tokens": round(sum(src_lens) / count, 2),
            "max_source_tokens": max(src_lens, default=0),
            "mean_target_tokens": round(sum(tgt_lens) / count, 2),
            "max_target_tokens": max(tgt_lens, default=0),
            "share_source_over_30": round(sum(n > 30 for n in src_lens) / count, 4),
            "share_source_over_50": round(sum(n > 50 for n in src_lens) / count, 4),
        }
        for p in pairs:
            src_vocab.update(p.source)
            tgt_vocab.update(p.target)
    stats["source_vocabulary"] = len(src_vocab)
    stats["target_vocabulary"] = len(tgt_vocab)
    return stats


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


def _write_text(path: pathlib.Path, lines: Iterable[str]) -> int:
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    return len(data)


def write_corpus(directory: str | os.PathLike[str],
                 spec: BuiltinCorpusSpec = BuiltinCorpusSpec()) -> pathlib.Path:
    """Writes the corpus for ``spec`` into ``directory`` unless already there.

    Files: ``{train,valid,test}.{en,fr,align}`` (UTF-8, LF, one sentence or
    Pharaoh alignment per line) and ``builtin.json`` (spec, stats, file sizes).
    Everything is written to a temporary sibling directory first.  A missing
    target directory is created by renaming that directory into place; an
    existing one (which may hold unrelated files) has its metadata removed
    first and rewritten last, so a crash in between leaves no builtin.json
    and the next call regenerates.  Leftover temporary directories from
    crashed runs have unique names and are ignored.
    """
    directory = pathlib.Path(directory)
    if _is_complete(directory, spec):
        return directory
    corpus = generate_corpus(spec)
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=f".{directory.name}.tmp-", dir=directory.parent))
    try:
        sizes: dict[str, int] = {}
        for split, pairs in corpus.items():
            sizes[f"{split}.{SOURCE_LANG}"] = _write_text(
                tmp / f"{split}.{SOURCE_LANG}", (detokenize(p.source, SOURCE_LANG) for p in pairs))
            sizes[f"{split}.{TARGET_LANG}"] = _write_text(
                tmp / f"{split}.{TARGET_LANG}", (detokenize(p.target, TARGET_LANG) for p in pairs))
            sizes[f"{split}.align"] = _write_text(
                tmp / f"{split}.align", (p.pharaoh() for p in pairs))
        meta = {
            "format": _FORMAT_VERSION,
            "generator_version": GENERATOR_VERSION,
            "source_lang": SOURCE_LANG,
            "target_lang": TARGET_LANG,
            "spec": dataclasses.asdict(spec),
            "stats": corpus_stats(corpus),
            "files": sizes,
        }
        _write_text(tmp / METADATA_FILE, [json.dumps(meta, indent=2, sort_keys=True)])
        if not directory.exists():
            try:
                os.rename(tmp, directory)
                return directory
            except OSError:
                # Another process created it meanwhile; fine if it wrote the same.
                if _is_complete(directory, spec):
                    return directory
        (directory / METADATA_FILE).unlink(missing_ok=True)
        for name in CORPUS_FILES:
            os.replace(tmp / name, directory / name)
        os.replace(tmp / METADATA_FILE, directory / METADATA_FILE)
        return directory
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
