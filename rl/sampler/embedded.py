"""`EmbeddedSampler`: one replica of a sampler group, served in-process over a PyTorch model.

Owns: request validation, admission and capacity, the decode loop (ONE background thread per
replica: chunked prefill of new requests, one after another and up to `prefill_chunk` tokens an
iteration, between batched decode steps, i.e.
continuous batching: a request joins the running batch at the next step and leaves it when done),
stop conditions, weight versions and updates between steps, the per-session prefix cache, busy and
compute time accounting, `logits()` for `patchgym fleet check`, and `reference_logits` (the trainer's float32 view).
Formats and kernels are `emulation.py`'s; KV storage `cache.py`'s; drawing `sampling.py`'s.

Capacity: at most `max_batch` requests (default: the group's `sessions_per_replica`) are active
(decoding or prefilling); up to `max_queue` more (default: the same number) wait in FIFO order;
a request beyond that raises `SamplerOverloaded` at once, so a router retries another replica.

Busy time, per replica and per member group: `busy_s` is the time with at least one of its requests
in the engine (queued, prefilling or decoding), credited per loop iteration; `compute_s` the time
of the steps that held a row of it. They differ when groups share an engine: while the engine
prefills one group's prompt, the others' decoding rows wait, which on their own accelerators they
would not. Why both, measured (bench/loop, mixed-6 on 3 shared engines, 8 slots always full):
steps held a row of a group 0.865 of wall time while its request was in the engine 0.996 of it.

Token ids in, token ids out: ids are never decoded and re-encoded. The output is decoded only to
look for stop strings, over a window of its last tokens.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import random
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import torch

from patchgym.rl.sampler.cache import KVPool, SessionCache, SessionEntry, StepCache
from patchgym.rl.sampler.emulation import AttentionContext, Emulation, EmulatedModel, attention_context, install_routing_recorder, record_routing
from patchgym.rl.sampler.fp8_runtime import runtime_quantizers
from patchgym.rl.sampler.sampling import draw
from patchgym.rl.sampler.types import Generation, SamplerError, SamplerHealth, SamplerOverloaded, SamplerUnavailable, SamplingParams, VersionBehind

# why 256: a prefill chunk of 256 tokens takes ~0.4 s on SmolLM2 here, so running decodes stall at
# most that long while a 1,500-token prompt is admitted, and prefill still runs as large matmuls.
DEFAULT_PREFILL_CHUNK = 256


@dataclass(eq=False)
class _Request:
    prompt: list[int]
    params: SamplingParams
    session_id: str | None
    loop: asyncio.AbstractEventLoop | None
    future: Any
    generator: torch.Generator
    stop_ids: frozenset[int]
    group: str = ""  # the group this request is served for (an engine may serve several)
    splits: int = 1  # that group's kernel variant
    accumulate: str = "fp32"
    slot: int = -1
    pos: int = 0  # tokens whose keys/values are in the slot
    pending: list[int] = field(default_factory=list)  # prompt tokens still to prefill
    cached: int = 0
    out: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    support_ids: list[list[int]] = field(default_factory=list)
    support_logprobs: list[list[float]] = field(default_factory=list)
    topk_ids: list[list[int]] = field(default_factory=list)
    topk_logprobs: list[list[float]] = field(default_factory=list)
    busy: float = 0.0
    cancelled: bool = False
    done: bool = False


def _validate_ids(token_ids: Any, vocab: int, context: int, what: str = "prompt") -> list[int]:
    if not isinstance(token_ids, (list, tuple)) and not (isinstance(token_ids, torch.Tensor) and token_ids.dim() == 1):
        raise ValueError(f"{what} must be a list of token ids, got {type(token_ids).__name__}")
    ids = token_ids.tolist() if isinstance(token_ids, torch.Tensor) else list(token_ids)
    if not ids:
        raise ValueError(f"{what} is empty: at least one token id is needed")
    for i, t in enumerate(ids):
        if isinstance(t, bool) or not isinstance(t, int):
            raise ValueError(f"{what}[{i}] is {t!r}, not an integer token id")
        if not 0 <= t < vocab:
            raise ValueError(f"{what}[{i}] = {t} is outside the vocabulary [0, {vocab})")
    if len(ids) >= context:
        raise ValueError(f"{what} has {len(ids)} tokens; the model's context is {context} (at least one must be left to generate)")
    return ids


def _member_groups(group: Any, members: Any) -> dict[str, Any]:
    """{name: group} of the groups one engine serves; they must share the formats."""
    groups = {group.name: group}
    for m in members or ():
        if m.name in groups and m is not groups[m.name] and m != groups[m.name]:
            raise ValueError(f"two member groups are named {m.name!r}")
        formats = (m.weights, m.activations, m.kv_cache)
        if formats != (group.weights, group.activations, group.kv_cache):
            raise ValueError(f"group {m.name!r} cannot share an engine with {group.name!r}: its formats {formats} differ from "
                             f"{(group.weights, group.activations, group.kv_cache)} (weights, activations, KV cache)")
        groups[m.name] = m
    return groups


def _config_ints(config: Any) -> tuple[int, int, int, int, int]:
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    heads = text.num_attention_heads
    kv = getattr(text, "num_key_value_heads", None) or heads
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // heads
    return text.num_hidden_layers, kv, head_dim, text.vocab_size, getattr(text, "max_position_embeddings", 1 << 30)


def cache_keyword(model: Any) -> str:
    """The name under which `model`'s forward takes a KV cache object.

    transformers renamed it: 5.25 takes `cache`, 5.17 and the 4.x releases `past_key_values`.
    Passed under the other name, the cache lands in the forward's **kwargs, the model makes its
    own per forward, and every decode step sees only its one new token. Seen on the GPU machine
    (transformers 5.17): the first sampled token right, each later one from wrong logits."""
    params = inspect.signature(model.forward).parameters
    for name in ("cache", "past_key_values"):
        if name in params:
            return name
    raise TypeError(f"{type(model).__name__}.forward takes no KV cache (neither `cache` nor `past_key_values`)")


def _eos_ids(model: Any) -> set[int]:
    ids: set[int] = set()
    for cfg in (getattr(model, "generation_config", None), model.config):
        e = getattr(cfg, "eos_token_id", None) if cfg is not None else None
        if e is None:
            continue
        ids.update([e] if isinstance(e, int) else list(e))
    return ids


def load_weights(state_dict_or_path: Mapping[str, Any] | str | os.PathLike[str]) -> dict[str, torch.Tensor]:
    """HF-named tensors from a mapping, a safetensors file, or a directory of safetensors files."""
    if isinstance(state_dict_or_path, Mapping):
        return dict(state_dict_or_path)
    if not isinstance(state_dict_or_path, (str, os.PathLike)):
        raise ValueError(f"weights must be a mapping of tensors or a path, got {type(state_dict_or_path).__name__}")
    from safetensors.torch import load_file

    path = Path(state_dict_or_path)
    if path.is_file():
        files = [path]
    elif path.is_dir():
        files = sorted(path.glob("*.safetensors"))
        if not files:
            raise ValueError(f"weights directory {path} holds no *.safetensors file")
    else:
        raise ValueError(f"weights path {path} does not exist")
    out: dict[str, torch.Tensor] = {}
    for f in files:
        try:
            out.update(load_file(str(f)))
        except Exception as exc:  # a truncated or foreign file
            raise ValueError(f"cannot read weights file {f}: {exc}") from None
    return out


class EmbeddedSampler:
    """One replica of `group` over a transformers causal LM (or a model spec for `load_model`)."""

    def __init__(
        self,
        model: Any,
        group: Any,
        *,
        tokenizer: Any = None,
        replica: str = "0",
        device: str = "cpu",
        max_batch: int | None = None,
        max_queue: int | None = None,
        prefill_chunk: int = DEFAULT_PREFILL_CHUNK,
        version: int = 0,
        stop_window: int = 32,
        members: Any = None,
    ) -> None:
        if isinstance(model, (str, os.PathLike)):
            from patchgym.rl.models import load_model, load_tokenizer

            spec = model
            model = load_model(spec)
            if tokenizer is None:
                tokenizer = load_tokenizer(spec)
        self.group = group.name
        self.replica = str(replica)
        self.group_config = group
        # `members`: the groups this engine serves (default: `group` alone). They must share the
        # formats (weights, activations, KV cache); each request runs under its group's kernel
        # variant, row by row (`patchgym.rl.sampler.shared` gives each group its own face).
        self.groups = _member_groups(group, members)
        self.emulation = Emulation.of_group(group)
        self._emu = EmulatedModel(model, self.emulation, kernel_variants=len(self.groups) > 1)
        self._emu.model.to(device)
        self.device = torch.device(device)
        self.model = self._emu.model
        self._cache_kw = cache_keyword(self.model)
        self.tokenizer = tokenizer
        self.layers, kv_heads, head_dim, self.vocab_size, self.context = _config_ints(self.model.config)
        self.eos_ids = frozenset(_eos_ids(self.model))
        served = sum(g.sessions_per_replica for g in self.groups.values())
        self.max_batch = max_batch or served
        self.max_queue = served if max_queue is None else max_queue
        if prefill_chunk < 1:
            raise ValueError(f"prefill_chunk must be >= 1 (got {prefill_chunk})")
        self.prefill_chunk = prefill_chunk
        self.stop_window = stop_window
        self.version = int(version)
        self._kv_quant = None
        if self.emulation.kv_cache == "fp8_e4m3":
            self._kv_quant = runtime_quantizers()[0]
        self._pool = KVPool(self.layers, kv_heads, head_dim, device=self.device)
        self._sessions = SessionCache(served)
        self._rng = random.Random(int.from_bytes(os.urandom(8), "little"))
        self._cond = threading.Condition()
        self._model_lock = threading.Lock()
        self._waiting: deque[_Request] = deque()
        self._prefilling: _Request | None = None
        self._decoding: list[_Request] = []
        self._jobs: deque[tuple[Any, threading.Event, list]] = deque()
        self._closed = False
        self.busy_s = 0.0  # time with a request in the engine
        self.group_busy_s = {name: 0.0 for name in self.groups}  # time with a request of the group in the engine
        self.compute_s = 0.0  # time in steps
        self.group_compute_s = {name: 0.0 for name in self.groups}  # time in steps holding a row of the group
        self.prefilled_tokens = 0  # prompt tokens run through prefill (not served from the cache)
        self.steps = 0
        self._error: str = ""
        self._thread = threading.Thread(target=self._run, name=f"sampler-{self.group}-{self.replica}", daemon=True)
        self._thread.start()

    # --- public ---------------------------------------------------------------------------------

    async def generate(self, prompt_ids: list[int], params: SamplingParams, *, session_id: str | None = None, min_version: int | None = None,
                       group: str | None = None) -> Generation:
        req = self._make_request(prompt_ids, params, session_id, min_version, asyncio.get_running_loop(), group)
        try:
            return await req.future
        except asyncio.CancelledError:
            req.cancelled = True
            with self._cond:
                self._cond.notify()
            raise

    def generate_sync(self, prompt_ids: list[int], params: SamplingParams, *, session_id: str | None = None, min_version: int | None = None, timeout: float | None = None,
                      group: str | None = None) -> Generation:
        """The same as `generate`, blocking, for callers without an event loop (benchmarks, tools)."""
        import concurrent.futures

        req = self._make_request(prompt_ids, params, session_id, min_version, None, group)
        try:
            return req.future.result(timeout)
        except concurrent.futures.TimeoutError:
            req.cancelled = True
            raise

    async def update_weights(self, state_dict_or_path: Mapping[str, Any] | str, version: int) -> None:
        # reading and encoding run off the event loop and off the decode thread; only the copy
        # into the parameters runs on the decode thread, between two steps
        encoded = await asyncio.to_thread(self._encode_weights, state_dict_or_path, version)
        done = threading.Event()
        box: list = []
        with self._cond:
            if self._closed:
                raise SamplerUnavailable(f"{self.group}/{self.replica} is closed")
            self._jobs.append(((encoded, int(version)), done, box))
            self._cond.notify()
        await asyncio.to_thread(done.wait)
        if box:
            raise box[0]

    async def update_weights_encoded(self, encoded: Mapping[str, torch.Tensor], version: int) -> None:
        """Replace weights with tensors already in the group's format (a weight view pulled by
        `patchgym.rl.sampler.viewpull`): shapes checked, values copied as they are, never re-quantized."""
        if isinstance(version, bool) or not isinstance(version, int) or version < self.version:
            raise ValueError(f"version must be an integer >= the replica's {self.version}, got {version!r}")
        state = self.model.state_dict()
        for n, t in encoded.items():
            if n not in state or tuple(t.shape) != tuple(state[n].shape):
                raise ValueError(f"weight {n!r} is not a parameter of this model with shape {tuple(t.shape)}")
        done, box = threading.Event(), []
        with self._cond:
            if self._closed:
                raise SamplerUnavailable(f"{self.group}/{self.replica} is closed")
            self._jobs.append(((dict(encoded), int(version)), done, box))
            self._cond.notify()
        await asyncio.to_thread(done.wait)
        if box:
            raise box[0]

    def update_weights_sync(self, state_dict_or_path: Mapping[str, Any] | str, version: int) -> None:
        encoded = self._encode_weights(state_dict_or_path, version)
        done = threading.Event()
        box: list = []
        with self._cond:
            self._jobs.append(((encoded, int(version)), done, box))
            self._cond.notify()
        done.wait()
        if box:
            raise box[0]

    @property
    def encoding_key(self) -> tuple:
        """Replicas with equal keys hold the same values for the same weights (their kernels may
        differ): one `encode_weights` result serves them all (`patchgym.rl.fleet.publish`)."""
        e = self.emulation
        return ("embedded", e.weights, str(e.serving_dtype), len(self._emu.quantized_names))

    def encode_weights(self, state_dict_or_path: Mapping[str, Any] | str, version: int) -> dict[str, torch.Tensor]:
        """The weights in this group's format, for `update_weights_encoded` of this or a replica
        with the same `encoding_key` (checked: names, shapes, finite values, version order)."""
        return self._encode_weights(state_dict_or_path, version)

    @property
    def quantized_names(self) -> set[str]:
        """The parameters (HF names) that pass through the group's weight format."""
        return set(self._emu.quantized_names)

    def health(self, group: str | None = None) -> SamplerHealth:
        """The replica's state; with `group`, that member group's share of it (its sessions, its
        capacity, its busy and compute time: the module docstring says which is which)."""
        with self._cond:
            if group is None:
                active = len(self._decoding) + (1 if self._prefilling is not None else 0)
                queued = len(self._waiting)
            else:
                self._member(group)
                active, queued = self._group_counts(group)
        ok = self._thread.is_alive() and not self._closed
        return SamplerHealth(
            ok=ok, group=group or self.group, replica=self.replica, weight_version=self.version,
            active_sessions=active, capacity=self.max_batch if group is None else self.groups[group].sessions_per_replica,
            queued=queued, busy_s=self.busy_s if group is None else self.group_busy_s[group],
            compute_s=self.compute_s if group is None else self.group_compute_s[group],
            detail=self._error if ok else (self._error or "closed"),
        )

    def _member(self, group: str | None) -> Any:
        name = self.group if group is None else group
        if name not in self.groups:
            raise ValueError(f"group {name!r} is not served by this replica (it serves {', '.join(self.groups)})")
        return self.groups[name]

    def _group_counts(self, group: str) -> tuple[int, int]:
        """(active, queued) requests of one member group; call with `_cond` held."""
        active = sum(r.group == group for r in self._decoding) + (1 if self._prefilling is not None and self._prefilling.group == group else 0)
        return active, sum(r.group == group for r in self._waiting)

    def logits(self, token_ids: list[int], *, return_routing: bool = False, decode_from: int | None = None, group: str | None = None) -> Any:
        """Teacher-forced logits [L, V] (float32) under this group's emulation, KV cache included.

        With `return_routing`, also {layer: LongTensor [L, top_k]} of the experts each position
        was routed to ({} for a dense model). By default every position is prefilled in chunks
        of `prefill_chunk`; with `decode_from=n` the first n tokens are (a prompt served alone) and
        the rest run one token per forward, the shapes of a decode step of one request: then the
        logits are those that request was sampled from, even where fp8 activations or KV round a
        value differently when float32 inputs differ in their last bits.
        """
        ids = _validate_ids(token_ids, self.vocab_size, self.context + 1, "token_ids")
        cut = len(ids) if decode_from is None else int(decode_from)
        if not 1 <= cut <= len(ids):
            raise ValueError(f"decode_from must be in [1, {len(ids)}] (got {decode_from})")
        spans = [(a, min(a + self.prefill_chunk, cut)) for a in range(0, cut, self.prefill_chunk)]
        spans += [(a, a + 1) for a in range(cut, len(ids))]
        g = self._member(group)
        pool = KVPool(self._pool.layers, self._pool.kv_heads, self._pool.head_dim, device=self.device)
        pool.reserve(1, len(ids))
        chunks = []
        with self._model_lock, record_routing(return_routing) as rec:
            for start, end in spans:
                chunks.append(self._prefill_forward(pool, 0, start, ids[start:end], all_logits=True,
                                                    splits=g.kernel.attention_splits, accumulate=g.kernel.accumulate))
        out = torch.cat(chunks, dim=0).float()
        if return_routing:
            return out, {layer: torch.cat(parts, dim=0).long() for layer, parts in rec.items()}
        return out

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout=30)

    def __enter__(self) -> "EmbeddedSampler":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # --- admission ------------------------------------------------------------------------------

    def _make_request(self, prompt_ids: Any, params: SamplingParams, session_id: str | None, min_version: int | None, loop: asyncio.AbstractEventLoop | None,
                      group: str | None = None) -> _Request:
        g = self._member(group)
        if not isinstance(params, SamplingParams):
            raise ValueError(f"params must be a SamplingParams, got {type(params).__name__}")
        ids = _validate_ids(prompt_ids, self.vocab_size, self.context)
        if session_id is not None and not isinstance(session_id, str):
            raise ValueError(f"session_id must be a string, got {type(session_id).__name__}")
        if min_version is not None and min_version > self.version:
            raise VersionBehind(self.version, int(min_version))
        bad = [t for t in params.stop_token_ids if not 0 <= t < self.vocab_size]
        if bad:
            raise ValueError(f"stop_token_ids {bad} are outside the vocabulary [0, {self.vocab_size})")
        if params.stop and self.tokenizer is None:
            raise ValueError("stop strings need a tokenizer; pass tokenizer= to EmbeddedSampler")
        if loop is not None:
            future: Any = loop.create_future()
        else:
            import concurrent.futures

            future = concurrent.futures.Future()
        gen = torch.Generator(device="cpu")
        gen.manual_seed(params.seed if params.seed is not None else self._rng.getrandbits(63))
        req = _Request(prompt=ids, params=params, session_id=session_id, loop=loop, future=future, generator=gen,
                       stop_ids=(frozenset() if params.ignore_eos else self.eos_ids) | frozenset(params.stop_token_ids),
                       group=g.name, splits=g.kernel.attention_splits, accumulate=g.kernel.accumulate)
        with self._cond:
            if self._closed or not self._thread.is_alive():
                raise SamplerUnavailable(f"{g.name}/{self.replica} is closed")
            active = len(self._decoding) + (1 if self._prefilling is not None else 0)
            if active + len(self._waiting) >= self.max_batch + self.max_queue:
                raise SamplerOverloaded(f"{g.name}/{self.replica} is full: {active} active, {len(self._waiting)} queued")
            if len(self.groups) > 1:  # each member group keeps its own capacity (and queue of the same size)
                g_active, g_queued = self._group_counts(g.name)
                if g_active + g_queued >= 2 * g.sessions_per_replica:
                    raise SamplerOverloaded(f"{g.name}/{self.replica} is full: {g_active} active, {g_queued} queued")
            self._waiting.append(req)
            self._cond.notify()
        return req

    def _encode_weights(self, state_dict_or_path: Any, version: int) -> dict[str, torch.Tensor]:
        if isinstance(version, bool) or not isinstance(version, int):
            raise ValueError(f"version must be an integer, got {version!r}")
        if version < self.version:
            raise ValueError(f"version {version} is older than the replica's {self.version}")
        return self._emu.encode_all(load_weights(state_dict_or_path))

    # --- the decode thread ------------------------------------------------------------------------

    def _run(self) -> None:
        tick = time.perf_counter()
        occupied: set[str] = set()  # groups with a request in the engine during this iteration
        while True:
            with self._cond:
                now = time.perf_counter()
                self._credit_busy(occupied, now - tick)
                tick = now
                while not (self._closed or self._jobs or self._waiting or self._prefilling or self._decoding):
                    self._cond.wait()
                    tick = time.perf_counter()  # idle: nothing to credit
                if self._closed:
                    break
                jobs = list(self._jobs)
                self._jobs.clear()
                self._drop_cancelled()
                admit = self._admit_next()
                occupied = {r.group for r in self._decoding} | {r.group for r in self._waiting}
                if self._prefilling is not None:
                    occupied.add(self._prefilling.group)
            for (encoded, version), done, box in jobs:
                try:
                    with self._model_lock:
                        self._emu.assign(encoded)
                        self.version = version
                        self._sessions.clear()  # their keys were computed by the old weights
                except Exception as exc:  # pragma: no cover - encode_all checked them
                    box.append(SamplerError(f"weight update to version {version} failed: {exc}"))
                done.set()
            self._prefill_within_budget(admit)
            if self._decoding:
                self._guard(list(self._decoding), self._decode_step)
        self._fail_all(SamplerUnavailable(f"{self.group}/{self.replica} was closed"))

    def _admit_next(self) -> _Request | None:
        """The next waiting request, made the prefilling one, when there is room (call with `_cond` held)."""
        if self._prefilling is None and self._waiting and len(self._decoding) < self.max_batch:
            self._prefilling = self._waiting.popleft()
            return self._prefilling
        return None

    def _credit_busy(self, groups: set[str], dt: float) -> None:
        if groups:
            self.busy_s += dt
            for name in groups:
                self.group_busy_s[name] += dt

    def _prefill_within_budget(self, admit: _Request | None) -> None:
        """Prefill up to `prefill_chunk` prompt tokens this iteration: the current request's next
        chunk and, while tokens of the budget are left, the next waiting requests' prompts.

        Why: with one request admitted per iteration, 8 requests that arrive together joined the
        batch one decode step apart, so 8 x 64 new tokens took 70 decode steps instead of 64
        (bench/sampler batch 8: 0.94x HF generate, which prefills all 8 in one forward); now 64
        steps, 72.3 -> 74.5 tok/s on the same 8 requests."""
        budget = self.prefill_chunk
        while True:
            if admit is not None:
                self._guard([admit], self._admit, admit)
            r = self._prefilling
            if r is None:
                return
            used = self._guard([r], self._prefill_step, budget)
            if not used:
                return
            budget -= used
            if budget <= 0 or self._prefilling is not None:
                return
            with self._cond:
                admit = None if self._closed or self._jobs else self._admit_next()
            if admit is None:
                return

    def _guard(self, reqs: list[_Request], fn: Any, *args: Any) -> Any:
        """Run one step and return what it returns; if it raises, fail its requests (never leave
        a caller waiting) and return None."""
        try:
            return fn(*args)
        except Exception as exc:
            self._error = f"{type(exc).__name__}: {exc}"
            err = SamplerError(f"{self.group}/{self.replica} failed a step: {self._error}")
            for r in reqs:
                self._resolve(r, exc=err)
            with self._cond:
                if self._prefilling in reqs:
                    self._prefilling = None
                self._decoding = [r for r in self._decoding if r not in reqs]
                for i, r in enumerate(self._decoding):  # the survivors' rows may have moved
                    r.slot = i

    def _drop_cancelled(self) -> None:
        for r in [r for r in self._waiting if r.cancelled]:
            self._waiting.remove(r)
        if self._prefilling is not None and self._prefilling.cancelled:
            self._prefilling = None
        if any(r.cancelled for r in self._decoding):
            self._remove([i for i, r in enumerate(self._decoding) if r.cancelled])

    def _admit(self, r: _Request) -> None:
        r.slot = len(self._decoding)
        entry, n = (None, 0)
        if r.session_id is not None:
            entry, n = self._sessions.take(r.session_id, r.prompt, self.version)
        self._pool.reserve(r.slot + 1, len(r.prompt) + 1)
        if entry is not None and n:
            self._pool.insert(r.slot, entry.keys, entry.values, n)
        r.pos = r.cached = n
        r.pending = r.prompt[n:]

    def _prefill_forward(self, pool: KVPool, slot: int, start: int, piece: list[int], *, all_logits: bool, splits: int, accumulate: str) -> torch.Tensor:
        n = len(piece)
        pool.reserve(slot + 1, start + n)
        ids = torch.tensor([piece], device=self.device)
        pos = torch.arange(start, start + n, device=self.device)
        mask = None
        if n > 1 or start > 0:
            keys = torch.arange(start + n, device=self.device)
            mask = (keys[None, :] <= pos[:, None])[None, None]  # [1, 1, n, start+n]
        cache = StepCache(pool, self._kv_quant, prefill_slot=slot, prefill_start=start, kv_len=start + n)
        with attention_context(AttentionContext(mask, splits, accumulate)), torch.inference_mode():
            out = self.model(input_ids=ids, position_ids=pos[None], use_cache=True, logits_to_keep=0 if all_logits else 1,
                             **{self._cache_kw: cache})
        self._check_written(cache)
        return out.logits[0]

    def _check_written(self, cache: StepCache) -> None:
        """Every layer wrote its keys and values through `cache`: else the model attended to a
        cache of its own, and the logits are not those of the sequence (see `cache_keyword`)."""
        if cache.writes != self.layers:
            raise RuntimeError(f"the model wrote {cache.writes} of its {self.layers} layers' keys and values to the "
                               f"sampler's KV cache (passed as `{self._cache_kw}`): its logits would not be the sequence's")

    def _prefill_step(self, budget: int) -> int:
        """Prefill the next at most `budget` prompt tokens of the prefilling request; returns how many."""
        r = self._prefilling
        t0 = time.perf_counter()
        piece = r.pending[: max(1, min(budget, self.prefill_chunk))]
        with self._model_lock:
            logits = self._prefill_forward(self._pool, r.slot, r.pos, piece, all_logits=False, splits=r.splits, accumulate=r.accumulate)
        r.pos += len(piece)
        r.pending = r.pending[len(piece):]
        self.prefilled_tokens += len(piece)
        reason = self._sample([r], logits[-1:])[0] if not r.pending else None
        dt = time.perf_counter() - t0
        r.busy += dt
        self.compute_s += dt
        self.group_compute_s[r.group] += dt
        if r.pending:
            return len(piece)
        with self._cond:
            self._prefilling = None
            if reason is not None:
                self._finish(r, reason)
            else:
                self._decoding.append(r)
        return len(piece)

    def _decode_step(self) -> None:
        rows = self._decoding
        b = len(rows)
        t0 = time.perf_counter()
        positions = [r.pos for r in rows]
        kv_len = max(positions) + 1
        slot_need = b + (1 if self._prefilling is not None else 0)
        self._pool.reserve(slot_need, kv_len)
        ids = torch.tensor([[r.out[-1]] for r in rows], device=self.device)
        pos = torch.tensor(positions, device=self.device)
        mask = None
        if min(positions) != kv_len - 1:
            keys = torch.arange(kv_len, device=self.device)
            mask = (keys[None, :] <= pos[:, None])[:, None, None, :]  # [B, 1, 1, kv_len]
        cache = StepCache(self._pool, self._kv_quant, decode_positions=pos, kv_len=kv_len)
        splits = tuple(r.splits for r in rows)
        accumulate = tuple(r.accumulate for r in rows)
        with self._model_lock:
            with attention_context(AttentionContext(mask, splits, accumulate)), torch.inference_mode():
                out = self.model(input_ids=ids, position_ids=pos[:, None], use_cache=True, logits_to_keep=1, **{self._cache_kw: cache})
            self._check_written(cache)
        for r in rows:
            r.pos += 1
        finished = self._sample(rows, out.logits[:, -1])
        dt = time.perf_counter() - t0
        self.compute_s += dt
        for name in {r.group for r in rows}:
            self.group_compute_s[name] += dt
        self.steps += 1
        for r in rows:
            r.busy += dt / b
        idx = [i for i, reason in enumerate(finished) if reason is not None]
        if idx:
            with self._cond:
                self._remove(idx, [(rows[i], finished[i]) for i in idx])

    def _sample(self, rows: list[_Request], logits: torch.Tensor) -> list[str | None]:
        """Draw one token per row, record it; per row the finish reason, or None to go on."""
        ps = [r.params for r in rows]
        drawn = draw(
            logits, [p.temperature for p in ps], [p.top_k for p in ps], [p.top_p for p in ps], [r.generator for r in rows],
            return_support=[p.return_support for p in ps], support_max=[p.support_max_tokens for p in ps],
            top_logprobs=[p.top_logprobs for p in ps],
        )
        reasons: list[str | None] = []
        for r, d in zip(rows, drawn):
            if d.abort:
                r.params_abort = f"support of {d.support_size} tokens exceeds support_max_tokens={r.params.support_max_tokens}"
                reasons.append("abort")
                continue
            r.out.append(d.token)
            r.logprobs.append(d.logprob)
            r.versions.append(self.version)
            if d.support_ids is not None:
                r.support_ids.append(d.support_ids)
                r.support_logprobs.append(d.support_logprobs)
            if d.topk_ids is not None:
                r.topk_ids.append(d.topk_ids)
                r.topk_logprobs.append(d.topk_logprobs)
            reasons.append(self._stop_reason(r))
        return reasons

    def _stop_reason(self, r: _Request) -> str | None:
        if r.out[-1] in r.stop_ids:
            return "stop"
        if r.params.stop:
            # a token decodes to at least one character, so the last `longest stop + 2` tokens
            # (and at least `stop_window`) hold any stop string the newest token completed
            n = max(self.stop_window, max(len(s) for s in r.params.stop) + 2)
            window = self.tokenizer.decode(r.out[-n:], skip_special_tokens=False)
            if any(s and s in window for s in r.params.stop):
                return "stop"
        if len(r.out) >= r.params.max_new_tokens or r.pos + 1 >= self.context:
            return "length"
        return None

    def _remove(self, idx: list[int], ended: list[tuple[_Request, str]] | None = None) -> None:
        """Take rows `idx` out of the batch (finishing `ended`), keeping slots 0..B-1 packed."""
        for r, reason in ended or []:
            self._finish(r, reason)
        for i in sorted(idx, reverse=True):
            last = len(self._decoding) - 1
            if i != last:
                moved = self._decoding[last]
                self._pool.move(moved.slot, i, moved.pos)
                moved.slot = i
                self._decoding[i] = moved
            self._decoding.pop()
        p = self._prefilling
        if p is not None and p.slot != len(self._decoding):
            self._pool.move(p.slot, len(self._decoding), p.pos)
            p.slot = len(self._decoding)

    def _finish(self, r: _Request, reason: str) -> None:
        if r.session_id is not None and reason != "abort":
            keys, values = self._pool.extract(r.slot, r.pos)
            tokens = (r.prompt + r.out)[: r.pos]
            self._sessions.put(r.session_id, SessionEntry(tokens, keys, values, self.version))
        versions = r.versions or [self.version]
        gen = Generation(
            token_ids=list(r.out), logprobs=list(r.logprobs), weight_version=min(versions), group=r.group,
            finish_reason=reason, support_ids=r.support_ids if r.params.return_support else None,
            support_logprobs=r.support_logprobs if r.params.return_support else None,
            topk_ids=r.topk_ids if r.params.top_logprobs else None, topk_logprobs=r.topk_logprobs if r.params.top_logprobs else None,
            token_versions=list(r.versions), replica=self.replica, prompt_tokens=len(r.prompt), cached_tokens=r.cached,
            busy_s=r.busy,
        )
        if reason == "abort":
            gen.extra["abort"] = getattr(r, "params_abort", "aborted")
        self._resolve(r, gen)

    def _resolve(self, r: _Request, gen: Generation | None = None, exc: BaseException | None = None) -> None:
        if r.done:
            return
        r.done = True

        def settle() -> None:
            if r.future.done():
                return
            if exc is not None:
                r.future.set_exception(exc)
            else:
                r.future.set_result(gen)

        if r.loop is None:
            settle()
        else:
            try:
                r.loop.call_soon_threadsafe(settle)
            except RuntimeError:  # the caller's loop is closed: nobody is waiting
                pass

    def _fail_all(self, exc: BaseException) -> None:
        with self._cond:
            reqs = list(self._waiting) + ([self._prefilling] if self._prefilling else []) + list(self._decoding)
            self._waiting.clear()
            self._prefilling = None
            self._decoding = []
            for j in self._jobs:
                j[2].append(exc)
                j[1].set()
            self._jobs.clear()
        for r in reqs:
            self._resolve(r, exc=exc)


def reference_logits(model: Any, token_ids: list[int], return_routing: bool = False) -> Any:
    """The trainer's view: teacher-forced float32 logits [L, V] of the unquantized `model`.

    Same validation and routing capture as `EmbeddedSampler.logits` (a recorder hook, inert unless
    asked, is added to the model's experts modules once); the forward is the model's own.
    """
    _, _, _, vocab, context = _config_ints(model.config)
    ids = _validate_ids(token_ids, vocab, context + 1, "token_ids")
    if return_routing:
        install_routing_recorder(model)
    device = next(model.parameters()).device
    with record_routing(return_routing) as rec, torch.inference_mode():
        out = model(input_ids=torch.tensor([ids], device=device), use_cache=False)
    logits = out.logits[0].float()
    if return_routing:
        return logits, {layer: torch.cat(parts, dim=0).long() for layer, parts in rec.items()}
    return logits
