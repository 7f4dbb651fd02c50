"""A request's body read and checked: ``POST /translate``'s JSON and TF Serving's predict,
each turned into the batch key of its search (:class:`Search`) and its
:class:`~keras_nmt.serving.work_plan.WorkPlan`, or refused with a one-line 400.

Nothing here is queued or decoded. Cost: linear in the body's size (parsing), then what
:func:`keras_nmt.serving.work_plan.plan` costs.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Sequence

from keras_nmt.core.errors import MarkupError
from keras_nmt.decoding.constraints import Glossary, LineConstraints
from keras_nmt.decoding.marked_up import marked_up, parse_lines
from keras_nmt.decoding.translation import Translation
from keras_nmt.text.markup import KINDS, Markup
from keras_nmt.serving import rest_formats as rest
from keras_nmt.serving.options import ServerOptions
from keras_nmt.serving.registry import Registry, Servable
from keras_nmt.serving.work_plan import Asked, WorkPlan, check_chars, plan

MAX_ALPHA = 10.0  # length normalisation exponents beyond this only overflow
TRANSLATE_KEYS = {"text", "model", "version", "beam", "alpha", "nbest", "no_unk", "alignment",
                  "confidence", "split_sentences", *rest.CONSTRAINT_INPUTS, "glossary",
                  "markup"}
# Terms of a request's glossary, at most: each is looked for in every line.
MAX_GLOSSARY_TERMS = 64


@dataclasses.dataclass(frozen=True)
class Search:
    """What one batch shares: the model and the search settings of its rows."""

    servable: Servable
    beam: int
    alpha: float
    forbid_unk: bool = False
    align: bool = False  # also force-decode each best hypothesis (its attention matrix)
    confidence: bool = False  # also its confidence (the search's log-probabilities)


@dataclasses.dataclass(frozen=True)
class Call:
    """A request read and checked: its search, its lines and their plan."""

    search: Search
    nbest: int
    lines: Sequence[str]
    rules: Sequence[LineConstraints | None] | None
    work: WorkPlan
    predict: rest.PredictCall | None = None  # TF Serving's call, for its answer's form
    # "markup": each line's tags, put back in its translation (keras_nmt.decoding.marked_up)
    markup: Sequence[Markup] | None = None
    show_alignment: bool = False  # the answer holds the alignments (asked for)

    def marked_up(self, lines: list[Translation]) -> list[Translation]:
        """``lines`` with their tags placed, when the request had markup."""
        if self.markup is None:
            return lines
        return [dataclasses.replace(line, text=marked_up(found, line).text)
                for found, line in zip(self.markup, lines, strict=True)]


def read_translate(body, registry: Registry, limits: ServerOptions) -> Call:
    """``POST /translate``'s body (parsed JSON) as a :class:`Call`."""
    if not isinstance(body, dict):
        raise rest.bad("the request body must be a JSON object with 'text'")
    unknown = sorted(set(body) - TRANSLATE_KEYS)
    if unknown:
        raise rest.bad(f"unknown key {unknown[0]!r} (known: {', '.join(sorted(TRANSLATE_KEYS))})")
    if "text" not in body:
        raise rest.bad("the request needs 'text', a list of sentences")
    lines = rest.sentences_value(body["text"], "text")
    if body.get("markup") is not None:
        check_chars(lines, limits)  # the markup as sent, before it is parsed
    markup = _markup(body.get("markup"), lines)
    if markup is not None:
        lines = [found.text for found in markup]  # the model never sees a tag
    servable = default_servable(registry, body)
    translator = servable.translator
    nbest = rest.int_value(body.get("nbest", 1), "nbest")
    beam = rest.int_value(body["beam"], "beam") if "beam" in body else max(
        translator.beam_size, nbest)
    alpha = rest.float_value(body["alpha"], "alpha") if "alpha" in body else translator.alpha
    flags = {key: body.get(key, default) for key, default in (
        ("no_unk", False), ("alignment", False), ("confidence", False),
        ("split_sentences", translator.split_sentences))}
    for key, value in flags.items():
        if not isinstance(value, bool):
            raise rest.bad(f"{key} must be true or false")
    shown, confidence = flags["alignment"], flags["confidence"]
    align = shown or markup is not None  # tags are placed by the alignment's attention
    if align:
        check_force_decoding(servable, "alignments" if shown else "markup")
    if confidence:
        check_confidence(servable)
    search = search_key(servable, limits, beam, alpha, nbest, flags["no_unk"], align, confidence)
    rules = rest.constraint_columns(body, len(lines))
    asked = Asked(beam, flags["split_sentences"], _force_decoded(servable, align, confidence), rules,
                  glossary_value(body.get("glossary")), "text")
    return Call(search, nbest, lines, rules, plan(servable, limits, lines, asked, object()),
                markup=markup, show_alignment=shown)


def read_predict(body, servable: Servable, limits: ServerOptions) -> Call:
    """TF Serving's predict body (parsed JSON) as a :class:`Call`: its lines split as the
    export's SavedModel splits them."""
    call = rest.parse_predict(body)
    translator = servable.translator
    beam = translator.beam_size if call.beam is None else call.beam
    alpha = translator.alpha if call.alpha is None else call.alpha
    if call.confidence:
        check_confidence(servable)
    search = search_key(servable, limits, beam, alpha, 1, confidence=call.confidence)
    asked = Asked(beam, translator.split_sentences, _force_decoded(servable, False, call.confidence),
                  call.constraints, None, "inputs" if call.columnar else "instances")
    return Call(search, 1, call.sentences, call.constraints,
                plan(servable, limits, call.sentences, asked, object()), call)


def _markup(value, lines: Sequence[str]) -> list[Markup] | None:
    """A request's ``"markup"`` ("html", "xml" or null) read over its lines; 400 naming
    the first line that cannot be read."""
    if value is None:
        return None
    if value not in KINDS:
        raise rest.bad(f"markup must be one of {', '.join(KINDS)} or null")
    try:
        return parse_lines(lines, value, name=lambda n: f"text[{n}]")
    except MarkupError as error:
        raise rest.bad(str(error)) from None


def default_servable(registry: Registry, body: dict) -> Servable:
    """The body's ``model`` and ``version``, or the one model served."""
    version = body.get("version")
    if version is not None:
        version = rest.int_value(version, "version")
    if "model" in body:
        if not isinstance(body["model"], str):
            raise rest.bad("model must be a string")
        return registry.find(body["model"], version)
    models = registry.models
    if len(models) != 1:
        raise rest.bad(f"name the model: {', '.join(sorted(models))} are served")
    return registry.find(next(iter(models)), version)


def search_key(servable: Servable, limits: ServerOptions, beam: int, alpha: float,
               nbest: int, forbid_unk: bool = False, align: bool = False,
               confidence: bool = False) -> Search:
    """The batch key of a request, once its settings are within limits."""
    translator = servable.translator
    if not 1 <= beam <= limits.max_beam:
        raise rest.bad(f"the beam size must be between 1 and {limits.max_beam} "
                       f"(--max-beam), got {beam}")
    if not 0 <= alpha <= MAX_ALPHA:
        raise rest.bad(f"alpha must be between 0 and {MAX_ALPHA:g}, got {alpha:g}")
    if not 1 <= nbest <= translator.max_nbest:
        raise rest.bad(f"nbest must be between 1 and {translator.max_nbest} (the export "
                       f"returns at most {translator.max_nbest}: export with --nbest N "
                       f"for more), got {nbest}")
    if nbest > beam:
        raise rest.bad(f"nbest ({nbest}) cannot exceed the beam size ({beam})")
    return Search(servable, beam, float(alpha), bool(forbid_unk), align, confidence)


def glossary_value(value) -> Glossary | None:
    """A request's ``"glossary"``: ``[[source term, target term], ...]`` (null: none), at
    most :data:`MAX_GLOSSARY_TERMS` pairs of non-empty strings, each within
    :data:`~keras_nmt.serving.rest_formats.MAX_PHRASE_CHARS` characters."""
    if value is None or value == []:
        return None
    if not isinstance(value, list):
        raise rest.bad("glossary must be a list of [source term, target term] pairs")
    if len(value) > MAX_GLOSSARY_TERMS:
        raise rest.bad(f"the glossary holds {len(value)} terms; at most {MAX_GLOSSARY_TERMS}")
    terms = []
    for i, pair in enumerate(value):
        if (not isinstance(pair, list) or len(pair) != 2
                or not all(isinstance(term, str) for term in pair)):
            raise rest.bad(f"glossary[{i}] must be a [source term, target term] pair of strings")
        terms.append(tuple(rest.phrase_value(term, f"glossary[{i}][{j}]").strip()
                           for j, term in enumerate(pair)))
    return Glossary(tuple(terms))


def check_force_decoding(servable: Servable, what: str) -> None:
    """400 when ``servable`` has no force-decoding model to give ``what`` with."""
    if not servable.translator.aligns:
        raise rest.bad(f"model {servable.name!r} version {servable.version} has no "
                       "force-decoding model (written by an older keras-nmt): export it "
                       f"again with --onnx for {what}")


def check_confidence(servable: Servable) -> None:
    """400 when ``servable`` can compute no confidence."""
    if not servable.translator.gives_confidence:
        raise rest.bad(f"model {servable.name!r} version {servable.version} can compute no "
                       "confidence (written by an older keras-nmt): export it again with --onnx")


def _force_decoded(servable: Servable, align: bool, confidence: bool) -> str:
    """What a request has force-decoded, as its refusals name it ("": nothing): a
    confidence from an export whose search does not score its tokens runs the same pass."""
    confidence = confidence and not servable.translator.scores_tokens
    return "alignments" if align else "confidences" if confidence else ""


def version_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:  # only digits reach here; too many of them is the one way
        raise rest.bad("the version is not a number") from None


def parse_json(raw: bytes):
    """A body's bytes as JSON; 400 for bytes that are not UTF-8 or not JSON."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise rest.bad(f"the request body is not UTF-8 (byte {error.start})") from None
    try:
        return json.loads(text)
    except RecursionError:
        raise rest.bad("JSON Parse error: nested too deeply") from None
    except ValueError as error:
        raise rest.bad(f"JSON Parse error: {error}") from None

