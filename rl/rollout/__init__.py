"""patchgym.rl.rollout: token-in-token-out agent sessions against the environment, and expert trajectories.

* `toolformat.py`: the environment's messages and tool schemas written for a model family (`ToolFormat`).
* `transcript.py`: the flat token sequence, built append-only, and the template's append-only check.
* `session.py`: `run_session` (one episode, one router), `SessionLimits`, `SamplerRouter`.
* `trajectories.py`: `save_trajectories` / `load_trajectories` (JSONL) and `check_trajectory`.
* `expert.py`: gold patches replayed as tool calls through `run_session` (the SFT cold start).
"""

from patchgym.rl.rollout.expert import (
    ExpertPlan,
    ExpertReport,
    ExpertRouter,
    TaskRowsError,
    build_expert_report,
    build_expert_trajectories,
    expert_trajectory,
    export_task_rows,
    load_task_rows,
)
from patchgym.rl.rollout.session import (
    GenerationContractError,
    Router,
    SamplerRouter,
    SessionLimits,
    run_session,
    run_sessions,
)
from patchgym.rl.rollout.toolformat import FORMATS, ToolFormat, get_format, register_format
from patchgym.rl.rollout.trajectories import (
    TrajectoryCheckError,
    check_trajectory,
    episode_problems,
    load_trajectories,
    save_trajectories,
    trajectory_problems,
)
from patchgym.rl.rollout.transcript import TemplateNotAppendOnly, Transcript

__all__ = [
    "FORMATS",
    "ExpertPlan",
    "ExpertReport",
    "ExpertRouter",
    "GenerationContractError",
    "Router",
    "SamplerRouter",
    "SessionLimits",
    "TaskRowsError",
    "TemplateNotAppendOnly",
    "ToolFormat",
    "Transcript",
    "TrajectoryCheckError",
    "build_expert_report",
    "build_expert_trajectories",
    "check_trajectory",
    "episode_problems",
    "expert_trajectory",
    "export_task_rows",
    "get_format",
    "load_task_rows",
    "load_trajectories",
    "register_format",
    "run_session",
    "run_sessions",
    "save_trajectories",
    "trajectory_problems",
]
