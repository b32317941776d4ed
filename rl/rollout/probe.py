"""How a model does through `run_session` on a few tasks: success and format-error rates, no training.

    python -m patchgym.rl.rollout.probe --difficulty easy --episodes 8 --temperature 0.5

runs the model (default SmolLM2-135M-Instruct, float32 weights, a BF16 sampler group emulated by
the embedded sampler) on the bundled tasks of that difficulty, round robin until `--episodes`,
against an in-process environment (real sandboxes and grader), and prints one JSON object: the
counts by status, the success rate (reward 1), the fraction of episodes ended by format errors, the
valid calls among all turns, tokens and wall time. `--out FILE` also saves the trajectories.
It is a measurement, not part of the loop; the loop's own evaluation is `patchgym eval`.

    python -m patchgym.rl.rollout.probe --suffix-cost

measures instead what appending a reply costs (`Transcript.reply_ids`: render the whole
conversation as text, tokenize only the new suffix) over 30 turns, against one re-encode of the
whole conversation (what a loop that re-tokenised would pay every turn).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from collections import Counter
from typing import Any


async def probe(
    *,
    model: str | None = None,
    tasks: str = "bundled",
    difficulty: str | None = "easy",
    episodes: int = 8,
    temperature: float = 0.5,
    max_new_tokens: int = 128,
    max_turns: int = 6,
    max_context_tokens: int = 4096,
    concurrency: int = 8,
    tool_format: str = "hermes",
    out: str | None = None,
) -> dict[str, Any]:
    from patchgym.env.client import AsyncEnvClient
    from patchgym.rl.fleet.model import Group
    from patchgym.rl.models import load_model, load_tokenizer
    from patchgym.rl.rollout.session import SamplerRouter, SessionLimits, run_sessions
    from patchgym.rl.rollout.trajectories import save_trajectories
    from patchgym.rl.sampler.embedded import EmbeddedSampler
    from patchgym.rl.sampler.types import SamplingParams

    tokenizer = load_tokenizer(model)
    group = Group(name="probe-bf16", accelerator="cpu", sessions_per_replica=concurrency)
    sampler = EmbeddedSampler(load_model(model), group, tokenizer=tokenizer)
    params = SamplingParams(temperature=temperature, max_new_tokens=max_new_tokens)
    limits = SessionLimits(max_turns=max_turns, max_context_tokens=max_context_tokens, env={"max_turns": max_turns})
    started = time.monotonic()
    try:
        async with AsyncEnvClient.in_process(tasks=tasks) as env:
            infos = await env.tasks()
            ids = [t.instance_id for t in infos]
            if difficulty:
                wanted = _ids_of_difficulty(tasks, difficulty)
                ids = [i for i in ids if i in wanted]
            if not ids:
                raise SystemExit(f"no task of difficulty {difficulty!r} in {tasks}")
            plan = [ids[i % len(ids)] for i in range(episodes)]
            trajs = await run_sessions(env, SamplerRouter(sampler), tokenizer, plan, params,
                                       concurrency=concurrency, limits=limits, formatter=tool_format)
    finally:
        sampler.close()
    wall = time.monotonic() - started
    if out:
        save_trajectories(out, trajs)
    turns = [t for traj in trajs for t in traj.turns]
    statuses = Counter(traj.status for traj in trajs)
    return {
        "model": model or "smollm2-135m-instruct",
        "tasks": sorted(set(plan)),
        "episodes": len(trajs),
        "temperature": temperature,
        "max_new_tokens": max_new_tokens,
        "statuses": dict(statuses),
        "success_rate": sum(traj.reward == 1.0 for traj in trajs) / len(trajs),
        "format_error_rate": statuses.get("format_error", 0) / len(trajs),
        "turns": len(turns),
        "valid_call_turns": sum(not t.format_error for t in turns),
        "sampled_tokens": sum(traj.num_sampled for traj in trajs),
        "wall_s": round(wall, 1),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }


def suffix_cost(turns: int = 30, model: str | None = None) -> dict[str, Any]:
    from patchgym.rl.models import load_tokenizer
    from patchgym.rl.rollout.toolformat import get_format
    from patchgym.rl.rollout.transcript import Transcript
    from patchgym.rl.sampler.types import Generation

    tokenizer = load_tokenizer(model)
    transcript = Transcript(tokenizer, get_format())
    schemas = [{"type": "function", "function": {"name": name, "description": "a tool " * 40,
                                                 "parameters": {"type": "object", "properties": {}}}}
               for name in ("bash", "str_replace_editor", "submit")]
    transcript.start([{"role": "system", "content": "You fix issues."}, {"role": "user", "content": "bug " * 200}], schemas)
    call = get_format().format_calls([{"name": "bash", "arguments": {"command": "ls"}}])
    ids = list(tokenizer.encode(call, add_special_tokens=False)) + [tokenizer.eos_token_id]
    costs = []
    for i in range(turns):
        transcript.add_turn(Generation(ids, [0.0] * len(ids), 0, "probe", "stop"), call)
        started = time.perf_counter()
        transcript.add_reply(*transcript.reply_ids([{"role": "tool", "content": f"line of output {i}\n" * 30}]))
        costs.append(time.perf_counter() - started)
    started = time.perf_counter()
    tokenizer.encode(transcript.text, add_special_tokens=False)
    full = time.perf_counter() - started
    costs_ms = sorted(c * 1e3 for c in costs[1:])  # the first also renders the template's closing once
    return {"tokens": len(transcript), "median_suffix_ms": round(costs_ms[len(costs_ms) // 2], 3),
            "last_suffix_ms": round(costs[-1] * 1e3, 3),
            "full_reencode_ms": round(full * 1e3, 2), "load_avg_1m": round(os.getloadavg()[0], 2)}


def _ids_of_difficulty(tasks: str, difficulty: str) -> set[str]:
    """Task ids of a difficulty, read from `patchgym tasks export` (rl/ does not import tasks)."""
    from patchgym.rl.rollout.expert import export_task_rows

    return {row["instance_id"] for row in export_task_rows(tasks) if row.get("difficulty") == difficulty}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m patchgym.rl.rollout.probe", description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=None)
    parser.add_argument("--tasks", default="bundled")
    parser.add_argument("--difficulty", default="easy", help="only tasks of this difficulty ('' for all)")
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--temperature", type=float, default=0.5)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--max-turns", type=int, default=6)
    parser.add_argument("--max-context-tokens", type=int, default=4096)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--tool-format", default="hermes")
    parser.add_argument("--out", default=None, help="append the trajectories to this JSONL file")
    parser.add_argument("--suffix-cost", action="store_true", help="measure the cost of appending a reply instead")
    args = parser.parse_args(argv)
    if args.suffix_cost:
        print(json.dumps(suffix_cost(model=args.model)))
        return
    result = asyncio.run(probe(
        model=args.model, tasks=args.tasks, difficulty=args.difficulty or None, episodes=args.episodes,
        temperature=args.temperature, max_new_tokens=args.max_new_tokens, max_turns=args.max_turns,
        max_context_tokens=args.max_context_tokens, concurrency=args.concurrency, tool_format=args.tool_format,
        out=args.out,
    ))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
