"""The built-in corpus's dictionary: English and French nouns, adjectives, verbs, prepositions,
adverbs and determiners, and the tables the grammar draws from, derived from them.

The derived tables are built once at import, in lexicon order, so that every draw is
the same on every machine and in every process.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

from keras_nmt.corpus.builtin.orthography import EN_CONSONANT_SOUND, FR_VOWEL_ONSET

SOURCE_LANG = "en"
TARGET_LANG = "fr"

# Noun categories restrict which verbs and adjectives combine with a noun so
# that most sentences are at least plausible: H human, A animal,
# O object/abstract, P place.
ANY = "HAOP"

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
ADJECTIVES: tuple[tuple[str, str, str, str, str, int, str], ...] = (
    ("important", "important", "importante", "importants", "importantes", 0, "HOP"),
    ("interesting", "intéressant", "intéressante", "intéressants", "intéressantes", 0, ANY),
    ("difficult", "difficile", "difficile", "difficiles", "difficiles", 0, "HO"),
    ("easy", "facile", "facile", "faciles", "faciles", 0, "O"),
    ("famous", "célèbre", "célèbre", "célèbres", "célèbres", 0, ANY),
    ("strange", "étrange", "étrange", "étranges", "étranges", 0, ANY),
    ("dangerous", "dangereux", "dangereuse", "dangereux", "dangereuses", 0, ANY),
    ("beautiful", "magnifique", "magnifique", "magnifiques", "magnifiques", 0, ANY),
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
    ("African", "africain", "africaine", "africains", "africaines", 4, ANY),
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
    ("sees", "see", "voit", "voient", "HA", ((None, None, ANY),)),
    ("reads", "read", "lit", "lisent", "H", ((None, None, "O"),)),
    ("writes", "write", "écrit", "écrivent", "H", ((None, None, "O"),)),
    ("eats", "eat", "mange", "mangent", "HA", ((None, None, "O"),)),
    ("buys", "buy", "achète", "achètent", "H", ((None, None, "OP"),)),
    ("sells", "sell", "vend", "vendent", "H", ((None, None, "OP"),)),
    ("takes", "take", "prend", "prennent", "HA", ((None, None, "O"),)),
    ("finds", "find", "trouve", "trouvent", "HA", ((None, None, ANY),)),
    ("loves", "love", "aime", "aiment", "H", ((None, None, ANY),)),
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
    ("draws", "draw", "dessine", "dessinent", "H", ((None, None, ANY),)),
    ("protects", "protect", "protège", "protègent", "HA", ((None, None, ANY),)),
    ("describes", "describe", "décrit", "décrivent", "H", ((None, None, ANY),)),
    ("watches", "watch", "regarde", "regardent", "HA", ((None, None, ANY),)),
    ("needs", "need", "a besoin", "ont besoin", "HA", ((None, "de", "HAO"),)),
    ("looks", "look", "regarde", "regardent", "HA", (("at", None, ANY),)),
    ("looks", "look", "cherche", "cherchent", "HA", (("for", None, ANY),)),
    ("waits", "wait", "attend", "attendent", "HA", (("for", None, "HAO"),)),
    ("listens", "listen", "écoute", "écoutent", "HA", (("to", None, "HO"),)),
    ("lives", "live", "habite", "habitent", "HA", (("in", None, "P"),)),
    ("answers", "answer", "répond", "répondent", "H", ((None, "à", "H"),)),
    ("obeys", "obey", "obéit", "obéissent", "HA", ((None, "à", "H"),)),
    ("thinks", "think", "pense", "pensent", "H", (("about", "à", ANY),)),
    ("talks", "talk", "parle", "parlent", "H", (("to", "à", "H"),)),
    ("talks", "talk", "parle", "parlent", "H", (("about", "de", ANY),)),
    ("talks", "talk", "parle", "parlent", "H", (("to", "à", "H"), ("about", "de", ANY))),
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
PREPOSITIONS: tuple[tuple[tuple[str, ...], tuple[str, ...], str], ...] = (
    (("in",), ("dans",), "OP"),
    (("on",), ("sur",), "OP"),
    (("with",), ("avec",), "HAO"),
    (("near",), ("près", "de"), ANY),
    (("under",), ("sous",), "OP"),
    (("for",), ("pour",), "HA"),
    (("behind",), ("derrière",), ANY),
    (("in", "front", "of"), ("devant",), ANY),
    (("without",), ("sans",), "HAO"),
    (("towards",), ("vers",), "HAP"),
)
# Where something is; used after "is"/"are".
LOCATIVE_PREPOSITIONS = tuple(p for p in PREPOSITIONS if p[0][0] in
                              ("in", "on", "near", "under", "behind"))

# English before the verb, French after the (first word of the) verb.
PRE_ADVERBS: tuple[tuple[str, str], ...] = (
    ("often", "souvent"), ("always", "toujours"), ("sometimes", "parfois"),
    ("rarely", "rarement"), ("also", "aussi"),
)
# Clause-final in both languages; equal-length pairs align word by word.
POST_ADVERBS: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("quickly",), ("rapidement",)), (("slowly",), ("lentement",)),
    (("carefully",), ("soigneusement",)), (("here",), ("ici",)),
    (("now",), ("maintenant",)), (("again",), ("encore",)),
    (("every", "day"), ("chaque", "jour")), (("every", "morning"), ("chaque", "matin")),
)
# Subordinating conjunctions: English word, French words.
SUBORDINATORS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("when", ("lorsque",)), ("because", ("parce", "que")), ("while", ("pendant", "que")),
)

# Determiner key -> (English sg, English pl, French m.sg, f.sg, pl); "" = no token.
DETERMINERS: dict[str, tuple[str, str, str, str, str]] = {
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
INDEFINITE = frozenset(("a", "bare"))


def rank(adjective: tuple[Any, ...]) -> int:
    return adjective[5]


# ---------------------------------------------------------------- derived tables
_Complement = tuple[str | None, str | None, str]


@dataclasses.dataclass(frozen=True, slots=True)
class Verb:
    en_sg: str
    en_base: str
    fr_sg: tuple[str, ...]
    fr_pl: tuple[str, ...]
    subjects: str
    complements: tuple[_Complement, ...]
    particle: str | None      # English-only preposition right after the verb
    min_cost: int             # fewest English tokens of verb + complements
    prep_tokens: int          # English prepositions emitted by the complements


def _make_verb(row: tuple[Any, ...]) -> Verb:
    en_sg, en_base, fr_sg, fr_pl, subjects, comps = row
    particle = comps[0][0] if comps and comps[0][0] and not comps[0][1] else None
    cost = 1 + sum(2 + (1 if ep else 0) for ep, _, _ in comps)
    preps = sum(1 for ep, fp, _ in comps if ep and fp)
    return Verb(en_sg, en_base, tuple(fr_sg.split()), tuple(fr_pl.split()),
                subjects, comps, particle, cost, preps)


VERBS: tuple[Verb, ...] = tuple(_make_verb(r) for r in _VERBS_DATA)
# Nouns with a 7th field: French vowel onset (elision before the noun).
NOUN_ROWS = tuple(n + (n[2][0] in FR_VOWEL_ONSET,) for n in _NOUNS)
EN_AN = frozenset(w for w in [n[0] for n in _NOUNS] + [a[0] for a in ADJECTIVES]
                  if w[0].lower() in "aeiou" and w.lower() not in EN_CONSONANT_SOUND)
_CATEGORIES = tuple(ANY)


def _index(items: Iterable[Any], key: Any) -> dict[str, tuple[Any, ...]]:
    return {c: tuple(x for x in items if key(x, c)) for c in _CATEGORIES}


ADJS_BY_CAT = _index(ADJECTIVES, lambda a, c: c in a[6])
INTRANSITIVE = tuple(v for v in VERBS if not v.complements)
SUBJECT_VERBS = _index(VERBS, lambda v, c: c in v.subjects)
INTRANSITIVE_BY_SUBJECT = _index(INTRANSITIVE, lambda v, c: c in v.subjects)
# Verbs whose first complement is a bare direct object can be gapped in an
# object relative clause ("the book that the man reads").
GAP_VERBS = _index(VERBS, lambda v, c: bool(v.complements)
                   and v.complements[0][0] is None and v.complements[0][1] is None
                   and c in v.complements[0][2])
# Noun pools for every category string the grammar asks for.
NOUN_POOLS: dict[str, tuple[tuple[Any, ...], ...]] = {
    cats: tuple(n for n in NOUN_ROWS if n[5] in cats)
    for cats in sorted({ANY, *(v.subjects for v in VERBS),
                        *(c[2] for v in VERBS for c in v.complements),
                        *(p[2] for p in PREPOSITIONS)})
}


def _quantize(table: Sequence[tuple[float, str]], steps: int = 1000) -> tuple[str, ...]:
    # A draw is then one multiply and one index, not a loop.
    out = []
    for k in range(steps):
        x = (k + 0.5) / steps
        out.append(next(key for cum, key in table if x < cum))
    return tuple(out)


SINGULAR_DET_DRAW = _quantize(_SINGULAR_DETS)
PLURAL_DET_DRAW = _quantize(_PLURAL_DETS)

