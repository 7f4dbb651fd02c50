"""TF Serving's REST formats for the export's string signatures, without TensorFlow.

``keras-nmt serve`` answers what TF Serving answers for the SavedModel of
:mod:`keras_nmt.export.savedmodel`, so TF Serving clients work against it unchanged:
``serving_default`` (``sentences`` [N] -> ``translations``, ``scores`` float32, ``truncated``
int32; with ``--nbest K``, ``nbest_translations`` and ``nbest_scores`` [N, K]) and
``translate`` (plus ``beam_size`` and ``alpha``; an alpha below 0,
:data:`keras_nmt.export.EXPORT_ALPHA`, is the export's). Requests come in row form
(``instances`` -> ``predictions``) or columnar form (``inputs`` or a bare list -> ``outputs``);
a string may be ``{"b64": ...}``. ``translate_ids`` and ``attention`` are not served. Floats are
written as TF Serving writes them (the shortest float32 text); unfilled n-best slots are ""
and -Infinity. Beyond TF Serving, an instance's ``"constraints"``, ``"avoid"`` and ``"prefix"``
add ``"unmet"``, and ``"confidence": true`` adds ``confidence``, ``sentence_confidences`` and
``word_confidences`` (docs/export-serving.md). Cost: linear in the request and the answer.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import math
from typing import Sequence

import numpy as np

from keras_nmt.decoding.confidence import line_fields
from keras_nmt.decoding.constraints import MAX_PHRASES, LineConstraints
from keras_nmt.core.errors import RequestError
from keras_nmt.decoding.translation import Translation

DEFAULT_SIGNATURE = "serving_default"
SEARCH_SIGNATURE = "translate"
SIGNATURE_INPUTS = {DEFAULT_SIGNATURE: ("sentences",),
                    SEARCH_SIGNATURE: ("sentences", "beam_size", "alpha")}
PREDICT_METHOD = "tensorflow/serving/predict"
# keras-nmt serve's own inputs, per instance (an export with the constrained search).
CONSTRAINT_INPUTS = ("constraints", "avoid", "prefix")
# The outputs a request with "confidence": true adds (keras-nmt serve only).
CONFIDENCE_OUTPUTS = ("confidence", "sentence_confidences", "word_confidences")
# Characters of one phrase or prefix, at most: refused before anything tokenizes it (an
# output has a few hundred tokens at most; the token limits are checked once tokenized).
MAX_PHRASE_CHARS = 4096


def bad(reason: str) -> RequestError:
    """400, TF Serving's status for INVALID_ARGUMENT."""
    return RequestError(400, reason)


@dataclasses.dataclass(frozen=True)
class PredictCall:
    """A predict request, read: its signature, form, sentences and search settings
    (None: the export's)."""

    signature: str
    columnar: bool
    sentences: list[str]
    beam: int | None = None
    alpha: float | None = None
    # Per sentence, what its translation must respect (None: nothing); None: no instance
    # says anything.
    constraints: list[LineConstraints | None] | None = None
    confidence: bool = False  # also answer CONFIDENCE_OUTPUTS


def _text(value, where: str) -> str:
    """A sentence: a JSON string, or {"b64": ...} holding UTF-8 bytes."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and set(value) == {"b64"} and isinstance(value["b64"], str):
        try:
            raw = base64.b64decode(value["b64"], validate=True)
        except (binascii.Error, ValueError):
            raise bad(f"{where}: Unable to base64 decode") from None
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise bad(f"{where}: the decoded bytes are not UTF-8 text") from None
    raise bad(f"{where}: expected a string (or {{\"b64\": ...}}), got {_json_type(value)}")


def _json_type(value) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string",
            list: "a list", dict: "an object"}.get(type(value), type(value).__name__)


def sentences_value(value, where: str) -> list[str]:
    if not isinstance(value, list):
        raise bad(f"{where} must be a list of strings (shape [N]), got {_json_type(value)}")
    return [_text(item, f"{where}[{i}]") for i, item in enumerate(value)]


def int_value(value, name: str) -> int:
    """A JSON integer (not a boolean, not 5.0: TF Serving reads int32 from integers)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad(f"{name} must be an integer, got {_json_type(value)}")
    return value


def float_value(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise bad(f"{name} must be a number, got {_json_type(value)}")
    try:
        value = float(value)
    except OverflowError:
        value = math.inf
    if not math.isfinite(value):
        raise bad(f"{name} must be a finite number")
    return value


def parse_predict(body) -> PredictCall:
    """Read a predict body (parsed JSON) for the two string signatures; 400 with TF
    Serving's kind of reason for anything else."""
    if not isinstance(body, dict):
        raise bad("the request body must be a JSON object")
    unknown = sorted(set(body) - {"signature_name", "instances", "inputs", "confidence"})
    if unknown:
        raise bad(f"unknown key {unknown[0]!r}: expected 'signature_name' and either "
                  "'instances' or 'inputs' (and 'confidence')")
    confidence = body.get("confidence", False)
    if not isinstance(confidence, bool):
        raise bad(f"'confidence' must be true or false, got {_json_type(confidence)}")
    return dataclasses.replace(_parse_call(body), confidence=confidence)


def _parse_call(body: dict) -> PredictCall:
    """:func:`parse_predict` of the signature and its inputs."""
    signature = body.get("signature_name", DEFAULT_SIGNATURE)
    if not isinstance(signature, str):
        raise bad("'signature_name' key must be a string value")
    signature = signature or DEFAULT_SIGNATURE
    if signature not in SIGNATURE_INPUTS:
        raise bad(f'Serving signature name: "{signature}" not found in signature def '
                  f"(served: {', '.join(SIGNATURE_INPUTS)})")
    if ("instances" in body) == ("inputs" in body):
        raise bad("the request must hold either 'instances' or 'inputs' (not both)")
    names = SIGNATURE_INPUTS[signature]
    if "instances" in body:
        if len(names) > 1:
            raise bad(f"the {signature} signature's beam_size and alpha are scalars: send "
                      "them in the columnar form, {\"inputs\": {...}}")
        instances = body["instances"]
        if not isinstance(instances, list):
            raise bad(f"'instances' must be a list, got {_json_type(instances)}")
        rows = [_row(item, f"instances[{i}]") for i, item in enumerate(instances)]
        found = [rules for _, rules in rows]
        return PredictCall(signature, False,
                           sentences_value([item for item, _ in rows], "instances"),
                           constraints=found if any(found) else None)
    inputs = body["inputs"]
    if not isinstance(inputs, dict):
        if len(names) > 1:
            raise bad(f"'inputs' must be an object with the inputs {list(names)}")
        return PredictCall(signature, True, sentences_value(inputs, "inputs"))
    if not set(names) <= set(inputs) <= set(names) | set(CONSTRAINT_INPUTS):
        raise bad(f"'inputs' must hold exactly the inputs {list(names)} of {signature} "
                  f"(and any of {list(CONSTRAINT_INPUTS)}), got {sorted(inputs)[:10]}")
    sentences = sentences_value(inputs["sentences"], "inputs.sentences")
    found = constraint_columns(inputs, len(sentences), "inputs.", "inputs.sentences")
    if len(names) == 1:
        return PredictCall(signature, True, sentences, constraints=found)
    alpha = float_value(inputs["alpha"], "alpha")
    return PredictCall(signature, True, sentences, int_value(inputs["beam_size"], "beam_size"),
                       None if alpha < 0 else alpha,  # < 0: the export's (EXPORT_ALPHA)
                       constraints=found)


def _row(item, where: str) -> tuple[object, LineConstraints | None]:
    """An instance of the row form: its sentence (checked later) and its constraints."""
    if not isinstance(item, dict) or set(item) == {"b64"}:
        return item, None
    if "sentences" not in item:
        raise bad(f"{where}: an object instance needs 'sentences'")
    unknown = sorted(set(item) - {"sentences", *CONSTRAINT_INPUTS})
    if unknown:
        raise bad(f"{where}: unknown key {unknown[0][:100]!r} (known: 'sentences', "
                  f"{', '.join(repr(k) for k in CONSTRAINT_INPUTS)})")
    return item["sentences"], line_constraints(item.get("constraints"), item.get("avoid"),
                                               item.get("prefix"), where)


def constraint_columns(columns: dict, count: int, where: str = "", lines: str = "text"
                       ) -> list[LineConstraints | None] | None:
    """The constraints of ``count`` lines from the optional columns ``constraints``,
    ``avoid`` and ``prefix`` of ``columns`` (lists aligned with the lines; an entry null:
    none); None when no column is given or none says anything. A reason names a column
    ``where + name``, a line ``lines[n]``."""
    given = {}
    for name in CONSTRAINT_INPUTS:
        value = columns.get(name)
        if value is None:
            continue
        if not isinstance(value, list) or len(value) != count:
            got = f"{len(value)} entries" if isinstance(value, list) else _json_type(value)
            raise bad(f"{where}{name} must be a list with an entry for each of the {count} "
                      f"sentences, got {got}")
        given[name] = value
    if not given:
        return None
    found = [line_constraints(*(given[name][n] if name in given else None
                                for name in CONSTRAINT_INPUTS), f"{lines}[{n}]")
             for n in range(count)]
    return found if any(found) else None


def line_constraints(include, avoid, prefix, where: str) -> LineConstraints | None:
    """One line's constraints from JSON values (phrases to include and to avoid, lists of
    strings; a prefix, a string; null: none), each within its limits; None when there
    are none."""
    found = LineConstraints(phrases_value(include, f"{where}.constraints"),
                            phrases_value(avoid, f"{where}.avoid"),
                            prefix_value(prefix, f"{where}.prefix"))
    return found or None


def phrases_value(value, where: str) -> tuple[str, ...]:
    """Target phrases: a list of at most :data:`MAX_PHRASES` non-empty strings, each at
    most :data:`MAX_PHRASE_CHARS` characters long (counted before any is read)."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise bad(f"{where} must be a list of strings (phrases), got {_json_type(value)}")
    if len(value) > MAX_PHRASES:
        raise bad(f"{where} holds {len(value)} phrases; at most {MAX_PHRASES}")
    return tuple(phrase_value(item, f"{where}[{i}]") for i, item in enumerate(value))


def phrase_value(value, where: str) -> str:
    """One target phrase: a non-empty string of at most :data:`MAX_PHRASE_CHARS`
    characters."""
    text = _bounded_text(value, where)
    if not text.strip():
        raise bad(f"{where} is an empty phrase")
    return text


def prefix_value(value, where: str) -> str:
    """A target prefix: a string of at most :data:`MAX_PHRASE_CHARS` characters (null or
    "": none)."""
    if value is None:
        return ""
    return _bounded_text(value, where)


def _bounded_text(value, where: str) -> str:
    text = _text(value, where)
    if len(text) > MAX_PHRASE_CHARS:
        raise bad(f"{where} is {len(text)} characters long; at most {MAX_PHRASE_CHARS}")
    return text


def float32_json(value: float) -> float:
    """A float32 as the shortest decimal that reads back as it (TF Serving's way)."""
    return float(str(np.float32(value)))


def outputs(results: Sequence[Translation], nbest_width: int, confidence: bool = False
            ) -> dict[str, list]:
    """The signatures' outputs, columns of the batch; n-best columns when the export
    returns more than one hypothesis a sentence; with ``confidence``,
    :data:`CONFIDENCE_OUTPUTS` (the module docstring)."""
    columns = {
        "translations": [t.text for t in results],
        "scores": [float32_json(t.score) for t in results],
        "truncated": [int(t.truncated) for t in results],
    }
    if nbest_width > 1:
        pad = [("", -math.inf)] * nbest_width
        slots = [([(h.text, h.score) for h in t.hypotheses] + pad)[:nbest_width]
                 for t in results]
        columns["nbest_translations"] = [[text for text, _ in row] for row in slots]
        columns["nbest_scores"] = [[float32_json(score) for _, score in row] for row in slots]
    if confidence:
        fields = [line_fields(t.confidence, [part.confidence for part in t.sentences or (t,)])
                  for t in results]
        for name, key in zip(CONFIDENCE_OUTPUTS, ("confidence", "sentences", "words")):
            columns[name] = [found[key] for found in fields]
    return columns


def predict_answer(call: PredictCall, results: Sequence[Translation],
                   nbest_width: int) -> dict:
    """The answer's JSON object; ``"unmet"`` where a translation misses a phrase (the
    module docstring)."""
    columns = outputs(results, nbest_width, call.confidence)
    missed = any(t.unmet for t in results)
    if call.columnar:
        if missed:
            columns["unmet"] = [list(t.unmet) for t in results]
        return {"outputs": columns}
    rows = [{key: values[i] for key, values in columns.items()} for i in range(len(results))]
    for row, t in zip(rows, results):
        if t.unmet:
            row["unmet"] = list(t.unmet)
    return {"predictions": rows}


def status_answer(versions: Sequence[int]) -> dict:
    """``GET /v1/models/NAME[/versions/N]``: every version served is AVAILABLE."""
    return {"model_version_status": [
        {"version": str(v), "state": "AVAILABLE",
         "status": {"error_code": "OK", "error_message": ""}}
        for v in sorted(versions, reverse=True)
    ]}


def _tensor(dtype: str, *dims: int) -> dict:
    return {"dtype": dtype, "tensor_shape": {
        "dim": [{"size": str(d), "name": ""} for d in dims], "unknown_rank": False}}


def metadata_answer(name: str, version: int, nbest_width: int) -> dict:
    """``GET /v1/models/NAME[/versions/N]/metadata``: the signatures served, in TF
    Serving's SignatureDefMap JSON (tensor names are the aliases: no graph here)."""
    outputs_info = {"translations": _tensor("DT_STRING", -1), "scores": _tensor("DT_FLOAT", -1),
                    "truncated": _tensor("DT_INT32", -1)}
    if nbest_width > 1:
        outputs_info["nbest_translations"] = _tensor("DT_STRING", -1, nbest_width)
        outputs_info["nbest_scores"] = _tensor("DT_FLOAT", -1, nbest_width)
    inputs_info = {"sentences": _tensor("DT_STRING", -1), "beam_size": _tensor("DT_INT32"),
                   "alpha": _tensor("DT_FLOAT")}
    signatures = {}
    for signature, names in SIGNATURE_INPUTS.items():
        signatures[signature] = {
            "inputs": {n: {**inputs_info[n], "name": n} for n in names},
            "outputs": {n: {**info, "name": n} for n, info in outputs_info.items()},
            "method_name": PREDICT_METHOD,
        }
    return {
        "model_spec": {"name": name, "signature_name": "", "version": str(version)},
        "metadata": {"signature_def": {
            "signature_def": signatures,
            "@type": "type.googleapis.com/tensorflow.serving.SignatureDefMap",
        }},
    }
