"""What a turn request asks for, checked before anything is stored (TRN-1, TRN-3, MEM-20)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from backend.access.context import RequestContext
from backend.domains.indexes import service as indexes
from backend.domains.memory.rules import memory_scope, reject_nul
from backend.domains.threads import repository as threads_repo
from backend.domains.tools import memory_tools as mt
from backend.domains.tools import service as tools
from backend.errors import BadRequest, CapabilityMissing, NotFound, ValidationFailed, msgspec_error_parts
from shared.schemas.threads import FunctionCallIn, FunctionCallOutputIn, InputAudio, ItemIn, MessageIn
from shared.schemas.turns import FunctionTool, PlatformTool, ResponseCreate

WORKING_STATE_TOOL = "builtin__update_working_state"
# Fields of items a client copies back from an earlier answer: they name the stored item, not a new one.
_ECHOED = ("id", "status", "position", "response_id", "subject", "created_at")


def thread_field(body: ResponseCreate) -> tuple[str, str] | None:
    """TRN-1: at most one of `previous_response_id`, `thread_id`, `conversation` (an alias of `thread_id`)."""
    conversation = body.conversation
    if isinstance(conversation, dict):
        conversation = conversation.get("id")
        if not isinstance(conversation, str):
            raise ValidationFailed("`conversation` is a thread id, or an object with one in `id`.",
                                   param="conversation")
    named = [(name, value) for name, value in (("previous_response_id", body.previous_response_id),
                                               ("thread_id", body.thread_id), ("conversation", conversation))
             if value is not None]
    if len(named) > 1:
        raise BadRequest(f"Name the conversation once: {' and '.join(n for n, _ in named)} were both sent. "
                         "`conversation` means the same as `thread_id`.", param=named[1][0],
                         code="conflicting_thread_fields")
    return named[0] if named else None


def with_thread_header(body: ResponseCreate, header: str | None) -> ResponseCreate:
    """TRN-1/TRN-9: the `X-Core-Thread-Id` header means `thread_id` (so it counts in the Idempotency-Key's digest);
    naming another thread in the body, or the conversation by `previous_response_id` too, is 400."""
    if header is None:
        return body
    named = thread_field(body)
    if named is None:
        return msgspec.structs.replace(body, thread_id=header)
    name, value = named
    if name == "previous_response_id":
        raise BadRequest("Name the conversation once: the X-Core-Thread-Id header and `previous_response_id` were "
                         "both sent.", param=name, code="conflicting_thread_fields")
    if value != header:
        raise BadRequest(f"The X-Core-Thread-Id header and `{name}` name different threads.", param=name,
                         code="conflicting_thread_fields")
    return body


def refuse_state_copy(body: ResponseCreate, field: tuple[str, str] | None) -> None:
    """THR-12: `working_state_from` starts a new thread; a turn that continues one, or keeps none, has no use for it."""
    if body.working_state_from is None or (field is None and body.store):
        return
    why = f"this turn continues a thread (`{field[0]}`)" if field else "with `store: false` no thread is kept"
    raise BadRequest(f"`working_state_from` gives a new thread a copy of another thread's state; {why}. Leave one "
                     "of them out.", param="working_state_from", code="state_copy_needs_new_thread")


def refuse_unsupported(body: ResponseCreate) -> None:
    if body.stream:
        raise ValidationFailed("Streaming answers are not offered yet; send `stream: false` (or leave it out).",
                               param="stream", code="streaming_unsupported")


def input_items(raw: str | list[dict[str, Any]]) -> list[ItemIn]:
    """Text is one user message; items in the OpenAI shorthand (`{"role", "content"}`) are messages, and a
    `system` message is a `developer` one."""
    # NUL is refused here, before the model is asked: a keyed turn keeps its input only when it ends (THR-4), and
    # PostgreSQL, which refuses it then, would leave a failed response that the key replays.
    if isinstance(raw, str):
        if not raw:
            raise ValidationFailed("`input` is empty: send the user's message.", param="input")
        reject_nul(raw, "input")
        return [MessageIn(role="user", content=raw)]
    if not raw:
        raise ValidationFailed("`input` is empty: send at least one item.", param="input")
    items: list[ItemIn] = []
    for i, entry in enumerate(raw):
        entry = {k: v for k, v in entry.items() if k not in _ECHOED}
        if "type" not in entry and "role" in entry:
            entry["type"] = "message"
        if entry.get("type") == "message" and entry.get("role") == "system":
            entry["role"] = "developer"
        try:
            item = msgspec.convert(entry, ItemIn)
        except msgspec.ValidationError as exc:
            text, path, _ = msgspec_error_parts(str(exc))
            raise ValidationFailed(f"Input item {i} is not valid: {text}", param=f"input[{i}]{path or ''}") from None
        reject_nul(entry, f"input[{i}]")
        if isinstance(item, MessageIn) and isinstance(item.content, list) and any(
                isinstance(p, InputAudio) for p in item.content):
            raise ValidationFailed("Audio input needs an audio-capable model, and none is configured; send the "
                                   "words as text.", param=f"input[{i}]", code="input_audio_refused")
        items.append(item)
    return items


@dataclass
class TurnTools:
    """The tools a turn offers: platform memory tools by name (with their index), the working-state tool, and
    client functions (which the caller runs)."""

    memory: dict[str, dict[str, Any]] = field(default_factory=dict)  # name → the index row
    working_state: bool = False
    functions: dict[str, FunctionTool] = field(default_factory=dict)

    def writes(self, name: str) -> bool:
        """Whether `name` is one of the turn's memory write tools."""
        kind = mt.parse_name(name) if name in self.memory else None
        return kind is not None and kind[1] == mt.WRITE

    @property
    def writes_memory(self) -> bool:
        return any(self.writes(name) for name in self.memory)

    def definitions(self, ctx: RequestContext, zone: str) -> list[dict[str, Any]]:
        """The chat-completions `tools` array the model is sent."""
        defs: list[dict[str, Any]] = []
        for name, index in self.memory.items():
            kind = mt.parse_name(name)
            assert kind is not None
            described = tools.describe(ctx, index, kind[1], zone)
            defs.append(_function(name, described["description"], described["parameters"]))
        if self.working_state:
            defs.append(_function(WORKING_STATE_TOOL, "Update this conversation's working state (a small JSON "
                                  "object kept beside the thread: goal, decisions, current step) with a JSON merge "
                                  "patch: keys set to null are removed, objects merge, anything else replaces.",
                                  {"type": "object", "additionalProperties": False, "required": ["patch"],
                                   "properties": {"patch": {"type": "object",
                                                            "description": "A JSON merge patch (RFC 7386)."}}}))
        for function in self.functions.values():
            defs.append(_function(function.name, function.description or "", function.parameters))
        return defs


def _function(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


async def turn_tools(ctx: RequestContext, body: ResponseCreate, *, stored: bool) -> TurnTools:
    """MEM-20, TRN-3, TRN-4: each named platform tool must be one this key may offer; 400 at `tools[i]`."""
    chosen = TurnTools()
    for i, tool in enumerate(body.tools):
        param = f"tools[{i}]"
        if isinstance(tool, FunctionTool):
            if tool.name in chosen.functions or tool.name in chosen.memory or tool.name == WORKING_STATE_TOOL \
                    or mt.parse_name(tool.name) is not None or tool.name.startswith("builtin__"):
                raise BadRequest(f"The function name {tool.name!r} is taken (twice, or by a platform tool).",
                                 param=param, code="tool_name_taken")
            chosen.functions[tool.name] = tool
            continue
        assert isinstance(tool, PlatformTool)
        if tool.name == WORKING_STATE_TOOL:
            _working_state_allowed(ctx, stored, param)
            chosen.working_state = True
            continue
        parsed = mt.parse_name(tool.name)
        if parsed is None:
            raise BadRequest(f"There is no platform tool named {tool.name!r}; GET /tools lists them, and "
                             f"{WORKING_STATE_TOOL!r} updates the working state.", param=param, code="tool_not_found")
        try:
            index = await indexes.reachable_with_store_types(ctx.db, memory_scope(ctx), parsed[0], param=param)
        except NotFound:
            raise BadRequest(f"{tool.name!r} is not a tool of an index this credential reaches; GET /tools lists "
                             "the ones it does.", param=param, code="tool_not_found") from None
        if not tools.offered(ctx, parsed[1]):
            setting = "retrieval_tool" if parsed[1] == mt.SEARCH else "write_tool"
            raise BadRequest(f"This key's memory configuration does not offer {tool.name!r} (`memory.{setting}` is "
                             "off).", param=param, code="tool_not_offered")
        chosen.memory[tool.name] = index
    return chosen


def _working_state_allowed(ctx: RequestContext, stored: bool, param: str) -> None:
    """TRN-4: needs `tooling` and `threads`, and a turn that is kept in a thread."""
    for capability in ("tooling", "threads"):
        if capability not in ctx.principal.capabilities:
            raise CapabilityMissing(capability, param=param, message=f"{WORKING_STATE_TOOL} needs the key "
                                    f"capability `{capability}`; this key does not hold it.")
    if not stored:
        raise BadRequest(f"{WORKING_STATE_TOOL} works only in a turn kept in a thread (not with `store: false`).",
                         param=param, code="tool_needs_stored_turn")


def answered_calls(items: list[ItemIn]) -> tuple[set[str], list[tuple[int, str]]]:
    """Call ids of function calls in the input, and (index, call id) of the function outputs in it."""
    calls = {item.call_id for item in items if isinstance(item, FunctionCallIn)}
    outputs = [(i, item.call_id) for i, item in enumerate(items) if isinstance(item, FunctionCallOutputIn)]
    return calls, outputs


async def check_outputs(ctx: RequestContext, thread_id: str | None, items: list[ItemIn], history_limit: int
                        ) -> list[ItemIn]:
    """TRN-3: a function result must answer a call (in the thread's last `history_limit` items or in this input);
    one that repeats an earlier input is not kept twice (the items without it); any other is 400."""
    calls, outputs = answered_calls(items)
    if not outputs:
        return items
    known: set[str] = set()
    answered: set[str] = set()
    if thread_id is not None:
        for item in await threads_repo.list_items(ctx.db, ctx.org_id, thread_id, after=None, descending=True,
                                                  limit=history_limit):
            if item["type"] == "function_call":
                known.add(item["body"]["call_id"])
            elif item["type"] == "function_call_output":
                answered.add(item["body"]["call_id"])
    for index, call_id in outputs:
        if call_id in answered:
            continue
        if call_id not in calls and call_id not in known:
            raise BadRequest(f"The function result for call {call_id!r} answers no function call of this "
                             "conversation.", param=f"input[{index}].call_id", code="orphan_function_output")
    return [i for i in items if not (isinstance(i, FunctionCallOutputIn) and i.call_id in answered)]
