"""Base classes for request and response bodies."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationInfo, field_validator
from pydantic.alias_generators import to_camel

from neens.domain.storable import name_problem, unstorable_problem, unstorable_text_reason


class LocatedValueError(ValueError):
    """A validator's error about a part of its field's value: the 422 names the field followed
    by `where` (`baseline.value`, `gate.cost.max_avg_usd`, `judge_deployment_ids[1]`)."""

    def __init__(self, message: str, where: tuple[str | int, ...]) -> None:
        super().__init__(message)
        self.where = where


class RequestBody(BaseModel):
    """A request body: unknown fields are refused, so a typo never silently drops data.

    Every field's value is checked to be storable (`neens.domain.storable`): no text in a
    request body, whether stored or only used to look something up, may hold a NUL character or
    a lone surrogate, which PostgreSQL refuses and UTF-8 cannot encode. A field of any type is
    covered, a field added later too, and the 422 names the field, on both databases alike.
    """

    # A NaN or an infinity (`NaN`, `Infinity`, `1e999` in the JSON) is refused by every number
    # field: stored, it would come back as null, which means "not recorded".
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False)

    _checked_by_type: ClassVar[frozenset[str]] = frozenset()
    """The fields whose own type (`StorableJson`, `StorableStr`) checks them first."""

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls._checked_by_type = frozenset(
            name
            for name, field in cls.model_fields.items()
            if any(getattr(meta, "func", None) is _storable for meta in field.metadata)
        )

    @field_validator("*", mode="after")
    @classmethod
    def _storable_field(cls, value: Any, info: ValidationInfo) -> Any:
        # Runs for every field of every body (a span's fourteen at ingest), so what holds no
        # unchecked text is let through at once: a number, None, a nested body (it checks its
        # own fields), a list of bodies, and a field its own type has just checked.
        kind = type(value)
        if kind is str:
            if value.isascii() and "\x00" not in value:
                return value
        elif kind is list or kind is tuple:
            # A list's items are all of its one item type: bodies, or values to walk.
            if not value or isinstance(value[0], BaseModel):
                return value
        elif kind is set or kind is frozenset:
            _storable(list(value))
            return value
        elif kind is not dict or info.field_name in cls._checked_by_type:
            return value
        return _storable(value)


class ResponseBody(BaseModel):
    """A response body: camelCase on the wire."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, serialize_by_alias=True
    )


def _storable(value: Any) -> Any:
    problem = unstorable_problem(value)
    if problem is not None:
        where, reason = problem
        raise LocatedValueError(reason, tuple(where))
    return value


StorableStr = Annotated[str, AfterValidator(_storable)]
"""Text that both databases can store exactly (no NUL characters, no lone surrogates)."""


def a_name(value: str) -> str:
    """A name people read in lists, pages and charts (`name_problem`), naming where a control
    character is."""
    problem = name_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


NameStr = Annotated[str, AfterValidator(_storable), AfterValidator(a_name)]
"""A name, label or model name: storable, not blank, no control characters."""

StorableJson = Annotated[dict[str, Any], AfterValidator(_storable)]


def error_message(err: Mapping[str, Any]) -> str:
    """One pydantic error's message as an answer states it after the field's path: our own
    validators' words without pydantic's "Value error, " prefix, and a string's length in
    characters (pydantic words a length checked after a validator as "items")."""
    kind = err.get("type")
    ctx = err.get("ctx")
    if kind == "value_error" and isinstance(ctx, dict) and "error" in ctx:
        return str(ctx["error"])
    if kind == "string_unicode":
        # A lone surrogate in a constrained string, refused before our own check sees it (or,
        # located at the object, in an unknown key of it).
        return unstorable_text_reason(err.get("input")) or str(err.get("msg", "is invalid"))
    if kind in ("too_short", "too_long") and isinstance(err.get("input"), str):
        key = "min_length" if kind == "too_short" else "max_length"
        bound = ctx.get(key) if isinstance(ctx, dict) else None
        if not isinstance(bound, int):
            return "String is too short" if kind == "too_short" else "String is too long"
        side = "at least" if kind == "too_short" else "at most"
        return f"String should have {side} {bound} character{'' if bound == 1 else 's'}"
    return str(err.get("msg", "is invalid"))
