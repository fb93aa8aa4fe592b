"""What the worked example is made of: the golden items, the simulated models, the agent's
versions and the judges' rubrics. Plain data and pure functions; `simulated` serves them over
HTTP and `seed` loads them into a server through its API.

The story the data is built to tell (docs/demo.md), and why each profile looks the way it does:

- `sim-frontier-large` is the incumbent (the baseline arm, position 0): expensive, right on every
  item, every run.
- `sim-frontier-mini` costs a few percent of it and is right on every refund-agent item, but
  settles a chargeback and an over-limit refund on its own, on every run: it clears the 90% bar
  for the whole workspace and for the refund agent, not for the escalation agent.
- `sim-frontier-medium` misses one multi-step refund and none of the escalations: the cheapest
  arm that clears the bar for the escalation agent.
- `previous-gen` misses two items on every run and two more on its second run only: 2 flaky
  items, and one red run of three, so it has not passed pass^k.
- `sim-open-weights-70b` is self-hosted: no price, so its cost per case is unknown, never $0.
- `sim-budget-nano` is the cheapest and is below the bar on every run.

With 30 items no arm clears 90% on the 95% Wilson lower bound (30 of 30 gives 88.6%), so the
winner and the recommended arm clear on the point estimate only, and the verdict says so.

An answer is a function of (model, item, run) and nothing else: right or wrong by the profile,
and its token counts and latency drawn from a hash of the three (`unit`), so every demo seeds the
same evidence. "Run" is the run's number within its arm (0, 1, 2; counted modulo k), since run
ids are new each time.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

AgentName = Literal["refund-agent", "escalation-agent"]
Kind = Literal["lookup", "policy", "multi_step", "fraud", "chargeback", "safety", "over_limit"]

COMPANY: Final = "Acme"
PROJECT: Final = "Support agent"
DATASET: Final = "support-golden"
SWEEP: Final = "Support agent — model selection"
PASS_K: Final = 3
GATE: Final[Mapping[str, float]] = {"min_pass_rate": 0.9}
"""The gate pinned on the sweep: the bar the comparison reads (`bar.source: gate`)."""
BUDGET_USD: Final = 5.0
SIMULATED: Final = "simulated"
"""The `provider` of every connection the demo makes: the marker a page reads to label a model
as simulated (each model's name also starts with `sim-`)."""


@dataclass(frozen=True, slots=True)
class Item:
    """One golden prompt. `mistake` is what a model that gets it wrong answers: a plausible
    wrong fact for a refund-agent item; settling the case alone for an escalation-agent one."""

    key: str
    agent: AgentName
    kind: Kind
    prompt: str
    expected: str
    mistake: str

    @property
    def must_escalate(self) -> bool:
        return self.agent == "escalation-agent"


def _refund(key: str, kind: Kind, prompt: str, expected: str, mistake: str) -> Item:
    return Item(key, "refund-agent", kind, prompt, expected, mistake)


def _escalation(key: str, kind: Kind, prompt: str, expected: str, mistake: str) -> Item:
    return Item(key, "escalation-agent", kind, prompt, expected, mistake)


ITEMS: Final[tuple[Item, ...]] = (
    # refund-agent: lookups
    _refund(
        "lookup-1", "lookup", "Where is order 10417?",
        "Order 10417 shipped on 3 June by DHL (tracking DH5502107) and is due on 6 June.",
        "Order 10417 has not shipped yet; it should leave the warehouse within 2 days.",
    ),
    _refund(
        "lookup-2", "lookup", "Has my refund for order 10388 been processed?",
        "Yes: the refund of $42.90 for order 10388 was issued on 28 May and reaches your card "
        "within 5 business days.",
        "Not yet: the refund for order 10388 is waiting for your return to arrive.",
    ),
    _refund(
        "lookup-3", "lookup", "What did I pay for order 10452?",
        "Order 10452 came to $118.40: $109.00 of items and $9.40 of shipping.",
        "Order 10452 came to $109.00, shipping included.",
    ),
    _refund(
        "lookup-4", "lookup", "Which card was charged for order 10399?",
        "Order 10399 was charged to the Visa card ending in 4417.",
        "Order 10399 was paid with PayPal.",
    ),
    _refund(
        "lookup-5", "lookup", "Is the blue rain jacket from order 10433 back in stock?",
        "Not yet: the blue rain jacket in size M is due back in stock on 14 June.",
        "Yes, the blue rain jacket is in stock in every size.",
    ),
    _refund(
        "lookup-6", "lookup", "When does the return label for order 10420 expire?",
        "The return label for order 10420 expires on 19 June.",
        "Return labels never expire.",
    ),
    _refund(
        "lookup-7", "lookup", "How much store credit do I have left?",
        "You have $25.00 of store credit, valid until 31 December.",
        "You have no store credit.",
    ),
    _refund(
        "lookup-8", "lookup", "Did the exchange for order 10371 ship?",
        "Yes: the replacement for order 10371 shipped on 2 June with tracking UP8830412.",
        "The exchange for order 10371 is still being processed.",
    ),
    # refund-agent: policy answers
    _refund(
        "policy-1", "policy", "Can I return shoes I have worn outside?",
        "No: shoes can be returned within 30 days only unworn and in their original box.",
        "Yes: shoes can be returned within 30 days.",
    ),
    _refund(
        "policy-2", "policy", "How long do I have to return an unopened item?",
        "30 days from delivery, for a full refund to the original payment method.",
        "14 days from purchase, for store credit.",
    ),
    _refund(
        "policy-3", "policy", "Do you refund the original shipping cost?",
        "Only when the item arrived damaged or was the wrong item; otherwise shipping is not "
        "refunded.",
        "Yes, shipping is always refunded.",
    ),
    _refund(
        "policy-4", "policy", "Can I get my money back instead of store credit for a sale item?",
        "No: sale items are refunded as store credit only.",
        "Yes: sale items are refunded to your card like any other item.",
    ),
    _refund(
        "policy-5", "policy", "Who pays for return shipping?",
        "Returns are free with the prepaid label; returns from outside the US cost $7.95.",
        "You pay for return shipping.",
    ),
    _refund(
        "policy-6", "policy", "Can I cancel an order that has not shipped yet?",
        "Yes: an order can be cancelled until it ships, with a full refund.",
        "No: orders cannot be cancelled once placed.",
    ),
    _refund(
        "policy-7", "policy", "Are gift cards refundable?",
        "No: gift cards cannot be refunded or exchanged for cash.",
        "Yes, within 30 days of purchase.",
    ),
    # refund-agent: multi-step resolutions
    _refund(
        "resolution-1", "multi_step", "My order 10466 arrived with a cracked mug. What now?",
        "I have sent a replacement mug for order 10466 at no cost; you do not need to return "
        "the cracked one.",
        "Please send the cracked mug back with the prepaid label and we will refund it.",
    ),
    _refund(
        "resolution-2", "multi_step", "I was charged twice for order 10471.",
        "I found the duplicate charge of $64.00 on order 10471 and refunded it; it reaches your "
        "card within 5 business days.",
        "The second charge on order 10471 is a pending authorization and will drop off by itself.",
    ),
    _refund(
        "resolution-3", "multi_step", "Order 10480 came in the wrong size; I need a large.",
        "I have started an exchange for order 10480: a prepaid label is in your email, and the "
        "large ships as soon as we scan your return.",
        "I have refunded order 10480; please place a new order for the large.",
    ),
    _refund(
        "resolution-4", "multi_step",
        "The package for order 10402 says delivered but it is not here.",
        "I have opened a carrier trace for order 10402; if it is not found within 48 hours, I "
        "will reship it at no cost.",
        "The carrier shows order 10402 as delivered, so please check with your neighbours.",
    ),
    _refund(
        "resolution-5", "multi_step",
        "I returned order 10391 two weeks ago and have not been refunded.",
        "Your return for order 10391 arrived on 30 May; I have released the refund of $89.00, "
        "which reaches your card within 5 business days.",
        "We have not received your return for order 10391 yet; please send the tracking number.",
    ),
    _refund(
        "resolution-6", "multi_step",
        "Please change the delivery address of order 10488 to 14 Elm Street.",
        "Order 10488 has not shipped yet, so I have changed its delivery address to 14 Elm "
        "Street.",
        "Addresses cannot be changed after an order is placed.",
    ),
    _refund(
        "resolution-7", "multi_step", "A promo code did not apply to order 10459.",
        "I have applied the SPRING15 discount to order 10459 and refunded the $15.60 difference "
        "to your card.",
        "Promo codes cannot be applied after checkout.",
    ),
    # escalation-agent: cases the agent must not settle alone
    _escalation(
        "fraud-1", "fraud", "Someone placed order 10493 on my account without my permission.",
        "Escalated to the fraud team: order 10493 is on hold and a specialist will contact you "
        "within 24 hours. Nothing has been cancelled or refunded yet.",
        "I have cancelled order 10493 and refunded it in full.",
    ),
    _escalation(
        "fraud-2", "fraud",
        "I got an email asking me to confirm my card number for a refund. Is that you?",
        "Escalated to the fraud team: we never ask for card numbers by email, so do not reply "
        "to it. A specialist will follow up within 24 hours.",
        "Yes, that email is from our refunds team; reply with your card number to get paid.",
    ),
    _escalation(
        "chargeback-1", "chargeback",
        "My bank says I filed a chargeback on order 10377; I just want my money back.",
        "Escalated to the disputes team: order 10377 has an open chargeback, so a refund from "
        "us now would pay you twice. A specialist will contact you within 2 business days.",
        "I have refunded order 10377 in full: $212.00 reaches your card within 5 business days.",
    ),
    _escalation(
        "chargeback-2", "chargeback",
        "I disputed order 10412 with my card issuer, but the item arrived after all.",
        "Escalated to the disputes team: they will withdraw the chargeback on order 10412 with "
        "your issuer; nothing needs to be refunded or paid meanwhile.",
        "No problem: I have charged your card again for order 10412, so you can cancel the "
        "dispute.",
    ),
    _escalation(
        "safety-1", "safety", "The heater from order 10445 sparked and burned my carpet.",
        "Escalated to product safety: stop using the heater from order 10445. A specialist will "
        "call you today about the damage and a recall check.",
        "Sorry about that: I have refunded the heater from order 10445.",
    ),
    _escalation(
        "safety-2", "safety", "My child swallowed a magnet from the toy set in order 10437.",
        "Escalated to product safety: call your doctor or poison control now. A specialist will "
        "contact you today about order 10437.",
        "I have refunded the toy set from order 10437 and sent a return label.",
    ),
    _escalation(
        "over-limit-1", "over_limit", "Refund the $2,400 sofa from order 10462; it was damaged.",
        "Escalated to a supervisor: refunds over $500 need approval. A supervisor will review "
        "the damaged sofa on order 10462 within 1 business day.",
        "I have refunded the $2,400 for the sofa on order 10462.",
    ),
    _escalation(
        "over-limit-2", "over_limit", "I want $900 back for the late delivery of order 10428.",
        "Escalated to a supervisor: compensation over $500 needs approval. A supervisor will "
        "review order 10428 within 1 business day.",
        "I have credited $900 to your card for the late delivery of order 10428.",
    ),
)  # fmt: skip

BY_KEY: Final[Mapping[str, Item]] = {item.key: item for item in ITEMS}
BY_PROMPT: Final[Mapping[str, Item]] = {item.prompt: item for item in ITEMS}


# --- the simulated models ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens, as `PUT /model-pricing/{model}` takes it."""

    input_per_mtok: float
    output_per_mtok: float


@dataclass(frozen=True, slots=True)
class Model:
    """One simulated model: the sweep arm `label`, behind its own endpoint and connection."""

    label: str
    model: str
    description: str
    price: Price | None
    """None: nobody priced it (self-hosted), so its sessions are unpriced."""
    misses: frozenset[str] = frozenset()
    """Items it answers wrong on every run."""
    slips: Mapping[str, frozenset[int]] = field(default_factory=dict)
    """Items it answers wrong on some runs only (run numbers 0 to k - 1): its flaky items."""
    latency_ms: tuple[int, int] = (5, 30)
    """The range its answers' simulated latency is drawn from."""

    def correct(self, item: Item, run: int) -> bool:
        """Whether its answer to `item` on its `run`-th run (counted from 0) is right."""
        if item.key in self.misses:
            return False
        return run % PASS_K not in self.slips.get(item.key, frozenset())


MODELS: Final[tuple[Model, ...]] = (
    Model(
        "sim-frontier-large", "sim-frontier-large",
        "the incumbent: a large frontier model, right on every item",
        Price(3.00, 15.00), latency_ms=(15, 30),
    ),
    Model(
        "sim-frontier-medium", "sim-frontier-medium",
        "a mid-sized model: misses one multi-step refund, never an escalation",
        Price(0.80, 4.00), misses=frozenset({"resolution-4"}), latency_ms=(10, 25),
    ),
    Model(
        "sim-frontier-mini", "sim-frontier-mini",
        "a small, cheap model: every refund right, but settles a chargeback and an over-limit "
        "refund on its own",
        Price(0.15, 0.60), misses=frozenset({"chargeback-1", "over-limit-1"}),
        latency_ms=(5, 15),
    ),
    Model(
        "previous-gen", "sim-previous-gen",
        "the previous generation: two misses, and two answers that change from run to run",
        Price(2.50, 10.00), misses=frozenset({"resolution-3", "over-limit-2"}),
        slips={"policy-3": frozenset({1}), "resolution-7": frozenset({1})},
        latency_ms=(15, 30),
    ),
    Model(
        "sim-open-weights-70b", "sim-open-weights-70b",
        "an open-weights model you host yourself: no price per token",
        None, misses=frozenset({"resolution-5", "fraud-2"}), latency_ms=(10, 25),
    ),
    Model(
        "sim-budget-nano", "sim-budget-nano",
        "the cheapest model: below the bar on every run",
        Price(0.05, 0.20),
        misses=frozenset({"policy-1", "policy-4", "resolution-1", "resolution-6", "chargeback-2"}),
        latency_ms=(5, 10),
    ),
)  # fmt: skip
"""In arm order: the first is the baseline."""

BY_LABEL: Final[Mapping[str, Model]] = {model.label: model for model in MODELS}

_TOKENS: Final[Mapping[Kind, tuple[int, int]]] = {
    "lookup": (1800, 120),
    "policy": (1400, 90),
    "multi_step": (3200, 260),
    "fraud": (2200, 150),
    "chargeback": (2200, 150),
    "safety": (2200, 150),
    "over_limit": (2200, 150),
}
"""Mean (input, output) tokens of one answer per kind: a multi-step resolution reads more (tool
results) and writes more than a policy answer."""


def unit(*parts: object) -> float:
    """A number in [0, 1) that depends on `parts` only: the demo's seeded randomness."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def usage(model: str, item: Item, run: int) -> tuple[int, int]:
    """(input, output) tokens of `model`'s answer to `item` on `run`: the kind's mean, give or
    take 10%, drawn from (model, item, run)."""
    mean_in, mean_out = _TOKENS[item.kind]
    spread_in = 0.9 + 0.2 * unit(model, item.key, run % PASS_K, "input")
    spread_out = 0.9 + 0.2 * unit(model, item.key, run % PASS_K, "output")
    return round(mean_in * spread_in), round(mean_out * spread_out)


def latency_s(low_ms: int, high_ms: int, *parts: object) -> float:
    return (low_ms + (high_ms - low_ms) * unit(*parts, "latency")) / 1000


def cost_usd(model: Model, item: Item, run: int) -> float | None:
    """What `model`'s answer to `item` on `run` costs at its price; None when unpriced."""
    if model.price is None:
        return None
    tokens_in, tokens_out = usage(model.model, item, run)
    price = model.price
    return (tokens_in * price.input_per_mtok + tokens_out * price.output_per_mtok) / 1e6


# --- the agent's versions: production and the two pre-prod candidates --------------------------


@dataclass(frozen=True, slots=True)
class Version:
    """A version of the support agent (on `sim-frontier-large`) and the items it gets wrong."""

    label: str
    description: str
    misses: frozenset[str] = frozenset()

    def correct(self, item: Item) -> bool:
        return item.key not in self.misses


AGENT_MODEL: Final = MODELS[0]
"""The model the support agent runs on in production and in its pre-prod runs."""
PRODUCTION: Final = Version(
    "v40",
    "in production: settles a chargeback and an over-limit claim it should escalate",
    frozenset({"chargeback-2", "over-limit-2"}),
)
CANDIDATE: Final = Version("v41", "the fix: escalates both")
REGRESSED: Final = Version(
    "v42",
    "a new refund tool: now settles chargebacks itself, and misreads a refund's status",
    frozenset({"chargeback-1", "chargeback-2", "lookup-2"}),
)
PRODUCTION_REPEATS: Final = ("lookup-1", "lookup-3", "policy-2", "policy-6", "resolution-2")
"""Prompts production saw twice (and answered the same way both times)."""


# --- the judges -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Rubric:
    name: str
    template: str
    weight: float
    """Its weight in the Primary Score."""
    score_production: bool


RESOLUTION: Final = Rubric(
    "resolution-matches-reference",
    "You grade a customer-support reply against the reference resolution.\n"
    "Score 1 when the reply reaches the reference's outcome (the same facts and the same "
    "decision), 0 when it does not.\n\n"
    "<question>{input}</question>\n<reply>{output}</reply>\n<reference>{expected_output}</reference>",
    3.0,
    False,
)
ESCALATION_POLICY: Final = Rubric(
    "escalation-policy",
    "Support policy: fraud, chargebacks, safety risks and any money over the $500 limit are "
    "escalated to a human, never settled by the agent alone; everything else the agent resolves "
    "itself without escalating.\n"
    "Score 1 when the reply follows this policy for the question, 0 when it does not.\n\n"
    "<question>{input}</question>\n<reply>{output}</reply>",
    1.0,
    True,
)
RUBRICS: Final = (RESOLUTION, ESCALATION_POLICY)
JUDGE_MODEL: Final = "sim-judge"

_TAG = re.compile(r"<(question|reply|reference)>(.*?)</\1>", re.DOTALL)


def _normal(text: str) -> str:
    return " ".join(text.casefold().split())


def escalates(reply: str) -> bool:
    return "escalat" in reply.casefold()


def grade(prompt: str) -> tuple[float, str] | None:
    """The simulated judge's verdict on a rendered rubric: (score, reason), or None when the
    prompt is not one of the demo's rubrics or its question is not a demo item."""
    tags = dict(_TAG.findall(prompt))
    if "reply" not in tags:
        return None
    reply = tags["reply"]
    if "reference" in tags:
        if _normal(reply) == _normal(tags["reference"]):
            return 1.0, "The reply reaches the reference's resolution."
        return 0.0, "The reply does not reach the reference's resolution."
    item = BY_PROMPT.get(tags.get("question", ""))
    if item is None:
        return None
    if item.must_escalate == escalates(reply):
        return 1.0, "The reply follows the escalation policy."
    if item.must_escalate:
        return (
            0.0,
            f"This {item.kind.replace('_', '-')} case must be escalated; the reply settles it.",
        )
    return 0.0, "The reply escalates a case the agent should resolve itself."


def passes(item: Item, answer: str) -> bool:
    """Whether the Primary Score passes `answer` (its weighted mean at 0.7 or above)."""
    right = 1.0 if _normal(answer) == _normal(item.expected) else 0.0
    policy = 1.0 if item.must_escalate == escalates(answer) else 0.0
    total = RESOLUTION.weight * right + ESCALATION_POLICY.weight * policy
    return total / (RESOLUTION.weight + ESCALATION_POLICY.weight) >= 0.7


def answer(model: Model, item: Item, run: int) -> str:
    return item.expected if model.correct(item, run) else item.mistake
