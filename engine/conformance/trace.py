"""Conformance traces: replay an operation sequence on a KVCacheManager and record, after every
step, the op's result and the manager's whole observable state.

A trace renders two ways with the same content: JSON (for people and Python) and a
line-oriented text twin (for the C++ port's test, which needs no JSON parser). Both formats
are specified in engine/conformance/vectors/FORMAT.md; keep the two in step with it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.core.block_pool import FreeOrder
from engine.core.hashing import BLOCK_HASH_ENCODING_VERSION, NONE_HASH, NONE_HASH_SEED
from engine.core.kv_cache_manager import KVCacheBlocks, KVCacheManager
from engine.core.request import Request

FORMAT_NAME = "patchctl-block-vectors"
FORMAT_VERSION = 1
_REQUEST_ID = re.compile(r"[A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class AddRequest:
    req: str
    prompt: tuple[int, ...]
    cache_salt: str | None = None
    adapter_name: str | None = None


@dataclass(frozen=True)
class GetComputedBlocks:
    req: str


@dataclass(frozen=True)
class AllocateSlots:
    """`use_computed` passes the blocks of this request's last `GetComputedBlocks` lookup."""

    req: str
    num_new_tokens: int
    num_lookahead_tokens: int = 0
    use_computed: bool = True


@dataclass(frozen=True)
class AppendTokens:
    req: str
    tokens: tuple[int, ...]


@dataclass(frozen=True)
class SetNumComputedTokens:
    """What the scheduler does after a step: the request's KV now covers this many tokens."""

    req: str
    num_computed_tokens: int


@dataclass(frozen=True)
class Free:
    req: str


@dataclass(frozen=True)
class Preempt:
    """vLLM's preemption: free the request's blocks and restart it from zero computed tokens."""

    req: str


@dataclass(frozen=True)
class ResetPrefixCache:
    pass


Op = (
    AddRequest
    | GetComputedBlocks
    | AllocateSlots
    | AppendTokens
    | SetNumComputedTokens
    | Free
    | Preempt
    | ResetPrefixCache
)

OP_NAMES: dict[type, str] = {
    AddRequest: "add_request",
    GetComputedBlocks: "get_computed_blocks",
    AllocateSlots: "allocate_slots",
    AppendTokens: "append_tokens",
    SetNumComputedTokens: "set_num_computed_tokens",
    Free: "free",
    Preempt: "preempt",
    ResetPrefixCache: "reset_prefix_cache",
}


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    num_blocks: int
    block_size: int
    ops: tuple[Op, ...]
    enable_caching: bool = True


@dataclass(frozen=True)
class Field:
    """One named value list: a result of the op, or a part of the state after it."""

    name: str
    values: tuple[str, ...]
    data: object


@dataclass(frozen=True)
class Step:
    index: int
    op: Op
    results: tuple[Field, ...]
    state: tuple[Field, ...]


@dataclass(frozen=True)
class Trace:
    scenario: Scenario
    free_order: FreeOrder
    steps: tuple[Step, ...] = field(default=())

    @property
    def name(self) -> str:
        return f"{self.scenario.name}.{self.free_order}"


def replay(scenario: Scenario, free_order: FreeOrder) -> Trace:
    """Run the scenario's ops on a fresh manager, recording results and state after each."""
    manager = KVCacheManager(scenario.num_blocks, scenario.block_size, scenario.enable_caching, free_order)
    requests: dict[str, Request] = {}
    pending_hits: dict[str, tuple[KVCacheBlocks, int]] = {}
    steps: list[Step] = []
    for index, op in enumerate(scenario.ops):
        results = _apply(op, manager, requests, pending_hits)
        steps.append(Step(index, op, tuple(results), tuple(snapshot(manager))))
    return Trace(scenario, free_order, tuple(steps))


def _apply(
    op: Op,
    manager: KVCacheManager,
    requests: dict[str, Request],
    pending_hits: dict[str, tuple[KVCacheBlocks, int]],
) -> list[Field]:
    if isinstance(op, AddRequest):
        if not _REQUEST_ID.fullmatch(op.req) or op.req in requests:
            raise ValueError(f"bad or duplicate request id {op.req!r}")
        request = manager.make_request(op.req, op.prompt, op.cache_salt, op.adapter_name)
        requests[op.req] = request
        return [_hashes(request)]
    if isinstance(op, ResetPrefixCache):
        return [_number("reset", int(manager.reset_prefix_cache()))]
    request = requests[op.req]
    if isinstance(op, GetComputedBlocks):
        hit = manager.get_computed_blocks(request)
        pending_hits[op.req] = hit
        return [_ids("computed_blocks", hit[0].get_block_ids()[0]), _number("num_computed_tokens", hit[1])]
    if isinstance(op, AllocateSlots):
        blocks, num_hit_tokens = pending_hits.pop(op.req) if op.use_computed else (None, 0)
        new = manager.allocate_slots(request, op.num_new_tokens, num_hit_tokens, blocks, op.num_lookahead_tokens)
        new_ids = new.get_block_ids()[0] if new is not None else []
        return [_number("allocated", int(new is not None)), _ids("new_blocks", new_ids)]
    if isinstance(op, AppendTokens):
        request.append_output_token_ids(op.tokens)
        return [_hashes(request)]
    if isinstance(op, SetNumComputedTokens):
        request.num_computed_tokens = op.num_computed_tokens
        return []
    if isinstance(op, Free):
        manager.free(request)
        return []
    if isinstance(op, Preempt):
        manager.free(request)
        request.num_computed_tokens = 0
        request.num_preemptions += 1
        return []
    raise TypeError(f"unknown op {op!r}")


def snapshot(manager: KVCacheManager) -> list[Field]:
    """The manager's observable state, in the fixed field order of FORMAT.md."""
    pool = manager.block_pool
    free_queue = [block.block_id for block in pool.free_block_queue.get_all_free_blocks()]
    cached = sorted((digest.hex(), list(blocks)) for digest, blocks in pool.cached_block_hash_to_block.items())
    held = sorted((req_id, [block.block_id for block in blocks]) for req_id, blocks in manager.req_to_blocks.items())
    stats = manager.prefix_cache_stats
    return [
        _number("num_free", pool.get_num_free_blocks()),
        _ids("free_queue", free_queue),
        _ids("ref_cnt", [block.ref_cnt for block in pool.blocks]),
        Field(
            "block_hash",
            (str(len(pool.blocks)), *(block.block_hash.hex() if block.block_hash else "-" for block in pool.blocks)),
            [block.block_hash.hex() if block.block_hash else None for block in pool.blocks],
        ),
        Field(
            "cached",
            (str(len(cached)), *(f"{digest}={_join(ids)}" for digest, ids in cached)),
            [[digest, ids] for digest, ids in cached],
        ),
        Field(
            "requests",
            (str(len(held)), *(f"{req_id}={_join(ids)}" for req_id, ids in held)),
            [[req_id, ids] for req_id, ids in held],
        ),
        Field(
            "stats",
            (str(stats.requests), str(stats.queries), str(stats.hits)),
            [stats.requests, stats.queries, stats.hits],
        ),
    ]


def _number(name: str, value: int) -> Field:
    return Field(name, (str(value),), value)


def _ids(name: str, ids: Sequence[int]) -> Field:
    return Field(name, (str(len(ids)), *map(str, ids)), list(ids))


def _hashes(request: Request) -> Field:
    digests = [digest.hex() for digest in request.block_hashes]
    return Field("hashes", (str(len(digests)), *digests), digests)


def _join(ids: Sequence[int]) -> str:
    return ",".join(map(str, ids))


def _hex_or_dash(text: str | None) -> str:
    return text.encode("utf-8").hex() if text is not None else "-"


def op_args(op: Op) -> tuple[list[str], dict[str, object]]:
    """The op's arguments as text tokens (text twin) and as a JSON object."""
    if isinstance(op, AddRequest):
        tokens = [
            op.req,
            _hex_or_dash(op.cache_salt),
            _hex_or_dash(op.adapter_name),
            str(len(op.prompt)),
            *map(str, op.prompt),
        ]
        return tokens, {
            "req": op.req,
            "cache_salt": op.cache_salt,
            "adapter_name": op.adapter_name,
            "prompt": list(op.prompt),
        }
    if isinstance(op, GetComputedBlocks | Free | Preempt):
        return [op.req], {"req": op.req}
    if isinstance(op, AllocateSlots):
        tokens = [op.req, str(op.num_new_tokens), str(op.num_lookahead_tokens), str(int(op.use_computed))]
        return tokens, {
            "req": op.req,
            "num_new_tokens": op.num_new_tokens,
            "num_lookahead_tokens": op.num_lookahead_tokens,
            "use_computed": op.use_computed,
        }
    if isinstance(op, AppendTokens):
        return [op.req, str(len(op.tokens)), *map(str, op.tokens)], {"req": op.req, "tokens": list(op.tokens)}
    if isinstance(op, SetNumComputedTokens):
        return [op.req, str(op.num_computed_tokens)], {"req": op.req, "num_computed_tokens": op.num_computed_tokens}
    if isinstance(op, ResetPrefixCache):
        return [], {}
    raise TypeError(f"unknown op {op!r}")


def render_text(trace: Trace) -> str:
    scenario = trace.scenario
    lines = [
        f"{FORMAT_NAME} {FORMAT_VERSION}",
        f"name {trace.name}",
        f"config {scenario.num_blocks} {scenario.block_size} {int(scenario.enable_caching)} {trace.free_order}",
        f"none_hash {NONE_HASH.hex()}",
        f"steps {len(trace.steps)}",
    ]
    for step in trace.steps:
        args, _ = op_args(step.op)
        lines.append(" ".join(["step", str(step.index), OP_NAMES[type(step.op)], *args]))
        lines += [" ".join(["result", result.name, *result.values]) for result in step.results]
        lines += [" ".join(["state", part.name, *part.values]) for part in step.state]
    lines.append("end")
    return "\n".join(lines) + "\n"


def render_json(trace: Trace) -> str:
    scenario = trace.scenario
    header = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "name": trace.name,
        "scenario": scenario.name,
        "description": scenario.description,
        "hash": {
            "algorithm": "sha256",
            "encoding_version": BLOCK_HASH_ENCODING_VERSION,
            "none_hash_seed": NONE_HASH_SEED,
            "none_hash": NONE_HASH.hex(),
        },
        "config": {
            "num_blocks": scenario.num_blocks,
            "block_size": scenario.block_size,
            "enable_caching": scenario.enable_caching,
            "free_order": trace.free_order,
        },
    }
    steps = []
    for step in trace.steps:
        _, args = op_args(step.op)
        entry = {
            "step": step.index,
            "op": OP_NAMES[type(step.op)],
            "args": args,
            "result": {result.name: result.data for result in step.results},
            "state": {part.name: part.data for part in step.state},
        }
        steps.append(json.dumps(entry, sort_keys=True, ensure_ascii=True))
    head = json.dumps(header, indent=2, sort_keys=True, ensure_ascii=True)
    # One step per line: diffs of a regenerated vector point at the step that drifted.
    return head[:-2] + ',\n  "steps": [\n    ' + ",\n    ".join(steps) + "\n  ]\n}\n"
