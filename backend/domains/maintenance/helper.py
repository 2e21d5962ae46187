"""The organisation's helper model (PLT-1) as maintenance uses it: which model, whether it may read a person's
material, how what it reads is hidden, and one JSON question."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from backend.access.context import RequestContext
from backend.access.policy import Requester, parse_policy, rule_matches
from backend.domains.models import repository as models_repo
from backend.domains.models.service import spec_of
from backend.domains.usage import repository as usage
from backend.providers.chat import CallOptions, ModelError, ModelSpec, complete
from backend.providers.pii.detector import DefaultDetector, detector_for

log = logging.getLogger("coremem.maintenance")
JOB = "maintenance"  # the usage rows' `job`


@dataclass(frozen=True)
class HelperSpec(ModelSpec):
    """The helper model with the deployment's CORE_MODEL_TIMEOUT_SECONDS and CORE_MODEL_MAX_RETRIES (EXT-1): the
    questions are asked later with no context at hand, so the spec carries them."""

    timeout_seconds: float = 60.0
    max_retries: int = 2


async def helper_spec(ctx: RequestContext) -> ModelSpec | None:
    """The organisation's `helper_model` when it names a model offered to it (with that provider); else None:
    maintenance then asks no model (lessons, general-knowledge judgements and contested marking wait)."""
    helper = ctx.org.get("helper_model") or {}
    if not helper.get("model"):
        return None
    row = await models_repo.find(ctx.db, ctx.org_id, helper["model"])
    if row is None or row["provider"] != helper.get("provider", row["provider"]):
        log.warning("maintenance: helper model %r of %s is not offered", helper, ctx.org_id)
        return None
    return HelperSpec(**asdict(spec_of(row)), timeout_seconds=ctx.settings.model_timeout_seconds,
                      max_retries=ctx.settings.model_max_retries)


def may_read(org: Mapping[str, Any], person: str | None) -> bool:
    """EXT-14: the helper model reads nothing of a person whose rules keep her conversations from being read: an
    organisation-level `deny` rule of kind `thread` covering `see` that matches her threads (owner = her)."""
    if person is None:
        return True
    policy = parse_policy(org.get("policy") or {"rules": []}, org_level=True)
    return not any(rule.effect == "deny" and rule.covers("thread", "see")
                   and rule_matches(rule, Requester(None), person, {}) for rule in policy.rules)


def hide(text: str, detector_path: str) -> str | None:
    """The text with personal data replaced by placeholders of its kind (`<EMAIL_1>`); None when it cannot be
    hidden (then it is not sent)."""
    try:
        spans = sorted(detector_for(detector_path).detect(text), key=lambda s: s.start)
    except Exception:  # an operator's detector may fail in any way; then nothing is sent
        return None
    out: list[str] = []
    at = 0
    counts: dict[str, int] = {}
    for span in spans:
        if span.start < at or span.end > len(text):
            return None
        counts[span.kind] = counts.get(span.kind, 0) + 1
        out.append(text[at:span.start] + f"<{span.kind}_{counts[span.kind]}>")
        at = span.end
    return "".join(out) + text[at:]


def names_personal_data(text: str, people: Sequence[str]) -> bool:
    """EXT-15: a fact about a person, or one holding an address, phone number, e-mail address or link: anything
    the default detector finds (names, addresses, phones, e-mail, URLs, IBANs, cards) or a person's id."""
    if DefaultDetector().detect(text):
        return True
    words = {w.strip(".,;:!?()\"'").casefold() for w in text.split()}
    return any(p.casefold() in words for p in people)


@dataclass(frozen=True)
class Asked:
    """A helper model's answer (None when the call failed or the answer was not the asked JSON object) and the
    tokens it cost, metered afterwards in the transaction that uses it."""

    answer: dict[str, Any] | None
    model: str
    input_tokens: int
    output_tokens: int


async def ask(spec: ModelSpec, system: str, user: str, schema: dict[str, Any]) -> Asked:
    """One question with a JSON-schema answer, asked while no transaction is open."""
    limits = CallOptions(spec.timeout_seconds, spec.max_retries) if isinstance(spec, HelperSpec) else CallOptions()
    options = replace(limits, temperature=0.0, response_format={"type": "json_schema", "json_schema": {
        "name": "maintenance", "schema": schema}})
    try:
        answer = await complete(spec, [{"role": "system", "content": system}, {"role": "user", "content": user}],
                                options=options)
    except ModelError as error:
        log.warning("maintenance: a helper model call failed: %s", error)
        return Asked(None, spec.id, error.input_tokens, error.output_tokens)
    try:
        parsed = json.loads(answer.content or "")
    except ValueError:
        parsed = None
    return Asked(parsed if isinstance(parsed, dict) else None, spec.id, answer.input_tokens, answer.output_tokens)


async def meter(ctx: RequestContext, asked: Asked) -> None:
    """Its tokens are metered to no key, `job: maintenance` (PLT-18)."""
    if asked.input_tokens or asked.output_tokens:
        await usage.record(ctx.db, org_id=ctx.org_id, model=asked.model, input_tokens=asked.input_tokens,
                           output_tokens=asked.output_tokens, job=JOB)
