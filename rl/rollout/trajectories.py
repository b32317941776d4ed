"""Saved trajectories: JSON Lines that are safe to append to, and the check that nothing was re-tokenised.

`save_trajectories(path, trajectories)` appends one JSON object a line in ONE write to a file
opened with O_APPEND, so concurrent writers and a crash leave whole lines (at worst a torn last
line). `load_trajectories(path)` reads them back; a torn last line (no newline, not JSON) is
skipped, any other bad line is an error naming the file and line.

`check_trajectory(traj, tokenizer)` verifies what anyone holding a saved trajectory can check:
every turn's sampled ids sit at its offset with loss mask 1, every other token (prompt and the
environment's replies) has loss mask 0, log q 0, weight version -1 and the support `[its id]`, and
each turn's `text` (what the environment received) is `decode(sampled_ids,
skip_special_tokens=True)`. It does not re-render the chat template (the session checks that the
template is append-only as it goes). `episode_problems(traj, episode)` compares a trajectory with
what the environment recorded of its episode (`GET /episodes/{id}` or a line of the server's
episode log): the assistant messages it received are the turns' texts, and an episode that ended
the session has the trajectory's status and reward.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable

from patchgym.rl.trajectory import Trajectory


class TrajectoryCheckError(ValueError):
    """A trajectory whose ids, masks or texts disagree; the message lists every problem."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def save_trajectories(path: str | os.PathLike[str], trajectories: Iterable[Trajectory]) -> int:
    """Append the trajectories to `path` (created with its folder); returns how many were written."""
    lines = [traj.to_json() + "\n" for traj in trajectories]
    if not lines:
        return 0
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(lines).encode("utf-8")
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        view = memoryview(data)
        while view:  # a regular file takes it in one write; the loop only guards a short write
            written = os.write(fd, view)
            view = view[written:]
    finally:
        os.close(fd)
    return len(lines)


def load_trajectories(path: str | os.PathLike[str]) -> list[Trajectory]:
    source = Path(path)
    try:
        raw = source.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(f"{source}: no such trajectory file") from None
    lines = raw.split(b"\n")
    out: list[Trajectory] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        torn_last = number == len(lines)  # no newline after it: a write cut short
        try:
            out.append(Trajectory.from_json(line.decode("utf-8")))
        except (ValueError, TypeError, KeyError) as exc:
            if torn_last:
                break
            raise ValueError(f"{source}:{number}: not a trajectory ({type(exc).__name__}: {exc})") from None
    return out


def trajectory_problems(traj: Trajectory, tokenizer: Any) -> list[str]:
    """Every way `traj` breaks the token-in-token-out layout (empty when it holds)."""
    problems: list[str] = []
    try:
        traj.validate()
    except ValueError as exc:
        return [str(exc)]
    n = len(traj.token_ids)
    sampled = [False] * n
    previous_end = traj.prompt_len
    for i, turn in enumerate(traj.turns):
        if turn.offset < previous_end:
            problems.append(f"turn {i} starts at {turn.offset}, inside the prompt or the turn before (ends at {previous_end})")
        previous_end = turn.offset + len(turn.sampled_ids)
        for k in range(turn.offset, min(previous_end, n)):
            sampled[k] = True
        decoded = tokenizer.decode(turn.sampled_ids, skip_special_tokens=True)
        if decoded != turn.text:
            problems.append(f"turn {i}'s text is not the decode of its sampled ids: {turn.text[:60]!r} vs {decoded[:60]!r}")
    env_unmasked = [k for k in range(n) if not sampled[k] and traj.loss_mask[k] != 0]
    if env_unmasked:
        problems.append(f"{len(env_unmasked)} environment token(s) have loss mask 1 (first at {env_unmasked[0]})")
    env = [k for k in range(n) if not sampled[k]]
    if any(traj.logprobs[k] != 0.0 for k in env):
        problems.append("environment tokens have a log q other than 0")
    if any(traj.weight_versions[k] != -1 for k in env):
        problems.append("environment tokens have a weight version other than -1")
    if traj.support_ids is not None and traj.support_logprobs is not None:
        bad = [k for k in env if traj.support_ids[k] != [traj.token_ids[k]] or traj.support_logprobs[k] != [0.0]]
        if bad:
            problems.append(f"{len(bad)} environment token(s) have a support other than [their id] (first at {bad[0]})")
        missing = [k for k in range(n) if sampled[k] and traj.token_ids[k] not in traj.support_ids[k]]
        if missing:
            problems.append(f"{len(missing)} sampled token(s) are not in their own support (first at {missing[0]})")
    if traj.num_sampled != sum(len(t.sampled_ids) for t in traj.turns):
        problems.append("the loss mask's count differs from the turns' sampled ids")
    return problems


def episode_problems(traj: Trajectory, episode: Any) -> list[str]:
    """How `traj` disagrees with the environment's record of its episode (an EpisodeState, or a
    dict with `episode_id`, `transcript`, `status`, `reward`: the episode log's records)."""
    record = episode.model_dump() if hasattr(episode, "model_dump") else dict(episode)
    problems = []
    if record.get("episode_id") != traj.episode_id:
        return [f"the record is of episode {record.get('episode_id')!r}, the trajectory of {traj.episode_id!r}"]
    received = [m.get("content") for m in record.get("transcript") or [] if m.get("role") == "assistant"]
    texts = [turn.text for turn in traj.turns]
    if received != texts:
        at = next((i for i, (a, b) in enumerate(zip(received, texts)) if a != b), min(len(received), len(texts)))
        problems.append(f"the environment received {len(received)} assistant message(s), the trajectory has "
                        f"{len(texts)} turn(s); they differ from turn {at}")
    ended_by_env = bool(traj.turns) and traj.turns[-1].env_status not in ("", "running")
    if ended_by_env and (record.get("status"), float(record.get("reward") or 0.0)) != (traj.status, traj.reward):
        problems.append(f"the episode ended {record.get('status')} with reward {record.get('reward')}, "
                        f"the trajectory says {traj.status} with {traj.reward}")
    return problems


def check_trajectory(traj: Trajectory, tokenizer: Any) -> None:
    """Raise TrajectoryCheckError listing every problem of `traj` (see trajectory_problems)."""
    problems = trajectory_problems(traj, tokenizer)
    if problems:
        raise TrajectoryCheckError([f"{traj.task_id}#{traj.sample_index}: {p}" for p in problems])
