"""The fleet file's schema: sampler groups (pools), their number formats, capacity and price.

A fleet is a TOML file with one `[[groups]]` table per group (see `bundled/*.toml`). This module is
the schema only; loading a file with errors that name the file, the group and the field is
`load.py`'s job. Format names are those of `patchgym.rl.quant`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

WeightFormat = Literal["bf16", "fp16", "fp8_e4m3", "fp8_e4m3_block128", "mxfp4", "nvfp4", "nvfp4_4over6"]
ActivationFormat = Literal["bf16", "fp16", "fp8_e4m3"]
KVCacheFormat = Literal["bf16", "fp16", "fp8_e4m3"]
Backend = Literal["embedded", "sglang"]


class KernelVariant(BaseModel):
    """How a group's kernels differ from another's with the same formats (real accelerators do)."""

    model_config = ConfigDict(extra="forbid")

    # Accumulate matmuls in this dtype (e.g. "bf16": reduced-precision accumulation), else float32.
    accumulate: Literal["fp32", "bf16", "fp16"] = "fp32"
    # Split the attention softmax over this many chunks of the key axis (flash-decoding style), which
    # changes the order of the reductions. 1 = one pass.
    attention_splits: int = Field(1, ge=1, le=64)


class Group(BaseModel):
    """One sampler group (pool): identical replicas on one accelerator class."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    accelerator: str = Field(min_length=1, description="accelerator class, e.g. B200, H100, A100-80GB")
    weights: WeightFormat = "bf16"
    activations: ActivationFormat = "bf16"
    kv_cache: KVCacheFormat = "bf16"
    backend: Backend = "embedded"
    replicas: int = Field(1, ge=1, le=4096)
    sessions_per_replica: int = Field(8, ge=1, le=4096, description="capacity: concurrent sessions per replica")
    price_per_gpu_hour: float = Field(0.0, ge=0, description="list price, USD per GPU-hour")
    gpus_per_replica: int = Field(1, ge=1, le=64)
    kernel: KernelVariant = Field(default_factory=KernelVariant)
    # sglang backend only: base URLs of the replicas, one per replica.
    endpoints: list[str] = Field(default_factory=list)
    # sglang backend only: extra server launch arguments (`--flag value` pairs as a table).
    server_args: dict[str, str | int | float | bool] = Field(default_factory=dict)

    @property
    def capacity(self) -> int:
        """Sessions the whole group serves at once."""
        return self.replicas * self.sessions_per_replica

    @property
    def price_per_replica_hour(self) -> float:
        return self.price_per_gpu_hour * self.gpus_per_replica

    @model_validator(mode="after")
    def _backend_fields(self) -> "Group":
        if self.backend == "sglang" and self.endpoints and len(self.endpoints) != self.replicas:
            raise ValueError(f"{len(self.endpoints)} endpoints for {self.replicas} replicas")
        return self


class Fleet(BaseModel):
    """A named set of sampler groups."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    description: str = ""
    groups: list[Group] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_names(self) -> "Fleet":
        seen: set[str] = set()
        for group in self.groups:
            if group.name in seen:
                raise ValueError(f"two groups are named {group.name!r}")
            seen.add(group.name)
        return self

    def group(self, name: str) -> Group:
        for group in self.groups:
            if group.name == name:
                return group
        raise KeyError(f"fleet {self.name!r} has no group {name!r} (groups: {', '.join(g.name for g in self.groups)})")
