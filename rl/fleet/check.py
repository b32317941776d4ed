"""`fleet check`: each group's mismatch against the trainer's weights, known before any GPU hour.

Owns `check_fleet`, its report (`FleetCheck`, `GroupCheck`), the fixed prompts, the format ranking
the report is expected to follow, and the report's rich table and progress bar.

Method. The fixed coding prompts below are rendered with the model's chat template; a response of
`tokens` tokens is sampled once per prompt from the trainer's weights (float32, T = 1, seeded), so
every group is teacher-forced on exactly the same token ids. For each group one `EmbeddedSampler`
(one replica is enough) gives the logits under the group's emulation (`logits`), the trainer's
view is `reference_logits`; on the response positions (the tokens RL trains on):

- weight error: ||W_q - W|| / ||W|| (Frobenius, over all the weights the group's format encodes);
- KL(q || p) exact over the vocabulary, mean per token;
- k3 = mean(r - 1 - log r), r = p(y)/q(y), on tokens y sampled from q (`samples` per position),
  and the fraction of those r outside MIS's band [low, high], via
  `patchgym.rl.corrections.mismatch_metrics`;
- top-1 agreement (argmax q = argmax p);
- for MoE models, routing agreement: the mean fraction of each position's top-k experts (per MoE
  layer) that the group's own weights route to as the trainer's weights do, and the fraction of
  (position, layer) pairs whose expert sets are identical.

Cost (why the defaults are 8 prompts x 48 tokens, 384 scored positions per group): `mixed-6` with
SmolLM2-135M took 89 s wall / 49 s CPU on one torch thread at load average 7-10 on this 2-core
machine; the formats' order was clear at that size (KL(q||p) ~0.31 NVFP4, ~0.05 FP8, ~0.01 BF16
with an FP8 KV cache).

A group whose backend is `sglang` is checked the same way (its declared formats, emulated
in-process), not against its servers.

Not covered: sampling behaviour of the sampler (its own tests).
"""

from __future__ import annotations

import gc
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterator

import torch

from .build import embedded_sampler_class, scaled_fleet
from .model import Fleet, Group

# Fixed prompts (written for this check): short coding requests like an agent's first turn.
PROMPTS = (
    "Write a Python function that parses a semantic version string like 1.4.2 into a tuple of ints.",
    "The test test_merge_overlapping fails with an off-by-one error in merge_spans. How would you debug it?",
    "Explain what this shell command does: git log --oneline --since=2.weeks -- src/ | wc -l",
    "Fix the bug: def mean(xs): return sum(xs) / len(xs) crashes on an empty list.",
    "Write a pytest test for a function slugify(title) that lowercases and replaces spaces with dashes.",
    "How do I read an INI file with duplicate section names in Python without losing values?",
    "Refactor this loop into a list comprehension: out = []\nfor x in items:\n    if x > 0:\n        out.append(x * 2)",
    "What is the difference between git rebase and git merge? Answer in three sentences.",
    "Implement a function that wraps text to a given width without breaking words.",
    "Why does my Python script raise UnicodeDecodeError when reading a file, and how do I fix it?",
    "Write a bash one-liner that finds the five largest files under the current directory.",
    "Add type hints to: def first(items, default=None): return items[0] if items else default",
    "A function returns the wrong day count between two dates across a leap year. What would you check?",
    "Write a regular expression that matches an ISO 8601 date such as 2024-02-29.",
    "Describe the steps to bisect a regression with git bisect.",
    "Write a Python class for a fixed-size ring buffer with push and pop.",
)

_FP4 = {"nvfp4", "nvfp4_4over6", "mxfp4"}


class CheckError(RuntimeError):
    """The check cannot run (model or tokenizer unusable); the message says what to do."""


def format_rank(group: Group) -> int:
    """How far a group's formats are expected to sit from BF16: 0 BF16/FP16, 1 FP8, 2 FP4."""
    if group.weights in _FP4:
        return 2
    if group.weights.startswith("fp8") or group.activations == "fp8_e4m3":
        return 1
    return 0


@dataclass
class GroupCheck:
    group: str
    accelerator: str
    weights: str
    activations: str
    kv_cache: str
    kernel: dict[str, Any]
    rank: int  # format_rank
    weight_error: float
    kl: float  # mean per-token KL(q || p), exact over the vocabulary
    k3: float  # its k3 estimate on tokens sampled from q
    top1: float  # top-1 agreement
    outside_band: float  # fraction of sampled tokens with p/q outside [low, high]
    below_band: float
    above_band: float
    tokens: int  # positions scored
    samples: int  # tokens sampled from q in all
    routing_agreement: float | None = None
    routing_exact: float | None = None
    seconds: float = 0.0


@dataclass
class FleetCheck:
    fleet: str
    model: str
    prompts: int
    response_tokens: int
    band: tuple[float, float]
    seed: int
    moe: bool
    groups: list[GroupCheck] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["band"] = list(self.band)
        data["ordering_violations"] = self.ordering_violations()
        return data

    def ordering_violations(self) -> list[str]:
        """Pairs that break the formats' order (FP4 further from BF16 than FP8, FP8 than BF16) by KL."""
        out = []
        for far in self.groups:
            for near in self.groups:
                if far.rank > near.rank and not far.kl > near.kl:
                    out.append(
                        f"group {far.group!r} ({far.weights}/{far.activations}) has KL {far.kl:.3g}, not more than "
                        f"group {near.group!r} ({near.weights}/{near.activations}) with {near.kl:.3g}"
                    )
        return out


Progress = Callable[[str, int, int], None]  # (what is being done, steps done, steps in all)


def render_prompts(tokenizer: Any, n: int) -> list[list[int]]:
    """The first `n` fixed prompts (cycled), chat-template rendered when the tokenizer has one."""
    out = []
    for i in range(n):
        text = PROMPTS[i % len(PROMPTS)]
        if getattr(tokenizer, "chat_template", None):
            rendered = tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True)
            ids = rendered["input_ids"] if hasattr(rendered, "keys") else rendered
        else:
            ids = tokenizer(text)["input_ids"]
        out.append([int(t) for t in ids])
    return out


def sample_responses(model: Any, prompts: list[list[int]], tokens: int, seed: int, eos_ids: set[int], pad_id: int) -> list[list[int]]:
    """One response per prompt from the trainer's weights (float32, T = 1, no top-k/top-p), seeded,
    all prompts in one left-padded batch (why: one decode step of 8 rows costs about what one row
    does here, 8x fewer steps than a row at a time). A response ends at its first end-of-sequence
    token, which is kept."""
    device = next(model.parameters()).device
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        ids[row, width - len(prompt):] = torch.tensor(prompt)
        mask[row, width - len(prompt):] = 1
    with torch.random.fork_rng(devices=[]), torch.inference_mode():
        torch.manual_seed(seed)
        out = model.generate(
            input_ids=ids.to(device), attention_mask=mask.to(device), do_sample=True, temperature=1.0, top_k=0,
            top_p=1.0, min_new_tokens=0, max_new_tokens=tokens, pad_token_id=pad_id,
            eos_token_id=sorted(eos_ids) or None,
        )
    responses = []
    for row in out[:, width:].tolist():
        response = []
        for token in row:
            response.append(int(token))
            if token in eos_ids:
                break
        responses.append(response)
    return responses


def _eos_ids(model: Any, tokenizer: Any) -> set[int]:
    ids: set[int] = set()
    for source in (getattr(model, "generation_config", None), getattr(model, "config", None)):
        value = getattr(source, "eos_token_id", None) if source is not None else None
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(int(v) for v in value)
    if getattr(tokenizer, "eos_token_id", None) is not None:
        ids.add(int(tokenizer.eos_token_id))
    return ids


def _quantized_names(sampler: Any, model: Any) -> list[str]:
    names = getattr(sampler, "quantized_names", None)
    if names is None:
        raise CheckError(f"the sampler {type(sampler).__name__} does not say which weights its format encodes (quantized_names)")
    return sorted(names)


def weight_error(sampler: Any, model: Any) -> float:
    """||W_q - W|| / ||W|| over the weights the group's format encodes (all of them together)."""
    reference = dict(model.state_dict())
    served = dict(sampler.model.state_dict())
    num = den = 0.0
    for name in _quantized_names(sampler, model):
        w = reference[name].detach().float()
        num += float((served[name].detach().float().to(w.device) - w).square().sum())
        den += float(w.square().sum())
    return (num / den) ** 0.5 if den > 0 else 0.0


def _routing(route_q: dict[int, torch.Tensor], route_p: dict[int, torch.Tensor], rows: torch.Tensor) -> tuple[float, float]:
    shared = []
    exact = []
    for layer, rp in route_p.items():
        rq = route_q[layer][rows]
        rp = rp[rows]
        hit = (rq.unsqueeze(-1) == rp.unsqueeze(-2)).any(-1)  # [n, k]: q's expert is among p's
        shared.append(hit.float().mean(-1))
        exact.append(hit.all(-1).float())
    return float(torch.stack(shared).mean()), float(torch.stack(exact).mean())


def check_fleet(
    fleet: Fleet,
    model: Any = None,
    *,
    tokenizer: Any = None,
    prompts: int = 8,
    tokens: int = 48,
    band: tuple[float, float] = (0.5, 5.0),
    seed: int = 0,
    samples: int = 16,
    groups: list[str] | None = None,
    progress: Progress | None = None,
) -> FleetCheck:
    """Check every group (or those named in `groups`) of `fleet`; see the module doc.

    `model` is a model spec for `patchgym.rl.models` (a known name, a local Hugging Face
    directory, None = the default) or a loaded causal LM (then pass its `tokenizer`)."""
    from patchgym.rl.corrections import mismatch_metrics
    from patchgym.rl.models import ModelNotFound, load_model, load_tokenizer

    started = time.perf_counter()
    low, high = band
    if not 0 < low < 1 < high:
        raise CheckError(f"the band must satisfy 0 < low < 1 < high (got [{low}, {high}])")
    if prompts < 1 or tokens < 1 or samples < 1:
        raise CheckError(f"prompts, tokens and samples must be >= 1 (got {prompts}, {tokens}, {samples})")
    chosen = list(fleet.groups)
    if groups is not None:
        missing = [name for name in groups if name not in {g.name for g in fleet.groups}]
        if missing:
            raise CheckError(f"fleet {fleet.name!r} has no group {', '.join(map(repr, missing))}")
        chosen = [g for g in fleet.groups if g.name in groups]
    # Every group is emulated in-process, whatever its backend: the check is of the formats and
    # kernels a group declares, before any server runs.
    one_each = scaled_fleet(fleet.model_copy(update={"groups": chosen}), replicas=1)
    cls = embedded_sampler_class()
    steps = len(chosen) + 2
    tell = progress or (lambda what, done, total: None)

    tell("loading the model", 0, steps)
    label = "the given model"
    if model is None or isinstance(model, str) or hasattr(model, "__fspath__"):
        label = str(model or "smollm2-135m-instruct")
        try:
            loaded = load_model(model)
            tokenizer = tokenizer or load_tokenizer(model)
        except ModelNotFound as exc:
            raise CheckError(str(exc)) from None
        model = loaded
    if tokenizer is None:
        raise CheckError("check_fleet got a loaded model without its tokenizer: pass tokenizer=")
    model.eval()

    tell("sampling responses from the trainer's weights", 1, steps)
    prompt_ids = render_prompts(tokenizer, prompts)
    eos = _eos_ids(model, tokenizer)
    pad = getattr(tokenizer, "pad_token_id", None)
    responses = sample_responses(model, prompt_ids, tokens, seed, eos, int(pad if pad is not None else min(eos, default=0)))
    sequences = [p + r for p, r in zip(prompt_ids, responses)]
    # Logit row t predicts token t+1: the rows that predict the response tokens.
    rows = [torch.arange(len(p) - 1, len(p) + len(r) - 1) for p, r in zip(prompt_ids, responses)]
    reference: list[tuple[torch.Tensor, dict[int, torch.Tensor]]] = []
    for seq in sequences:
        reference.append(_reference(model, seq))
    moe = any(routes for _, routes in reference)

    report = FleetCheck(fleet=fleet.name, model=label, prompts=prompts, response_tokens=tokens, band=(low, high),
                        seed=seed, moe=moe)
    for index, group in enumerate(one_each.groups):
        tell(f"group {group.name} ({group.weights}/{group.activations}/{group.kv_cache})", index + 2, steps)
        t0 = time.perf_counter()
        sampler = cls(model, group, tokenizer=tokenizer, replica="check")
        try:
            werr = weight_error(sampler, model)
            kl_parts, top1_parts, lp_parts, lq_parts, shared, exact = [], [], [], [], [], []
            generator = torch.Generator().manual_seed(seed * 7919 + 1)
            for seq, row, (ref_logits, ref_routes) in zip(sequences, rows, reference):
                with torch.no_grad():
                    if moe:
                        logits, routes = sampler.logits(seq, return_routing=True)
                    else:
                        logits, routes = sampler.logits(seq), {}
                # float64: for BF16 groups q and p differ by ~1e-7, float32's own rounding of the
                # normalisation (a float32 log-softmax gave KL = -4.5e-8 on the tiny MoE model).
                lq = torch.log_softmax(logits[row].double(), dim=-1)
                lp = torch.log_softmax(ref_logits[row].double(), dim=-1)
                kl_parts.append((lq.exp() * (lq - lp)).sum(-1))
                top1_parts.append((lq.argmax(-1) == lp.argmax(-1)).float())
                drawn = torch.multinomial(lq.exp(), samples, replacement=True, generator=generator)  # [n, samples]
                lq_parts.append(lq.gather(-1, drawn).reshape(-1))
                lp_parts.append(lp.gather(-1, drawn).reshape(-1))
                if moe:
                    a, b = _routing(routes, ref_routes, row)
                    shared.append(a * len(row))
                    exact.append(b * len(row))
            metrics = mismatch_metrics(torch.cat(lp_parts), torch.cat(lq_parts), low=low, high=high)
            n = sum(len(r) for r in rows)
            below, above = float(metrics["masked_below"]), float(metrics["masked_above"])
            report.groups.append(GroupCheck(
                group=group.name, accelerator=group.accelerator, weights=group.weights, activations=group.activations,
                kv_cache=group.kv_cache, kernel=group.kernel.model_dump(), rank=format_rank(group),
                weight_error=werr, kl=float(torch.cat(kl_parts).mean()), k3=float(metrics["k3"]),
                top1=float(torch.cat(top1_parts).mean()), outside_band=below + above, below_band=below,
                above_band=above, tokens=n, samples=int(metrics["tokens"]),
                routing_agreement=sum(shared) / n if moe else None, routing_exact=sum(exact) / n if moe else None,
                seconds=time.perf_counter() - t0,
            ))
        finally:
            sampler.close()
            del sampler
            gc.collect()
    tell("done", steps, steps)
    report.seconds = time.perf_counter() - started
    return report


def _reference(model: Any, seq: list[int]) -> tuple[torch.Tensor, dict[int, torch.Tensor]]:
    from patchgym.rl.sampler.embedded import reference_logits

    logits, routes = reference_logits(model, seq, return_routing=True)
    return logits, routes


# -- presentation -------------------------------------------------------------------------------


@contextmanager
def progress_bar(console: Any) -> Iterator[Progress]:
    """A rich progress bar on `console` (stderr) driven by `check_fleet`'s progress callback."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress as RichProgress, TextColumn, TimeElapsedColumn

    with RichProgress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console, transient=True) as bar:
        task = bar.add_task("starting", total=None)

        def advance(what: str, done: int, total: int) -> None:
            bar.update(task, description=what, completed=done, total=total)

        yield advance


def report_table(report: FleetCheck) -> Any:
    from rich.table import Table

    low, high = report.band
    table = Table(title=f"fleet check {report.fleet}: {report.model}, {report.prompts} prompts x {report.response_tokens} "
                        f"response tokens, teacher-forced (seed {report.seed})")
    columns = ["group", "weights / act / KV", "kernel", "weight err", "KL(q||p)", "k3", "top-1", f"p/q outside [{low:g}, {high:g}]"]
    if report.moe:
        columns += ["experts shared", "expert sets equal"]
    columns.append("s")
    for column in columns:
        table.add_column(column, justify="left" if column in ("group", "weights / act / KV", "kernel") else "right", no_wrap=True)
    for g in report.groups:
        kernel = ", ".join(f"{k}={v}" for k, v in g.kernel.items() if (k, v) not in (("accumulate", "fp32"), ("attention_splits", 1))) or "default"
        row = [g.group, f"{g.weights} / {g.activations} / {g.kv_cache}", kernel, f"{g.weight_error:.2e}", f"{g.kl:.2e}",
               f"{g.k3:.2e}", f"{g.top1:.1%}", f"{g.outside_band:.2%}"]
        if report.moe:
            row += [f"{g.routing_agreement:.1%}", f"{g.routing_exact:.1%}"]
        row.append(f"{g.seconds:.1f}")
        table.add_row(*row)
    table.caption = f"{len(report.groups)} groups in {report.seconds:.1f} s; KL, k3 and the band are per response token"
    return table
