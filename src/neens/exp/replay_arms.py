"""The two arms of a replay, from `--vary FIELD=VALUE[,VALUE]`.

One value changes arm B and keeps arm A as recorded; two values set A and B. Each `--vary`
names one field; several `--vary` change several fields together. The fields:

- `model`: the model to call (its provider's wire format follows from it, see `providers`);
- `system`: the system prompt, as text or `@FILE` (read as UTF-8). Its values are split at
  commas only when they are files (`system=@a.md,@b.md`), so a prompt may contain commas;
- any other request field (`temperature`, `max_tokens`, `top_p`, `reasoning_effort`, …): sent
  as given, a value that parses as JSON as that JSON (`temperature=0` is the number 0).

`messages`, `tools` and `stream` cannot be varied: a replay sends the recorded conversation,
with the recorded tools, and reads a whole reply.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from neens_eval.errors import ConfigError

from neens.exp.providers import ProviderName, provider_for
from neens.exp.replay_calls import RecordedCall

_FIELD: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
REFUSED: Final = {
    "messages": "a replay sends the recorded conversation",
    "tools": "a replay offers the recorded tools",
    "stream": "a replay reads whole replies",
}


@dataclass(frozen=True, slots=True)
class Arm:
    label: str
    """"A" or "B"."""
    changes: dict[str, Any] = field(default_factory=dict)
    """Field → value; `model` and `system` included."""
    shown: dict[str, str] = field(default_factory=dict)
    """Field → the value as the person wrote it (`@new-prompt.md`), for the arm's name."""

    @property
    def name(self) -> str:
        if not self.shown:
            return "recorded"
        return ",".join(f"{key}={value}" for key, value in self.shown.items())

    def model(self, call: RecordedCall) -> str | None:
        model = self.changes.get("model", call.model)
        return model if isinstance(model, str) else None

    def provider(self, call: RecordedCall, forced: ProviderName | None) -> ProviderName | None:
        model = self.model(call)
        if model is None:
            return None
        return forced or provider_for(model, call.provider)


def _values(field_name: str, text: str, cwd: Path) -> list[tuple[str, Any]]:
    if field_name == "system":
        pieces = text.split(",") if text.startswith("@") else [text]
    else:
        pieces = text.split(",")
    if len(pieces) > 2:
        raise ConfigError(
            f"--vary {field_name}: {len(pieces)} values; give one (arm B) or two (A,B)"
        )
    values = []
    for piece in pieces:
        if not piece.strip():
            raise ConfigError(f"--vary {field_name}: an empty value; write FIELD=B or FIELD=A,B")
        values.append((piece, _value(field_name, piece, cwd)))
    return values


def _value(field_name: str, piece: str, cwd: Path) -> Any:
    if field_name == "system":
        if not piece.startswith("@"):
            return piece
        path = cwd / piece[1:]
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise ConfigError(f"--vary system: cannot read {piece[1:]}: {reason}") from None
    if field_name == "model":
        return piece.strip()
    try:
        return json.loads(piece)
    except ValueError:
        return piece


def make_arms(varies: list[str], cwd: Path) -> tuple[Arm, Arm]:
    """Arm A and arm B; ConfigError (exit 2) naming the `--vary` that cannot be used."""
    if not varies:
        raise ConfigError(
            "--vary: required, e.g. --vary model=B (arm B calls B, arm A replays as recorded)"
        )
    a = Arm("A")
    b = Arm("B")
    for given in varies:
        field_name, equals, text = given.partition("=")
        field_name = field_name.strip()
        if not equals or not _FIELD.fullmatch(field_name):
            raise ConfigError(
                f"--vary {given}: write FIELD=VALUE (arm B) or FIELD=A,B, e.g. "
                "--vary model=gpt-4o-mini"
            )
        if field_name in REFUSED:
            raise ConfigError(f"--vary {field_name}: cannot be varied ({REFUSED[field_name]})")
        if field_name in b.changes:
            raise ConfigError(f"--vary {field_name}: given twice; give it once, as FIELD=A,B")
        values = _values(field_name, text, cwd)
        if len(values) == 2:
            a.shown[field_name], a.changes[field_name] = values[0]
        b.shown[field_name], b.changes[field_name] = values[-1]
    return a, b
