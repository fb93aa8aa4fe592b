"""Bodies of the judge routes. A judge is created with a body whose `type` picks its shape."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, ConfigDict, Field, HttpUrl, ValidationInfo, field_validator
from pydantic.alias_generators import to_camel
from pydantic.json_schema import SkipJsonSchema

from neens.api.schemas.agent_connections import refuse_null
from neens.api.schemas.base import NameStr, RequestBody, ResponseBody, StorableStr
from neens.api.schemas.headers import MAX_VALUE_CHARS, check_headers


class _Camel(RequestBody):
    model_config = ConfigDict(
        extra="forbid", use_attribute_docstrings=True, alias_generator=to_camel
    )


def check_api_key(value: str) -> str:
    """An API key that can be sent as it is: `Authorization: Bearer <apiKey>`.

    An empty key would be stored and reported as `hasApiKey: true`, then sent as `Bearer ` and
    refused by the provider; a key with a line break or other control character cannot be sent
    as a header value at all. Both are refused when the judge is created, naming the field,
    rather than on every item a run scores. The value is checked as agent connection headers
    are (`check_headers`), and is never quoted back: it is a secret.
    """
    if not value.strip():
        raise ValueError(
            "an API key cannot be empty or only spaces: leave it out for an endpoint that "
            "needs no key"
        )
    try:
        check_headers({"Authorization": value})
    except ValueError:
        raise ValueError(
            "an API key is sent as the header value `Bearer <apiKey>`, so it must be printable "
            "ASCII (no line breaks, NUL or other control characters), not start or end with a "
            f"space or tab, and be at most {MAX_VALUE_CHARS} characters"
        ) from None
    return value


ApiKey = Annotated[StorableStr, AfterValidator(check_api_key)]
"""An LLM endpoint's API key, checked by `check_api_key`."""


class LlmEndpointIn(_Camel):
    base_url: HttpUrl
    """An OpenAI-compatible API base, e.g. `https://api.openai.com/v1`."""
    model: NameStr = Field(min_length=1, max_length=500)
    """The judge model."""
    api_key: ApiKey | None = None
    """Sent as the bearer token. Stored, never returned."""
    timeout_s: float = Field(default=60.0, gt=0, le=600)
    """Longest one verdict may take, retries included."""

    @field_validator("api_key")
    @classmethod
    def _one_credential(cls, value: str | None, info: ValidationInfo) -> str | None:
        """A base URL with a user and password is sent as Basic authorization, which would
        replace the API key's Bearer header: the key would silently never be sent."""
        url = info.data.get("base_url")
        if value is not None and url is not None and (url.username or url.password):
            raise ValueError(
                "give the API key or a user and password in endpoint.baseUrl, not both: the "
                "URL's credentials would be sent instead of the key"
            )
        return value


class _JudgeCommon(_Camel):
    name: NameStr = Field(min_length=1, max_length=200)
    """A name unique within the project; it names the metric in `/metrics`."""
    enabled: bool = True
    """Disabled judges cannot be picked for new runs."""
    score_production: bool = False
    """Also score production sessions as they arrive."""


class ManagedJudgeIn(_JudgeCommon):
    type: Literal["managed"]
    """A built-in, offline check."""
    check: Literal["exact_match", "contains", "regex", "json_field_match", "fuzzy_similarity"]
    """Which check."""
    config: dict[str, Any] = Field(default_factory=dict)
    """The check's options (see docs/judges.md)."""


class LlmPromptJudgeIn(_JudgeCommon):
    type: Literal["llm_prompt"]
    """A prompt sent to an LLM, whose reply is parsed into a 0..1 score and a reason."""
    template: StorableStr = Field(min_length=1)
    """The prompt, with {input}, {output} and {expected_output} placeholders."""
    endpoint: LlmEndpointIn
    """Where the judge model is served."""


class ComponentIn(_Camel):
    judge_id: str
    """A scoreable judge of the project."""
    weight: float = Field(default=1.0, gt=0, allow_inf_nan=False, strict=True)
    """Its weight in the mean."""


class CompositeJudgeIn(_JudgeCommon):
    type: Literal["composite"]
    """The weighted mean of other judges' scores."""
    components: list[ComponentIn] = Field(min_length=1)
    """The judges combined."""


class ClassifierJudgeIn(_JudgeCommon):
    type: Literal["classifier"]
    """Assigns one of a set of labels (no score): cannot score a run on its own."""
    template: StorableStr = Field(min_length=1)
    """The prompt, with {input}, {output} and {expected_output} placeholders."""
    labels: list[StorableStr] = Field(min_length=2)
    """The labels it may assign."""
    endpoint: LlmEndpointIn
    """Where the classifier model is served."""


JudgeIn = Annotated[
    ManagedJudgeIn | LlmPromptJudgeIn | CompositeJudgeIn | ClassifierJudgeIn,
    Field(discriminator="type"),
]


class JudgeUpdate(_Camel):
    enabled: bool | SkipJsonSchema[None] = None
    """Enable or disable the judge."""
    score_production: bool | SkipJsonSchema[None] = None
    """Score production sessions as they arrive."""
    components: Annotated[list[ComponentIn], Field(min_length=1)] | SkipJsonSchema[None] = None
    """A composite's new components (the Primary Score included)."""

    _not_null = field_validator("enabled", "score_production", "components")(refuse_null)


class JudgeOut(ResponseBody):
    id: str = Field(description="Judge id, `jdg_…`.")
    name: str = Field(description="Name; the metric name in `/metrics`.")
    type: str = Field(description="managed, llm_prompt, composite or classifier.")
    config: dict[str, Any] = Field(description="The judge's settings, secrets left out.")
    has_api_key: bool = Field(description="Whether an API key is stored for its endpoint.")
    enabled: bool = Field(description="Whether it can be picked for new runs.")
    score_production: bool = Field(description="Whether it scores production sessions.")
    is_primary: bool = Field(description="Whether this is the project's Primary Score.")
    created_at: datetime = Field(description="Created (UTC).")


class JudgeList(ResponseBody):
    judges: list[JudgeOut] = Field(description="Judges, oldest first.")
