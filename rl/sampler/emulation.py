"""A sampler group's number formats and kernel variant applied to a Hugging Face causal LM.

Owns: the emulated copy of a model (`EmulatedModel`), i.e. which parameters pass through the
group's weight format and how, the activation and KV-cache emulation, the kernel variants, the
attention function every emulated forward uses, and MoE routing capture. It does not own the KV
cache storage (`cache.py`), sampling (`sampling.py`) or scheduling (`embedded.py`).

What is quantized, as real W4A16 / W8A8 deployments do:
- the weights of every `nn.Linear` inside the decoder layers (attention q/k/v/o, MLP gate/up/down,
  shared experts) and the 3-D fused expert tensors of MoE blocks (per expert), through
  `patchgym.rl.quant.quantize_dequantize(w, group.weights)`;
- NOT the embeddings, the norms, `lm_head`, MoE routers (`*.gate`, `*_gate`: kept high precision
  by SGLang and ModelOpt): those are held in the group's serving dtype (bf16; fp16 for an fp16
  group), i.e. rounded to it once;
- activations (the inputs of the quantized Linears, and of fused experts' first projection) through
  `quantize_activations(x, "fp8_e4m3")` when the group says so (W8A8); the second projection
  inside fused experts is not emulated (its input never leaves transformers' expert kernel);
- keys and values written to the KV cache through `quantize_kv(x, group.kv_cache)`; attention then
  reads them back from the cache, the current token included, as a real fp8 KV cache does.
Kernel variants: `accumulate = "bf16"|"fp16"` rounds every emulated Linear's output to that dtype
(reduced-precision accumulation); `attention_splits = n > 1` computes attention as n flash-decoding
partial softmaxes over chunks of the key axis, combined by their maxima (another reduction order).
Computation itself runs in float32 on values the formats can represent. Attention is full causal
attention (sliding-window and soft-capped attention variants are not emulated).
"""

from __future__ import annotations

import copy
import os
import threading
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

import torch
import torch.nn.functional as F

from patchgym.rl.quant import quantize_activations, quantize_dequantize
from patchgym.rl.sampler.fp8_runtime import _probe, runtime_quantizers

ATTN_IMPLEMENTATION = "patchgym_emulated"
_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}

_local = threading.local()  # per thread: the attention context and the routing recorder


@dataclass(frozen=True)
class Emulation:
    """The formats and kernel variant of one group (all "off" = the plain float32 model)."""

    weights: str | None = None
    activations: str | None = None  # only "fp8_e4m3" is emulated (bf16/fp16 activations: float32)
    kv_cache: str | None = None  # only "fp8_e4m3" is emulated
    accumulate: str = "fp32"
    attention_splits: int = 1

    @classmethod
    def of_group(cls, group: Any) -> "Emulation":
        return cls(
            weights=group.weights,
            activations=group.activations if group.activations == "fp8_e4m3" else None,
            kv_cache=group.kv_cache if group.kv_cache == "fp8_e4m3" else None,
            accumulate=group.kernel.accumulate,
            attention_splits=group.kernel.attention_splits,
        )

    @property
    def serving_dtype(self) -> torch.dtype | None:
        """The dtype unquantized parameters are held in (None: float32, the reference)."""
        if self.weights is None:
            return None
        return torch.float16 if self.weights == "fp16" else torch.bfloat16


_verified: dict[str, bool] = {}


def _cast(x: torch.Tensor, fmt: str) -> torch.Tensor:
    """Saturating round to bf16/fp16, back in float32."""
    top = torch.finfo(_DTYPES[fmt]).max
    return x.clamp(-top, top).to(_DTYPES[fmt]).to(torch.float32)


def _casts_verified() -> bool:
    """torch's bf16/fp16 casts give rl.quant's bf16/fp16 weight values (checked once)."""
    if "casts" not in _verified:
        x = _probe() * 1e3
        _verified["casts"] = all(torch.equal(_cast(x, f), quantize_dequantize(x, f)) for f in _DTYPES)
    return _verified["casts"]



# --- attention ---------------------------------------------------------------------------------


@dataclass
class AttentionContext:
    """What one forward needs beyond its inputs: the mask and the kernel variant.

    `splits` and `accumulate` are one value for every row, or a tuple with one value per row of
    the batch: an engine shared by groups with the same formats but different kernels
    (`patchgym.rl.sampler.shared`) runs their rows in one batch, each under its own variant.
    `accumulate` None means the model's own (its emulation's) setting."""

    mask: torch.Tensor | None  # bool [B, 1, q, Lk] (True = attend) or None (attend to all)
    splits: int | tuple[int, ...] = 1
    accumulate: str | tuple[str, ...] | None = None
    _plans: dict = field(default_factory=dict, repr=False)  # per-forward memo of row index tensors

    def rows(self, what: str, values: tuple) -> list[tuple[Any, slice]]:
        """[(value, slice of consecutive rows with it)], computed once per forward (210 Linears and
        30 attention layers a step ask the same question); one entry means every row is alike.

        Why slices, not index tensors: `key[rows]` with an index tensor copies that part of the KV
        cache per layer and step; a slice is a view. Measured on the four BF16 groups of mixed-6
        sharing one engine (one row each, 1,000-token contexts): fancy indexing was 25% of a
        decode step's time; with slices, 20 decode steps took 2.63 s of CPU against 3.17 s."""
        plan = self._plans.get(what)
        if plan is None:
            plan = []
            if len(set(values)) == 1:
                plan.append((values[0], slice(None)))
            else:
                start = 0
                for i in range(1, len(values) + 1):
                    if i == len(values) or values[i] != values[start]:
                        plan.append((values[start], slice(start, i)))
                        start = i
            self._plans[what] = plan
        return plan


@contextmanager
def attention_context(ctx: AttentionContext) -> Iterator[None]:
    previous = getattr(_local, "attn", None)
    _local.attn = ctx
    try:
        yield
    finally:
        _local.attn = previous


def _split_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, scale: float, splits: int) -> torch.Tensor:
    """Attention as `splits` partial softmaxes over key chunks, merged by their maxima.

    Query heads are grouped by the key/value head they share (GQA) instead of repeating keys and
    values (why: two copies of the cache per layer and step saved).
    """
    b, hq, nq, d = q.shape
    hkv, lk = k.shape[1], k.shape[2]
    rep = hq // hkv
    qg = q.reshape(b, hkv, rep * nq, d)  # reshape: q arrives transposed (non-contiguous) from the attention module
    scores = torch.matmul(qg, k.transpose(-1, -2)).mul_(scale).view(b, hkv, rep, nq, lk)
    if mask is not None:
        scores = scores.masked_fill(~mask.view(mask.shape[0], 1, 1, *mask.shape[-2:]), float("-inf"))
    chunk = -(-lk // splits)
    pad = chunk * splits - lk
    if pad:
        scores = F.pad(scores, (0, pad), value=float("-inf"))
        v = F.pad(v, (0, 0, 0, pad))
    s = scores.view(b, hkv, rep, nq, splits, chunk)
    m = s.amax(dim=-1)  # per chunk maximum [b, g, r, q, S]
    dead = torch.isinf(m)  # a chunk that saw only masked keys
    m_safe = m.masked_fill(dead, 0.0)
    e = torch.exp(s - m_safe.unsqueeze(-1))
    l_c = e.sum(dim=-1)
    o_c = torch.einsum("bgrqsc,bgscd->bgrqsd", e, v.reshape(b, hkv, splits, chunk, v.shape[-1]))
    w = torch.exp(m - m.amax(dim=-1, keepdim=True)).masked_fill(dead, 0.0)
    out = (o_c * w.unsqueeze(-1)).sum(dim=-2) / (l_c * w).sum(dim=-1, keepdim=True)
    return out.reshape(b, hq, nq, d)


def emulated_attention(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attention_mask: Any, scaling: float | None = None, dropout: float = 0.0, **kwargs: Any) -> tuple[torch.Tensor, None]:
    """transformers' attention-interface signature; the mask comes from the thread's context."""
    ctx: AttentionContext | None = getattr(_local, "attn", None)
    if ctx is None:
        raise RuntimeError("an emulated model was called outside the sampler's forward (no attention context)")
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    splits = ctx.splits
    if isinstance(splits, tuple):
        plan = ctx.rows("splits", splits)
        if len(plan) == 1:
            splits = plan[0][0]
        else:  # rows of several kernel variants: each set of rows under its own split count
            out = torch.empty_like(query)
            for n, rows in plan:
                mask = ctx.mask[rows] if ctx.mask is not None and ctx.mask.shape[0] > 1 else ctx.mask
                out[rows] = _attend(query[rows], key[rows], value[rows], mask, scale, n)
            return out.transpose(1, 2).contiguous(), None
    return _attend(query, key, value, ctx.mask, scale, splits).transpose(1, 2).contiguous(), None


def _attend(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None, scale: float, splits: int) -> torch.Tensor:
    if splits > 1:
        return _split_attention(query, key, value, mask, scale, splits)
    return F.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=scale, enable_gqa=key.shape[1] != query.shape[1])


def _register_attention() -> None:
    from transformers import AttentionInterface

    AttentionInterface.register(ATTN_IMPLEMENTATION, emulated_attention)


# --- routing -----------------------------------------------------------------------------------


def expert_modules(model: torch.nn.Module) -> dict[int, torch.nn.Module]:
    """{decoder layer index: its fused experts module} (transformers' `*Experts` MoE layout)."""
    found: dict[int, torch.nn.Module] = {}
    for name, module in model.named_modules():
        if type(module).__name__.endswith("Experts") and hasattr(module, "is_transposed"):
            parts = name.split(".")
            if "layers" in parts:
                i = parts.index("layers")
                if i + 1 < len(parts) and parts[i + 1].isdigit():
                    found[int(parts[i + 1])] = module
    return found


def install_routing_recorder(model: torch.nn.Module) -> None:
    """Record, when asked, the expert ids each token is routed to (the experts' `top_k_index`)."""
    for layer, module in expert_modules(model).items():
        if getattr(module, "_pg_routing_hook", False):
            continue

        def pre_hook(mod: Any, args: tuple, kwargs: dict, layer: int = layer) -> None:
            rec = getattr(_local, "routing", None)
            if rec is not None:
                idx = kwargs.get("top_k_index", args[1] if len(args) > 1 else None)
                if idx is not None:
                    rec.setdefault(layer, []).append(idx.detach().clone())

        module.register_forward_pre_hook(pre_hook, with_kwargs=True)
        module._pg_routing_hook = True


@contextmanager
def record_routing(enabled: bool = True) -> Iterator[dict[int, list[torch.Tensor]]]:
    """Collect routing of the forwards run by this thread inside the block: {layer: [chunks]}."""
    previous = getattr(_local, "routing", None)
    rec: dict[int, list[torch.Tensor]] = {}
    _local.routing = rec if enabled else None
    try:
        yield rec
    finally:
        _local.routing = previous


# --- weights -----------------------------------------------------------------------------------


def _is_router(name: str) -> bool:
    last = name.rsplit(".", 2)[-2] if name.endswith((".weight", ".bias")) else name.rsplit(".", 1)[-1]
    return last == "gate" or last.endswith("_gate") or last == "router"


def _quantize_experts(w: torch.Tensor, fmt: str, transposed: bool) -> torch.Tensor:
    out = torch.empty_like(w)
    for e in range(w.shape[0]):
        m = w[e].transpose(0, 1) if transposed else w[e]  # [out, in]
        q = quantize_dequantize(m.contiguous(), fmt)
        out[e] = q.transpose(0, 1) if transposed else q
    return out


_ENCODED: "OrderedDict[tuple, dict[str, torch.Tensor]]" = OrderedDict()
_ENCODED_MAX = int(os.environ.get("PATCHGYM_SAMPLER_ENCODED_CACHE", "3"))  # entries of a model's size


class EmulatedModel:
    """A private copy of a causal LM whose forward runs under one group's emulation.

    `quantized_names` are the parameters that pass through the weight format; every other
    parameter is rounded to the serving dtype. `load(named_tensors)` applies the same rules to new
    weights (HF names) and copies them in place.
    """

    def __init__(self, model: torch.nn.Module, emulation: Emulation, *, copy_model: bool = True, kernel_variants: bool = False) -> None:
        _register_attention()
        self.emulation = emulation
        source_key = tuple((n, p.data_ptr(), p._version, p.dtype) for n, p in model.named_parameters())
        self.model = copy.deepcopy(model) if copy_model else model
        self.model.eval()
        self.model.requires_grad_(False)
        self.model.float()
        self.config = self.model.config
        self._set_attention(self.model)
        layers_prefix = self._layers_prefix()
        self.quantized_names: set[str] = set()
        self._transposed: dict[str, bool] = {}
        self._linears: list[torch.nn.Linear] = []
        for mname, module in self.model.named_modules():
            inside = mname.startswith(layers_prefix)
            if isinstance(module, torch.nn.Linear) and inside and not _is_router(mname):
                self.quantized_names.add(f"{mname}.weight")
                self._linears.append(module)
            elif inside and type(module).__name__.endswith("Experts") and hasattr(module, "is_transposed"):
                for pname, p in module.named_parameters(recurse=False):
                    if p.dim() == 3 and not pname.endswith("bias"):
                        self.quantized_names.add(f"{mname}.{pname}")
                        self._transposed[f"{mname}.{pname}"] = bool(module.is_transposed)
        install_routing_recorder(self.model)
        self._patch_modules(kernel_variants)
        if emulation.weights is not None:
            # why a cache: encoding SmolLM2 to nvfp4 takes ~15 s here (rl.quant, 210 matrices);
            # the replicas of a group (and `fleet check`'s groups sharing a format) encode the same
            # source weights once per process. Keyed by each source tensor's storage and in-place
            # version counter, so a source changed in place is encoded again.
            key = (emulation.weights, source_key)
            encoded = _ENCODED.get(key)
            if encoded is None:
                encoded = self.encode_all(dict(self.model.named_parameters()), check=False)
                _ENCODED[key] = encoded
                while len(_ENCODED) > _ENCODED_MAX:
                    _ENCODED.popitem(last=False)
            else:
                _ENCODED.move_to_end(key)
            self.assign(encoded)

    def _layers_prefix(self) -> str:
        for name, module in self.model.named_modules():
            if name.endswith("layers") and isinstance(module, torch.nn.ModuleList):
                return name + "."
        raise ValueError(f"{type(self.model).__name__} has no decoder `layers` ModuleList; not a supported causal LM")

    @staticmethod
    def _set_attention(model: torch.nn.Module) -> None:
        seen = set()
        for module in model.modules():
            cfg = getattr(module, "config", None)
            if cfg is not None and id(cfg) not in seen and hasattr(cfg, "_attn_implementation"):
                seen.add(id(cfg))
                cfg._attn_implementation = ATTN_IMPLEMENTATION

    def _patch_modules(self, kernel_variants: bool = False) -> None:
        """Patch the quantized Linears' forward for fp8 activations and reduced-precision
        accumulation. With `kernel_variants`, the accumulation is read per forward from the
        attention context (one value, or one per row), for engines shared by several groups."""
        emu = self.emulation
        act = emu.activations
        acc = _DTYPES.get(emu.accumulate)
        if act is None and acc is None and not kernel_variants:
            return  # why: unpatched Linears keep their plain forward (no per-call Python overhead)
        # q/k/v (and gate/up) read the same input tensor: quantize it once per forward, not 3 times
        # (why: ~40 us per activation quantization here, 210 Linears a step on SmolLM2).
        memo: dict[str, Any] = {"x": None, "q": None}

        act_q = runtime_quantizers()[1] if act == "fp8_e4m3" else (lambda t: quantize_activations(t, act))

        def quant_input(x: torch.Tensor) -> torch.Tensor:
            if memo["x"] is x:
                return memo["q"]
            q = act_q(x)
            memo["x"], memo["q"] = x, q
            return q

        def accumulate(y: torch.Tensor) -> torch.Tensor:
            ctx = getattr(_local, "attn", None) if kernel_variants else None
            chosen = ctx.accumulate if ctx is not None and ctx.accumulate is not None else emu.accumulate
            if isinstance(chosen, tuple):
                plan = ctx.rows("accumulate", chosen)
                if len(plan) > 1:  # rows of several variants: round only the rows that ask
                    for name, rows in plan:
                        if name in _DTYPES:
                            y[rows] = y[rows].to(_DTYPES[name]).to(y.dtype)
                    return y
                chosen = plan[0][0]
            dt = _DTYPES.get(chosen)
            return y.to(dt).to(y.dtype) if dt is not None else y

        for lin in self._linears:
            if acc is None and not kernel_variants:  # W8A8 alone: no accumulation step to call
                def forward(x: torch.Tensor, lin: torch.nn.Linear = lin) -> torch.Tensor:
                    return F.linear(quant_input(x), lin.weight, lin.bias)
            else:
                def forward(x: torch.Tensor, lin: torch.nn.Linear = lin) -> torch.Tensor:
                    if act is not None:
                        x = quant_input(x)
                    return accumulate(F.linear(x, lin.weight, lin.bias))

            lin.forward = forward
        if act is not None:
            for module in expert_modules(self.model).values():
                def pre(mod: Any, args: tuple, kwargs: dict) -> Any:
                    if args:
                        return (act_q(args[0]), *args[1:]), kwargs
                    kwargs["hidden_states"] = act_q(kwargs["hidden_states"])
                    return args, kwargs

                module.register_forward_pre_hook(pre, with_kwargs=True)

    def state_names(self) -> dict[str, torch.Tensor]:
        return dict(self.model.state_dict())

    def encode(self, name: str, tensor: torch.Tensor) -> torch.Tensor:
        """The value a parameter named `name` holds under this emulation (float32)."""
        t = tensor.detach().to(torch.float32)
        fmt = self.emulation.weights
        if fmt is None:
            return t
        if name in self.quantized_names:
            if fmt in _DTYPES and _casts_verified():
                return _cast(t, fmt)  # why: the same values, ~10x faster than the checked path
            if t.dim() == 3:
                return _quantize_experts(t, fmt, self._transposed.get(name, False))
            return quantize_dequantize(t.contiguous(), fmt)
        return _cast(t, "fp16" if self.emulation.serving_dtype == torch.float16 else "bf16")

    def encode_all(self, named: Mapping[str, torch.Tensor], *, check: bool = True) -> dict[str, torch.Tensor]:
        """Check `named` (HF names) against the model and encode every tensor (no model change)."""
        state = self.model.state_dict()
        if check:
            if not named:
                raise ValueError("the weights hold no tensors")
            unknown = [n for n in named if n not in state]
            if unknown:
                raise ValueError(f"the weights name {len(unknown)} tensors the model does not have: {', '.join(unknown[:5])}")
            for n, t in named.items():
                if not isinstance(t, torch.Tensor) or not torch.is_floating_point(t):
                    raise ValueError(f"weight {n!r} is not a floating-point tensor")
                if tuple(t.shape) != tuple(state[n].shape):
                    raise ValueError(f"weight {n!r} has shape {tuple(t.shape)}, the model's is {tuple(state[n].shape)}")
                if not torch.isfinite(t).all():
                    raise ValueError(f"weight {n!r} holds NaN or Inf")
        with torch.no_grad():
            return {n: self.encode(n, t) for n, t in named.items()}

    def assign(self, encoded: Mapping[str, torch.Tensor]) -> None:
        """Copy already encoded tensors into the model's parameters (between forwards)."""
        state = self.model.state_dict()
        with torch.no_grad():
            for n, t in encoded.items():
                state[n].copy_(t)  # state_dict tensors share storage with the parameters

    def load(self, named: Mapping[str, torch.Tensor], *, check: bool = True) -> None:
        self.assign(self.encode_all(named, check=check))
