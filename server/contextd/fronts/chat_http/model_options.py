"""The model options every model API gives alike, under its own names and bounds: the
model named, the temperature, the output tokens and the stop sequences, into the native
ModelOptions (each recorded in the ParamMap under the request's name)."""

from __future__ import annotations

from contextd.fronts.chat_http import json_fields as jf
from contextd.fronts.chat_http.failure import invalid
from contextd.fronts.chat_http.params import ParamMap
from contextd.v1 import chat_pb2 as cpb

_MOST_TOKENS = 2**31 - 1


def model(body: jf.JsonObject, out: cpb.ModelOptions, params: ParamMap) -> None:
    """``model``, required: passed on as the turn's model."""
    out.model = jf.string(body.get("model"), "model")
    params.add("model.model", "model")


def temperature(
    body: jf.JsonObject, out: cpb.ModelOptions, params: ParamMap, highest: float
) -> None:
    """``temperature``, from 0 to ``highest`` when given."""
    value = jf.optional_number(body.get("temperature"), "temperature")
    if value is None:
        return
    if not 0 <= value <= highest:
        raise invalid("temperature", f"must be from 0 to {highest:g}")
    out.temperature = value
    params.add("model.temperature", "temperature")


def output_tokens(
    body: jf.JsonObject, name: str, out: cpb.ModelOptions, params: ParamMap, required: bool = False
) -> bool:
    """The most output tokens, as the parameter ``name``; whether it was given."""
    tokens = jf.optional_int(body.get(name), name)
    if tokens is None:
        if required:
            raise invalid(name, "Field required")
        return False
    if not 1 <= tokens <= _MOST_TOKENS:
        raise invalid(name, "must be a positive integer")
    out.max_output_tokens = tokens
    params.add("model.max_output_tokens", name)
    return True


def stop(
    body: jf.JsonObject,
    name: str,
    out: cpb.ModelOptions,
    params: ParamMap,
    most: int,
    one_string: bool = False,
) -> None:
    """The stop sequences, at most ``most``: a list, or also a single string when
    ``one_string``."""
    raw = body.get(name)
    if raw is None:
        return
    stops = [raw] if one_string and isinstance(raw, str) else jf.array(raw, name)
    if len(stops) > most:
        raise invalid(name, f"at most {most} sequences")
    out.stop.extend(jf.string(s, f"{name}[{k}]") for k, s in enumerate(stops))
    params.add("model.stop", name)
