"""OTLP/JSON requests made ready for protobuf's JSON parser, without repairing anything.

OTLP/JSON writes trace and span ids as hex, where protobuf's canonical JSON mapping expects
base64: the ids are converted, and an id that is not hex fails the request (`InvalidInput`).
Text holding a lone surrogate cannot be stored; protobuf's parser would accept it, so each span
carrying one is found here and refused alone, with its reason, before parsing. The rest of the
document is left exactly as sent.
"""

from __future__ import annotations

import base64
import binascii
import json as jsonlib
import re
from collections.abc import Iterable
from typing import Any, Final

from neens_eval.strict_json import DuplicateKey, no_duplicate_keys

from neens.domain.spans import Rejection
from neens.domain.storable import MAX_NESTING, safe_label, unstorable_text_reason
from neens.errors import InvalidInput

HEX: Final = re.compile(r"(?:[0-9a-fA-F]{2})*")
_SURROGATE: Final = re.compile("[\ud800-\udfff]")


_ID_KEYS: Final = (
    ("traceId", "trace_id"),
    ("spanId", "span_id"),
    ("parentSpanId", "parent_span_id"),
)
_LINK_ID_KEYS: Final = (("traceId", "trace_id"), ("spanId", "span_id"))


def prepare_json_document(
    document: dict[str, Any], *, scan_surrogates: bool = True
) -> list[Rejection]:
    """Rewrite hex ids as base64 in place and take out spans protobuf could not hold.

    Only shapes that look right are touched; anything else is left for `ParseDict` to refuse with
    its own precise message. A resource or scope holding a lone surrogate takes all its spans
    with it (each rejected with the reason), since none of them could be decoded with it.
    """
    rejections: list[Rejection] = []
    for r_index, resource_spans in json_items(document, "resourceSpans", "resource_spans"):
        resource_problem = None
        if scan_surrogates:
            resource = resource_spans.get("resource")
            resource_problem = _json_group_surrogate_reason(resource, "resource")
        for key, scope_groups in json_lists(resource_spans, "scopeSpans", "scope_spans"):
            resource_spans[key] = [
                group
                for s_index, group in enumerate(scope_groups)
                if not isinstance(group, dict)
                or _prepare_scope_group(
                    group,
                    f"resourceSpans[{r_index}].scopeSpans[{s_index}]",
                    resource_problem,
                    rejections,
                    scan_surrogates=scan_surrogates,
                )
            ]
        if resource_problem is not None:
            resource_spans.pop("resource")
    return rejections


def _prepare_scope_group(
    group: dict[str, Any],
    path: str,
    problem: str | None,
    rejections: list[Rejection],
    *,
    scan_surrogates: bool,
) -> bool:
    """Prepare one ScopeSpans object in place; False when it must be dropped whole."""
    if problem is None and scan_surrogates:
        problem = _json_group_surrogate_reason(group.get("scope"), "scope")
    for key, spans in json_lists(group, "spans", "spans"):
        kept: list[Any] = []
        for index, span in enumerate(spans):
            if not isinstance(span, dict):
                kept.append(span)
                continue
            name = span.get("name")
            label = safe_label(name if isinstance(name, str) else "")
            reason = f"span {label} {problem}" if problem is not None else None
            if reason is None and scan_surrogates:
                reason = _json_span_surrogate_reason(span, label)
            if reason is None and (shape := _json_span_shape_reason(span)) is not None:
                reason = f"span {label} {shape}"
            if reason is not None:
                rejections.append(Rejection(reason))
                continue
            _hex_ids_to_base64(span, f"{path}.spans[{index}]")
            kept.append(span)
        group[key] = kept
    return problem is None


def json_lists(container: dict[str, Any], camel: str, snake: str) -> list[tuple[str, list[Any]]]:
    return [
        (key, container[key])
        for key in dict.fromkeys((camel, snake))
        if isinstance(container.get(key), list)
    ]


def json_items(container: dict[str, Any], camel: str, snake: str) -> list[tuple[int, Any]]:
    return [
        (index, item)
        for _, items in json_lists(container, camel, snake)
        for index, item in enumerate(items)
        if isinstance(item, dict)
    ]


def _hex_ids_to_base64(span: dict[str, Any], path: str) -> None:
    _convert_ids(span, _ID_KEYS, path)
    for _, links in json_lists(span, "links", "links"):
        for index, link in enumerate(links):
            if isinstance(link, dict):
                _convert_ids(link, _LINK_ID_KEYS, f"{path}.links[{index}]")


def _convert_ids(container: dict[str, Any], keys: Iterable[tuple[str, str]], path: str) -> None:
    for spellings in keys:
        for key in spellings:
            value = container.get(key)
            if not isinstance(value, str):
                continue  # absent, or a wrong type that ParseDict reports itself
            if HEX.fullmatch(value) is None:
                raise InvalidInput(
                    f"{path}.{key} is not a hex string: {safe_label(value)} "
                    "(OTLP/JSON encodes trace and span ids as hex, not base64)",
                    field=f"{path}.{key}",
                )
            container[key] = base64.b64encode(binascii.unhexlify(value)).decode("ascii")


_STATUS_CODES: Final = frozenset({"STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR"})
_SPAN_KINDS: Final = frozenset(
    {
        "SPAN_KIND_UNSPECIFIED",
        "SPAN_KIND_INTERNAL",
        "SPAN_KIND_SERVER",
        "SPAN_KIND_CLIENT",
        "SPAN_KIND_PRODUCER",
        "SPAN_KIND_CONSUMER",
    }
)


MAX_ANY_VALUE_DEPTH: Final = MAX_NESTING
"""Past this depth the shape check stops (the decoder refuses deeper values itself)."""


def _json_span_shape_reason(span: dict[str, Any]) -> str | None:
    """Why a span's status, kind or attribute values are not OTLP/JSON's shapes, or None.

    Protobuf's JSON reader, told to skip unknown fields (as OTLP asks, for fields of newer
    versions), also skipped what it could not read as the message a field holds: a status sent
    as `"ERROR"` was dropped (the span stored as ok), an attribute value sent as a bare string
    was stored as null, an enum name it did not know was left out. Each is refused instead."""
    status = span.get("status")
    if status is not None:
        if not isinstance(status, dict):
            return (
                f"has status {json_type(status)}: send an object such as "
                '{"code": "STATUS_CODE_ERROR", "message": "…"} (or "code": 2)'
            )
        if (reason := _enum_reason(status.get("code"), _STATUS_CODES, "status.code")) is not None:
            return reason
    if (reason := _enum_reason(span.get("kind"), _SPAN_KINDS, "kind")) is not None:
        return reason
    if (reason := _attributes_shape_reason(span.get("attributes"), "attribute")) is not None:
        return reason
    for field in ("events", "links"):
        entries = span.get(field)
        if isinstance(entries, list):
            for index, entry in enumerate(entries):
                if isinstance(entry, dict):
                    where = f"{field[:-1]} {index} attribute"
                    reason = _attributes_shape_reason(entry.get("attributes"), where)
                    if reason is not None:
                        return reason
    return None


def _enum_reason(value: object, names: frozenset[str], field: str) -> str | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return None
    if isinstance(value, str) and value in names:
        return None
    return f"has {field} {safe_label(str(value))}, which is none of {', '.join(sorted(names))}"


def _attributes_shape_reason(attributes: object, source: str) -> str | None:
    if not isinstance(attributes, list):
        return None  # not a list at all: ParseDict refuses the request, naming the field
    for item in attributes:
        if isinstance(item, dict) and "value" in item:
            reason = _any_value_shape_reason(item["value"], 0)
            if reason is not None:
                return f"{source} {safe_label(str(item.get('key')))} {reason}"
    return None


def _any_value_shape_reason(value: object, depth: int) -> str | None:
    """Why a raw AnyValue is not an object of OTLP/JSON's shape, or None (its scalars' types
    are ParseDict's to check, and it does)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        return (
            f"is {json_type(value)} where OTLP/JSON wants an AnyValue object, such as "
            '{"stringValue": "…"} or {"intValue": "12"}'
        )
    if depth > MAX_ANY_VALUE_DEPTH:
        return None  # the decoder refuses what is nested this deep, span by span
    for key, inner in value.items():
        if key in ("arrayValue", "array_value", "kvlistValue", "kvlist_value"):
            if inner is None:
                continue
            if not isinstance(inner, dict) or not isinstance(inner.get("values"), list | None):
                return f"has {key} that is not an object holding a values list"
            for entry in inner.get("values") or []:
                if key.startswith("kvlist"):
                    if not isinstance(entry, dict):
                        return f"has a {key} entry that is not a {{key, value}} object"
                    entry = entry.get("value")
                if (reason := _any_value_shape_reason(entry, depth + 1)) is not None:
                    return reason
    return None


def _has_surrogate(value: object) -> bool:
    if isinstance(value, str):
        return _SURROGATE.search(value) is not None
    if isinstance(value, dict):
        return any(_has_surrogate(key) or _has_surrogate(item) for key, item in value.items())
    if isinstance(value, list):
        return any(_has_surrogate(item) for item in value)
    return False


def _json_group_surrogate_reason(group: object, source: str) -> str | None:
    """Why a raw resource or scope object cannot be decoded, for every span beneath it."""
    if not _has_surrogate(group):
        return None
    if isinstance(group, dict):
        reason = _json_attributes_reason(group.get("attributes"), f"{source} attribute")
        if reason is not None:
            return reason
    return f"{source} {unstorable_text_reason(group)}"


def _json_span_surrogate_reason(span: dict[str, Any], label: str) -> str | None:
    """Why a raw OTLP/JSON span cannot be decoded, naming the field or attribute, or None."""
    if not _has_surrogate(span):
        return None
    for key, value in span.items():
        reason: str | None = None
        if _has_surrogate(key):
            reason = f"has a field name that {unstorable_text_reason(key)}"
        elif not _has_surrogate(value):
            continue
        elif key == "attributes":
            reason = _json_attributes_reason(value, "attribute")
        elif key == "events" and isinstance(value, list):
            reason = next(
                (
                    f"event {index} {_json_event_reason(event)}"
                    for index, event in enumerate(value)
                    if _has_surrogate(event)
                ),
                None,
            )
        return f"span {label} {reason or f'{key} {unstorable_text_reason(value)}'}"
    return None  # pragma: no cover - _has_surrogate(span) found one in some key or value


def _json_event_reason(event: object) -> str:
    if isinstance(event, dict):
        reason = _json_attributes_reason(event.get("attributes"), "attribute")
        if reason is not None:
            return reason
    return str(unstorable_text_reason(event))


def _json_attributes_reason(attributes: object, source: str) -> str | None:
    if not isinstance(attributes, list):
        return None
    for item in attributes:
        if not isinstance(item, dict) or not _has_surrogate(item):
            continue
        key = item.get("key")
        if isinstance(key, str) and _has_surrogate(key):
            return f"{source} key {safe_label(key)} {unstorable_text_reason(key)}"
        value_reason = unstorable_text_reason(_json_any_value(item.get("value")))
        return f"{source} {safe_label(key)} {value_reason}"
    return None


def _json_any_value(value: object) -> object:
    """A raw OTLP/JSON AnyValue unwrapped well enough to say where the bad text sits."""
    if not isinstance(value, dict) or len(value) != 1:
        return value
    ((key, inner),) = value.items()
    if key in ("arrayValue", "array_value") and isinstance(inner, dict):
        values = inner.get("values")
        if isinstance(values, list):
            return [_json_any_value(item) for item in values]
    if key in ("kvlistValue", "kvlist_value") and isinstance(inner, dict):
        values = inner.get("values")
        if isinstance(values, list):
            return {
                str(item.get("key")): _json_any_value(item.get("value"))
                for item in values
                if isinstance(item, dict)
            }
    return inner


def load_json_object(body: bytes) -> dict[str, Any]:
    """An OTLP/JSON body (already decompressed) as a JSON object, or `InvalidInput` saying why.

    A key given twice in one object is refused, naming it, as on every other JSON route: the
    parser would keep the last, and a second `resourceSpans` (or `attributes`) would drop the
    first's spans (or attributes) while the request was answered 200."""
    try:
        document = jsonlib.loads(body.decode("utf-8-sig"), object_pairs_hook=no_duplicate_keys)
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"request body is not UTF-8 text: {exc}") from exc
    except DuplicateKey as exc:
        raise InvalidInput(f"request body is not accepted: {exc}") from exc
    except jsonlib.JSONDecodeError as exc:
        raise InvalidInput(f"request body is not valid JSON: {exc}") from exc
    except RecursionError as exc:
        raise InvalidInput("request body JSON is nested too deeply") from exc
    if not isinstance(document, dict):
        raise InvalidInput(
            f"OTLP/JSON request body must be a JSON object, not {json_type(document)}"
        )
    return document


def json_type(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"
