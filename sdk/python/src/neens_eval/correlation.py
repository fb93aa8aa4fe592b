"""The environment `neens eval run` gives the agent command: the prompt and the correlation
attributes that link its trace to a pre-prod item.

`OTEL_RESOURCE_ATTRIBUTES` is a comma-separated list of `key=value` pairs whose values are
percent-encoded (OpenTelemetry's SDK environment variable specification). The three correlation
keys are added to whatever the user already set; a user value for one of those three keys is
replaced, every other pair is kept byte for byte.

The OTLP exporter is pointed at Neens only when the user has not pointed it anywhere: with no
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` and no `OTEL_EXPORTER_OTLP_ENDPOINT`, traces go to
`$NEENS_BASE_URL/v1/traces` over `http/protobuf`. When the traces go to Neens and no
`Authorization` header is configured, the API key is added as one, so the CI step of the docs
works with only `NEENS_BASE_URL` and `NEENS_API_KEY` set. The key is never added for an endpoint
other than Neens's.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from typing import Final

RESOURCE_ATTRIBUTES: Final = "OTEL_RESOURCE_ATTRIBUTES"
TRACES_ENDPOINT: Final = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
ENDPOINT: Final = "OTEL_EXPORTER_OTLP_ENDPOINT"
TRACES_HEADERS: Final = "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
HEADERS: Final = "OTEL_EXPORTER_OTLP_HEADERS"
TRACES_PROTOCOL: Final = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
PROTOCOL: Final = "OTEL_EXPORTER_OTLP_PROTOCOL"

RUN_ID_ATTR: Final = "neens.eval_run_id"
ITEM_ID_ATTR: Final = "neens.dataset_item_id"
VERSION_LABEL_ATTR: Final = "neens.version_label"

ITEM_INPUT_VAR: Final = "NEENS_ITEM_INPUT"
MAX_ENV_STRING_BYTES: Final = 128 * 1024 - 1
"""Linux refuses to start a program with one environment string (`NAME=value`) this long or
longer (MAX_ARG_STRLEN); a longer prompt is given on standard input only."""


def merge_resource_attributes(existing: str | None, ours: Mapping[str, str]) -> str:
    """`existing` with `ours` added (percent-encoded), replacing any pair with one of our keys."""
    kept = []
    for pair in (existing or "").split(","):
        if not pair.strip():
            continue
        key = pair.split("=", 1)[0].strip()
        if key in ours:
            continue
        kept.append(pair.strip())
    kept.extend(f"{key}={urllib.parse.quote(value, safe='')}" for key, value in ours.items())
    return ",".join(kept)


def parse_pairs(value: str | None) -> dict[str, str]:
    """Decode an OTel `key=value,...` variable (values percent-decoded); bad pairs are skipped."""
    pairs: dict[str, str] = {}
    for pair in (value or "").split(","):
        key, sep, raw = pair.partition("=")
        if sep and key.strip():
            pairs[key.strip()] = urllib.parse.unquote(raw.strip())
    return pairs


def exporter_env(environ: Mapping[str, str], base_url: str, api_key: str) -> dict[str, str]:
    """The OTLP exporter variables to set on top of `environ` (only those that change)."""
    out: dict[str, str] = {}
    traces_endpoint = environ.get(TRACES_ENDPOINT, "").strip()
    endpoint = environ.get(ENDPOINT, "").strip()
    if not traces_endpoint and not endpoint:
        traces_endpoint = f"{base_url}/v1/traces"
        out[TRACES_ENDPOINT] = traces_endpoint
        if not environ.get(TRACES_PROTOCOL) and not environ.get(PROTOCOL):
            out[TRACES_PROTOCOL] = "http/protobuf"
    effective = traces_endpoint or f"{endpoint.rstrip('/')}/v1/traces"
    if not _same_origin_and_prefix(effective, base_url):
        return out
    headers_var = TRACES_HEADERS if environ.get(TRACES_HEADERS, "").strip() else HEADERS
    headers = environ.get(headers_var, "").strip()
    if any(key.lower() == "authorization" for key in parse_pairs(headers)):
        return out
    auth = "Authorization=" + urllib.parse.quote(f"Bearer {api_key}", safe="")
    # The traces variable wins over the generic one in every OTel SDK, so carry its pairs over.
    out[TRACES_HEADERS] = f"{headers},{auth}" if headers else auth
    return out


def item_env(
    base: Mapping[str, str],
    *,
    run_id: str,
    item_id: str,
    version_label: str,
    prompt: str,
) -> tuple[dict[str, str], bool]:
    """The environment of one item's command, and whether the prompt fit in NEENS_ITEM_INPUT."""
    env = dict(base)
    env[RESOURCE_ATTRIBUTES] = merge_resource_attributes(
        base.get(RESOURCE_ATTRIBUTES),
        {RUN_ID_ATTR: run_id, ITEM_ID_ATTR: item_id, VERSION_LABEL_ATTR: version_label},
    )
    env["NEENS_EVAL_RUN_ID"] = run_id
    env["NEENS_DATASET_ITEM_ID"] = item_id
    env["NEENS_VERSION_LABEL"] = version_label
    fits = "\x00" not in prompt and (
        len(ITEM_INPUT_VAR.encode()) + 1 + len(prompt.encode("utf-8", "surrogatepass"))
        <= MAX_ENV_STRING_BYTES
    )
    if fits:
        env[ITEM_INPUT_VAR] = prompt
    else:
        env.pop(ITEM_INPUT_VAR, None)
    return env, fits


def _same_origin_and_prefix(url: str, base_url: str) -> bool:
    """Whether `url` is under `base_url` (same scheme, host, port and path prefix)."""
    target, base = urllib.parse.urlsplit(url), urllib.parse.urlsplit(base_url)
    try:
        same_port = (target.port or _default_port(target.scheme)) == (
            base.port or _default_port(base.scheme)
        )
    except ValueError:
        return False
    return (
        target.scheme.lower() == base.scheme.lower()
        and (target.hostname or "").lower() == (base.hostname or "").lower()
        and same_port
        and (target.path.rstrip("/") + "/").startswith(base.path.rstrip("/") + "/")
    )


def _default_port(scheme: str) -> int:
    return 443 if scheme.lower() == "https" else 80
