"""The environment's options, validated once at construction."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

RewardMode = Literal["medal", "any_medal", "percentile"]


class EnvConfig(BaseModel):
    """Everything `gym.make("mle/<id>", ...)` accepts besides the competition."""

    model_config = ConfigDict(extra="forbid")

    competition: str
    data: Literal["sample", "kaggle"] = "sample"
    sample_seed: int = Field(default=0, ge=0, description="which synthetic sample dataset to use")
    sandbox: Literal["docker", "local"] = "docker"
    reward: RewardMode = "medal"
    max_steps: int = Field(default=500, ge=1)
    time_limit_s: float = Field(default=24 * 3600.0, gt=0, description="wall clock from reset; MLE-bench gives 24 h")
    command_timeout_s: float = Field(default=600.0, gt=0, description="default timeout of one bash call")
    max_output_chars: int = Field(default=16_000, ge=200)
    # Sandbox options, passed to the backend's config when set (Docker: see DockerSandboxConfig).
    image: str | None = None
    cpus: float | None = None
    memory: str | None = None
    pids_limit: int | None = None
    shm_size: str | None = None
    network: Literal["none", "bridge"] | None = None
    gpus: Any = Field(default="auto", description='"auto", "all", a list of device ids, or None for none')
    workspace_root: str | None = None
    sandbox_options: dict[str, Any] = Field(default_factory=dict, description="extra backend options")

    def backend_options(self) -> dict[str, Any]:
        if self.sandbox == "local":
            keys = ("workspace_root",)
        else:
            keys = ("image", "cpus", "memory", "pids_limit", "shm_size", "network", "gpus", "workspace_root")
        opts = {k: getattr(self, k) for k in keys if getattr(self, k) is not None or k == "gpus"}
        opts.update(self.sandbox_options)
        return opts
