"""KV-cache storage of one replica: a slot pool for running requests and a per-session prefix cache.

Owns: `KVPool` (per layer one tensor [slots, kv_heads, capacity, head_dim] for keys and one for
values; both axes grow by doubling), `StepCache` (the object handed to a transformers model as its
`cache` for one forward: it writes the new keys/values, KV-format emulation included, and returns
views over the rows that forward attends to) and `SessionCache` (an LRU of finished sessions' KV,
so a session's next turn prefills only its new suffix). It does not own scheduling or sampling.

Layout rule: the rows of a decode step are slots 0..B-1, so a step attends to `pool.k[l][:B]`, a
view (no gather). A finished request's slot is refilled by moving the last slot into it.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable

import torch


class KVPool:
    """Keys and values of every layer for `slots` sequences of up to `capacity` tokens."""

    def __init__(self, layers: int, kv_heads: int, head_dim: int, *, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu") -> None:
        self.layers, self.kv_heads, self.head_dim = layers, kv_heads, head_dim
        self.dtype, self.device = dtype, torch.device(device)
        self.slots = 0
        self.capacity = 0
        self.k: list[torch.Tensor] = []
        self.v: list[torch.Tensor] = []

    def reserve(self, slots: int, capacity: int) -> None:
        """Make room for `slots` sequences of `capacity` tokens (grows by doubling, keeps data)."""
        if slots <= self.slots and capacity <= self.capacity:
            return
        # why doubling: a 1,500-token prompt would otherwise reallocate (and copy) the pool per chunk
        new_slots = max(slots, self.slots, 1)
        if slots > self.slots:
            new_slots = max(slots, 2 * self.slots)
        new_cap = self.capacity
        if capacity > self.capacity:
            new_cap = max(capacity, 2 * self.capacity, 64)
        shape = (new_slots, self.kv_heads, new_cap, self.head_dim)
        for lst in (self.k, self.v):
            for i in range(self.layers):
                t = torch.zeros(shape, dtype=self.dtype, device=self.device)
                if i < len(lst) and self.slots and self.capacity:
                    t[: self.slots, :, : self.capacity] = lst[i]
                if i < len(lst):
                    lst[i] = t
                else:
                    lst.append(t)
        self.slots, self.capacity = new_slots, new_cap

    def move(self, src: int, dst: int, length: int) -> None:
        """Copy the first `length` positions of slot `src` into slot `dst`."""
        if src == dst or length <= 0:
            return
        for lst in (self.k, self.v):
            for t in lst:
                t[dst, :, :length] = t[src, :, :length]

    def extract(self, slot: int, length: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """A copy of one slot's first `length` positions, per layer."""
        return ([t[slot, :, :length].clone() for t in self.k], [t[slot, :, :length].clone() for t in self.v])

    def insert(self, slot: int, keys: list[torch.Tensor], values: list[torch.Tensor], length: int) -> None:
        for t, src in zip(self.k, keys):
            t[slot, :, :length] = src[:, :length]
        for t, src in zip(self.v, values):
            t[slot, :, :length] = src[:, :length]

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.k + self.v)


@dataclass
class StepCache:
    """The `cache` of one forward: decode rows 0..B-1 at `positions`, or one slot's prefill chunk.

    transformers' attention layers call `update(k, v, layer_idx)` and attend to what it returns.
    `kv_quant` (the group's KV-cache format, or None) is applied before the write.
    """

    pool: KVPool
    kv_quant: Callable[[torch.Tensor], torch.Tensor] | None
    decode_positions: torch.Tensor | None = None  # [B] write position per row (decode)
    kv_len: int = 0  # keys attended to (decode: max position + 1)
    prefill_slot: int = -1
    prefill_start: int = 0
    writes: int = 0  # update() calls: one per attention layer, checked by the sampler after the forward

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args: Any, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        self.writes += 1
        if self.kv_quant is not None:
            key_states, value_states = self.kv_quant(key_states), self.kv_quant(value_states)
        kt, vt = self.pool.k[layer_idx], self.pool.v[layer_idx]
        if self.decode_positions is not None:
            b = key_states.shape[0]
            rows = _arange(b, kt.device)
            kt[rows, :, self.decode_positions] = key_states[:, :, 0]
            vt[rows, :, self.decode_positions] = value_states[:, :, 0]
            return kt[:b, :, : self.kv_len], vt[:b, :, : self.kv_len]
        s, p, n = self.prefill_slot, self.prefill_start, key_states.shape[2]
        kt[s, :, p : p + n] = key_states[0]
        vt[s, :, p : p + n] = value_states[0]
        return kt[s : s + 1, :, : p + n], vt[s : s + 1, :, : p + n]

    # transformers asks a cache these; positions are always passed explicitly, so they only
    # matter to code paths that build their own masks (skipped for the emulated attention).
    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.kv_len

    @property
    def is_compileable(self) -> bool:
        return False


_ARANGE: dict[tuple[int, str], torch.Tensor] = {}


def _arange(n: int, device: torch.device) -> torch.Tensor:
    key = (n, str(device))
    t = _ARANGE.get(key)
    if t is None:
        t = _ARANGE[key] = torch.arange(n, device=device)
    return t


@dataclass
class SessionEntry:
    token_ids: list[int]  # the tokens whose keys/values are stored (prompt + output but the last)
    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    version: int


class SessionCache:
    """LRU of finished sessions' KV, at most `max_sessions` entries (the replica's capacity)."""

    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self._entries: OrderedDict[str, SessionEntry] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, session_id: str, entry: SessionEntry) -> None:
        self._entries[session_id] = entry
        self._entries.move_to_end(session_id)
        while len(self._entries) > self.max_sessions:
            self._entries.popitem(last=False)

    def take(self, session_id: str, prompt_ids: list[int], version: int) -> tuple[SessionEntry | None, int]:
        """The entry of `session_id` and how many leading prompt tokens it covers (0: none usable).

        At least one prompt token is always left to prefill (its logits start the answer). An
        entry made under other weights is dropped (its keys were computed by them).
        """
        entry = self._entries.pop(session_id, None)
        if entry is None or entry.version != version:
            return None, 0
        n = 0
        limit = min(len(entry.token_ids), len(prompt_ids) - 1)
        a, b = entry.token_ids, prompt_ids
        while n < limit and a[n] == b[n]:
            n += 1
        return (entry, n) if n > 0 else (None, 0)

    def clear(self) -> None:
        self._entries.clear()
