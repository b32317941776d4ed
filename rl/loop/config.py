"""A training run's configuration: one TOML file, validated by pydantic, errors that name the field.

Owns the schema of a run (`RunConfig` and its sections), loading it from a file or a bundled preset
(`presets/<name>.toml`), dotted overrides (`--set batch.prompts=2`), and turning a validation error
into one readable message that names the file and every bad field. It does not run anything: the
loop (`loop.py`) reads a `RunConfig`.

Sections (every field has a default except where a run cannot guess):

    name, seed, output_dir, updates
    [model]       spec (a known model name or a local HF directory)
    [fleet]       name (bundled fleet name or a TOML path) and CPU scale-down overrides:
                  replicas, sessions_per_replica, groups (a subset, by name)
    [environment] url ("bundled" = start `patchgym serve` on loopback for the run), tasks, token
    [tasks]       train, eval: task ids (eval must be held out from train); an entry "@FILE"
                  stands for every task id of that task file (the reference configs use it)
    [loss]        kind (grpo|tis|mis|sc|sc_tis|sc_mis), mis_low/mis_high, tis_cap, replay, level
    [batch]       prompts x samples, buffer_factor (FIFO size in groups = factor x prompts)
    [sampling]    temperature, top_p, top_k
    [limits]      max_turns, max_tokens_per_turn, max_context
    [optimizer]   lr, weight_decay, betas, grad_clip, micro_batch_tokens
    [staleness]   cap (absent = no cap), policy keep|drop|pace
    [eval]        every (updates; 0 = only at the end), n, k, temperature, at_end
    [checkpoint]  every (updates; 0 = only at the end)
    [warmup]      supervised cold start: enabled, steps, lr, batch, tasks ("train" or ids)
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

PRESETS_DIR = Path(__file__).resolve().parent / "presets"
LOSS_KINDS = ("grpo", "tis", "mis", "sc", "sc_tis", "sc_mis")


class ConfigError(ValueError):
    """A run configuration that cannot be used; the message names the file and the field."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelSection(_Section):
    spec: str = "smollm2-135m-instruct"


class FleetSection(_Section):
    name: str = "mixed-6"  # a bundled fleet's name or the path of a fleet TOML
    # Scale-down overrides (CPU): applied to every group when set.
    replicas: int | None = Field(None, ge=1, le=4096)
    sessions_per_replica: int | None = Field(None, ge=1, le=4096)
    groups: list[str] = Field(default_factory=list)  # only these groups (empty: all)
    # Embedded groups with the same formats share one decode engine (one copy of the weights; each
    # group's kernel variant row by row): mixed-6's 8 groups run on 3 engines, 2.6x the tokens/s
    # of 8 engines here (patchgym.rl.sampler.shared). False: one engine per group's replica.
    share_engines: bool = True


class EnvironmentSection(_Section):
    url: str = "bundled"  # an http(s) URL of a running `patchgym serve`, or "bundled"
    tasks: str = "bundled"  # what a bundled server serves
    token: str | None = None
    max_episodes: int = Field(64, ge=1)

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        if value != "bundled" and not value.startswith(("http://", "https://")):
            raise ValueError(f"must be 'bundled' or an http(s) URL, got {value!r}")
        return value


class TasksSection(_Section):
    train: list[str] = Field(min_length=1)
    eval: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _held_out(self) -> "TasksSection":
        both = sorted(set(self.train) & set(self.eval))
        if both:
            raise ValueError(f"eval tasks must be held out from train; in both: {', '.join(both)}")
        return self


class LossSection(_Section):
    kind: Literal["grpo", "tis", "mis", "sc", "sc_tis", "sc_mis"] = "sc_mis"
    mis_low: float = Field(0.5, gt=0)
    mis_high: float = Field(5.0, gt=0)
    tis_cap: float = Field(2.0, gt=0)
    replay: bool = True  # top-p/top-k support replay (mask replay); off: full-vocabulary log-probs
    level: Literal["token", "sequence", "geometric"] = "token"
    # Divide advantages by the group std. None: the recipe's default (no for SC kinds, yes for others).
    normalize_std: bool | None = None

    @model_validator(mode="after")
    def _band(self) -> "LossSection":
        if self.mis_low >= self.mis_high:
            raise ValueError(f"mis_low ({self.mis_low}) must be below mis_high ({self.mis_high})")
        if self.normalize_std and self.kind.startswith("sc"):
            raise ValueError("score centering does not divide advantages by the group std (normalize_std must be false)")
        return self

    @property
    def std_normalised(self) -> bool:
        if self.normalize_std is None:
            return not self.kind.startswith("sc")
        return self.normalize_std


class BatchSection(_Section):
    prompts: int = Field(2, ge=1)
    samples: int = Field(4, ge=1)
    buffer_factor: float = Field(2.0, ge=1.0)  # FIFO capacity in groups = factor x prompts
    # False: admit no more groups than the run's remaining updates will train (a finite run wastes
    # no sampling, and the trainer gets the cores back at the end); True: keep every session slot
    # full to the end, as an endless run would (bench/loop measures that steady state).
    sample_ahead: bool = False

    @property
    def buffer_groups(self) -> int:
        return max(1, int(round(self.buffer_factor * self.prompts)))


class SamplingSection(_Section):
    temperature: float = Field(1.0, gt=0)
    top_p: float = Field(1.0, gt=0, le=1)
    top_k: int = -1

    @field_validator("top_k")
    @classmethod
    def _top_k(cls, value: int) -> int:
        if value == 0 or value < -1:
            raise ValueError(f"must be -1 (whole vocabulary) or >= 1, got {value}")
        return value


class LimitsSection(_Section):
    max_turns: int = Field(8, ge=1)
    max_tokens_per_turn: int = Field(128, ge=1)
    max_context: int = Field(4096, ge=16)
    # malformed turns in a row that end an episode with format_error (None: the server's default, 3)
    max_format_errors: int | None = Field(None, ge=1, le=10_000)


class OptimizerSection(_Section):
    lr: float = Field(1e-6, gt=0)
    weight_decay: float = Field(0.1, ge=0)
    betas: tuple[float, float] = (0.9, 0.98)
    grad_clip: float = Field(1.0, gt=0)
    micro_batch_tokens: int = Field(4096, ge=16)
    autocast_bf16: bool = False  # BF16 autocast in the trainer's forward (faster on CPUs with AMX-BF16)

    @field_validator("betas")
    @classmethod
    def _betas(cls, value: tuple[float, float]) -> tuple[float, float]:
        if not all(0 <= b < 1 for b in value):
            raise ValueError(f"both betas must be in [0, 1), got {list(value)}")
        return value


class StalenessSection(_Section):
    cap: int | None = Field(None, ge=0)  # absent: no cap (the reference run)
    policy: Literal["keep", "drop", "pace"] = "keep"


class EvalSection(_Section):
    every: int = Field(0, ge=0)  # updates between evaluations; 0 = only at the end
    at_end: bool = True
    n: int = Field(4, ge=1)
    k: list[int] = Field(default_factory=lambda: [1])
    temperature: float | None = Field(None, gt=0)  # None: the run's sampling temperature
    sessions: int = Field(4, ge=1)  # concurrent sessions of the BF16 eval sampler

    @model_validator(mode="after")
    def _k(self) -> "EvalSection":
        bad = [k for k in self.k if k < 1 or k > self.n]
        if bad or not self.k:
            raise ValueError(f"every k must be in 1..n={self.n}; got k={self.k}")
        return self


class CheckpointSection(_Section):
    every: int = Field(0, ge=0)  # 0 = only at the end
    keep: int = Field(2, ge=1)


class WarmupSection(_Section):
    enabled: bool = False
    steps: int = Field(20, ge=1)
    lr: float = Field(1e-4, gt=0)
    batch: int = Field(4, ge=1)  # expert trajectories per step
    tasks: list[str] | Literal["train"] = "train"
    measure: bool = True  # success rate before/after on train and eval tasks
    measure_samples: int = Field(4, ge=1)


class ProbeSection(_Section):
    # The per-update format probe (patchgym.rl.loop.probe_kl): every group teacher-forced on one
    # window of the update's tokens. tokens = 0 switches it off.
    tokens: int = Field(64, ge=0, le=4096)  # sampled tokens scored
    context: int = Field(64, ge=1, le=4096)  # tokens before them in the window


class RunConfig(_Section):
    name: str = "run"
    seed: int = 0
    output_dir: str = "runs/run"
    updates: int = Field(4, ge=1)
    model: ModelSection = Field(default_factory=ModelSection)
    fleet: FleetSection = Field(default_factory=FleetSection)
    environment: EnvironmentSection = Field(default_factory=EnvironmentSection)
    tasks: TasksSection
    loss: LossSection = Field(default_factory=LossSection)
    batch: BatchSection = Field(default_factory=BatchSection)
    sampling: SamplingSection = Field(default_factory=SamplingSection)
    limits: LimitsSection = Field(default_factory=LimitsSection)
    optimizer: OptimizerSection = Field(default_factory=OptimizerSection)
    staleness: StalenessSection = Field(default_factory=StalenessSection)
    eval: EvalSection = Field(default_factory=EvalSection)
    checkpoint: CheckpointSection = Field(default_factory=CheckpointSection)
    warmup: WarmupSection = Field(default_factory=WarmupSection)
    probe: ProbeSection = Field(default_factory=ProbeSection)

    @model_validator(mode="after")
    def _cross(self) -> "RunConfig":
        if self.limits.max_tokens_per_turn >= self.limits.max_context:
            raise ValueError(
                f"limits.max_tokens_per_turn ({self.limits.max_tokens_per_turn}) must be below "
                f"limits.max_context ({self.limits.max_context})"
            )
        return self

    def with_loss(self, kind: str) -> "RunConfig":
        """The same run with another loss (for ablations); SC kinds never normalise by std."""
        if kind not in LOSS_KINDS:
            raise ConfigError(f"unknown loss {kind!r} (known: {', '.join(LOSS_KINDS)})")
        loss = self.loss.model_copy(update={"kind": kind, "normalize_std": None})
        return self.model_copy(update={"loss": loss, "name": f"{self.name}-{kind}"})


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESETS_DIR.glob("*.toml"))


def preset_path(name: str) -> Path:
    path = PRESETS_DIR / f"{name}.toml"
    if not path.is_file():
        raise ConfigError(f"no preset named {name!r} (presets: {', '.join(preset_names()) or 'none'})")
    return path


def _format_error(exc: ValidationError, source: str) -> str:
    lines = [f"{source}: invalid configuration ({exc.error_count()} error(s))"]
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown field"
        elif err["type"] == "missing":
            msg = "required field is missing"
        lines.append(f"  {where}: {msg}")
    return "\n".join(lines)


def _parse_value(text: str) -> Any:
    """An override's value as TOML would read it (numbers, booleans, strings, lists)."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text  # a bare word: a string


def apply_overrides(data: dict[str, Any], overrides: dict[str, Any] | list[str] | None) -> dict[str, Any]:
    """Set dotted keys (`"batch.prompts": 2` or `"batch.prompts=2"` strings) in a raw config dict."""
    if not overrides:
        return data
    items: list[tuple[str, Any]]
    if isinstance(overrides, dict):
        items = list(overrides.items())
    else:
        items = []
        for item in overrides:
            if "=" not in item:
                raise ConfigError(f"override {item!r} must be KEY=VALUE (e.g. batch.prompts=2)")
            key, value = item.split("=", 1)
            items.append((key.strip(), _parse_value(value.strip())))
    for key, value in items:
        parts = key.split(".")
        node = data
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"override {key!r}: {part!r} is not a section")
            node = child
        if value is None:
            node.pop(parts[-1], None)
        else:
            node[parts[-1]] = value
    return data


def parse_config(data: dict[str, Any], source: str = "<config>") -> RunConfig:
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_error(exc, source)) from None


def load_config(
    path: str | Path | None = None,
    *,
    preset: str | None = None,
    overrides: dict[str, Any] | list[str] | None = None,
) -> RunConfig:
    """Read a run configuration from a TOML file or a bundled preset, with dotted overrides."""
    if (path is None) == (preset is None):
        raise ConfigError("give exactly one of a config file or a preset")
    file = preset_path(preset) if preset is not None else Path(path)  # type: ignore[arg-type]
    try:
        text = file.read_text()
    except FileNotFoundError:
        raise ConfigError(f"{file}: no such config file") from None
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read it ({exc.strerror or exc})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: not valid TOML ({exc})") from None
    data = apply_overrides(data, overrides)
    return parse_config(data, str(file))
