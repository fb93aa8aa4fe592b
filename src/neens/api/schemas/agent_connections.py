"""Bodies of the agent-connection routes."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, ConfigDict, Field, HttpUrl, field_validator
from pydantic.alias_generators import to_camel
from pydantic.json_schema import SkipJsonSchema

from neens.api.schemas.base import NameStr, RequestBody, ResponseBody, StorableStr, a_name
from neens.api.schemas.headers import Headers
from neens.domain.json_path import parse_path

RequestFormat = Literal["chat", "neens"]


class _CamelRequest(RequestBody):
    model_config = ConfigDict(
        extra="forbid", use_attribute_docstrings=True, alias_generator=to_camel
    )


def _check_path(value: str | None) -> str | None:
    if value is not None:
        parse_path(value, field="answerPath")
    return value


def refuse_null(value: object) -> object:
    """A PATCH field that may be left out but not set to null: the stored value cannot be
    empty, and a null that slipped through would break every later read."""
    if value is None:
        raise ValueError("cannot be null; leave it out to keep its value")
    return value


class ConnectionCreate(_CamelRequest):
    name: NameStr = Field(min_length=1, max_length=200)
    """A name unique within the project, e.g. `support-agent-haiku`."""
    url: HttpUrl
    """The endpoint Neens POSTs each golden prompt to."""
    model: NameStr | None = Field(default=None, max_length=500)
    """The model behind the endpoint. Copied onto each run at create; null when not declared."""
    provider: NameStr = Field(default="agent_http", min_length=1, max_length=100)
    """How Neens reaches the endpoint; `agent_http` for an HTTP agent endpoint. Not blank, no
    control characters: runs copy it and show it."""
    request_format: RequestFormat = "chat"
    """`chat`: OpenAI-style `{"model", "messages"}`, answer at `choices[0].message.content`.
    `neens`: `{"input", "eval_run_id", "dataset_item_id", "version_label"}`, answer at
    `output`."""
    answer_path: StorableStr | None = Field(default=None, max_length=500)
    """Where the answer is in the endpoint's JSON reply, e.g. `data.answer`; overrides the
    format's default."""
    headers: Headers = Field(default_factory=dict)
    """Headers sent with each call (e.g. an API key). Stored encrypted, never returned."""

    _path = field_validator("answer_path")(_check_path)


class ConnectionUpdate(_CamelRequest):
    """Fields to change; runs already created keep the model they copied."""

    # Plain `str` inside the unions: the constraints then apply to the string itself (a
    # validator in front would word them for any sized value); `RequestBody` checks that the
    # text is storable.
    name: (
        Annotated[str, Field(min_length=1, max_length=200), AfterValidator(a_name)]
        | SkipJsonSchema[None]
    ) = None
    """A new name, unique within the project."""
    url: HttpUrl | SkipJsonSchema[None] = None
    """A new endpoint URL. Unless `headers` is given too, the stored headers are dropped (they
    were meant for the old URL); the response lists them in `droppedHeaderNames`."""
    model: NameStr | None = Field(default=None, max_length=500)
    """A new model (affects runs created from now on); null clears it."""
    provider: (
        Annotated[str, Field(min_length=1, max_length=100), AfterValidator(a_name)]
        | SkipJsonSchema[None]
    ) = None
    """A new provider."""
    request_format: RequestFormat | SkipJsonSchema[None] = None
    """A new request format."""
    answer_path: StorableStr | None = Field(default=None, max_length=500)
    """A new answer path; null goes back to the format's default."""
    headers: Headers | SkipJsonSchema[None] = None
    """Replaces all headers (`{}` removes them)."""

    _path = field_validator("answer_path")(_check_path)
    _not_null = field_validator("name", "url", "provider", "request_format", "headers")(refuse_null)


class ConnectionOut(ResponseBody):
    id: str = Field(description="Connection id, `conn_…`.")
    name: str = Field(description="Name, unique within the project.")
    url: str = Field(description="The endpoint Neens calls.")
    model: str | None = Field(description="The declared model, or null.")
    provider: str = Field(description="How Neens reaches the endpoint (`agent_http`).")
    request_format: RequestFormat = Field(description="`chat` or `neens`.")
    answer_path: str | None = Field(description="Where the answer is read, or null for default.")
    header_names: list[str] = Field(description="Names of the stored headers; values are secret.")
    created_at: datetime = Field(description="When the connection was created (UTC).")
    updated_at: datetime = Field(description="When it was last changed (UTC).")


class ConnectionUpdated(ConnectionOut):
    dropped_header_names: list[str] = Field(
        description="Headers this change removed because it gave a new `url` without "
        "`headers`: set them again if the new endpoint needs them. Empty otherwise."
    )


class ConnectionList(ResponseBody):
    agent_connections: list[ConnectionOut] = Field(description="Connections, oldest first.")
