"""The environment's options, validated once at construction."""

from __future__ import annotations

import difflib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

RewardMode = Literal["medal", "any_medal", "percentile"]
PromptKind = Literal["own", "mlebench"]


class EnvConfig(BaseModel):
    """Everything `gym.make("mle/<id>", ...)` accepts besides the competition."""

    model_config = ConfigDict(extra="forbid")

    competition: str
    data: Literal["sample", "kaggle"] = "sample"
    sample_seed: int | Literal["episode"] = Field(
        default=0, description='which synthetic sample dataset to use; "episode": a fresh one each episode, '
                               "seeded by the reset's seed (kept on disk up to episode_data_keep)")
    holdout: Literal["mlebench", "train"] = Field(
        default="mlebench", description='what grades the agent: "mlebench", MLE-bench\'s private test; "train", the '
        "competition's own split run again on its public training data with the reset's seed (the agent trains "
        "on part of it and is graded on the rest; MLE-bench's answers are never opened). For training, not for "
        "numbers to compare with MLE-bench")
    episode_data_keep: int = Field(
        default=8, ge=1, description="per competition, how many datasets made for episodes (holdout=\"train\" "
        "re-splits, sample_seed=\"episode\" data) stay on disk; the least recently used beyond it that no "
        "running episode holds are removed")
    version: Literal["v1", "fixed"] = Field(
        default="v1", description='the task version: "v1", MLE-bench as published (numbers compare with its '
        'leaderboard); "fixed", its known issues repaired (leaking files removed, MLE-bench\'s preparation bugs '
        'fixed; docs/fidelity.md, "Task version fixed")')
    sandbox: Literal["docker", "local"] = "docker"
    reward: RewardMode = "medal"
    prompt: PromptKind = Field(
        default="own", description='"own": mle-gym\'s task text; "mlebench": MLE-bench\'s instructions and '
                                   "description verbatim, fetched by `mle-gym prepare ID --mlebench-text`")
    max_steps: int = Field(default=500, ge=1)
    time_limit_s: float = Field(default=24 * 3600.0, gt=0, description="wall clock from reset; MLE-bench gives 24 h")
    command_timeout_s: float = Field(default=600.0, gt=0, description="default timeout of one bash call")
    max_output_chars: int = Field(default=16_000, ge=200)
    max_submission_bytes: int = Field(
        default=512 * 1024 * 1024, ge=1,
        description="largest submission file copied out and graded; a bigger one is an invalid submission. "
                    "512 MiB is above any real MLE-bench submission and keeps the host's copy and parse bounded",
    )
    max_saved_output_bytes: int | None = Field(
        default=None, ge=1024, description="cap on the saved full output of one command (backend default: 64 MiB)")
    grading_memory: str = Field(
        default="4g", description="memory the grading child process may add to parse and score one "
                                  "submission (beyond its start); over it, the submission is invalid")
    grading_timeout_s: float = Field(default=900.0, gt=0, description="wall clock the grading child may take")
    validation_timeout_s: float = Field(
        default=60.0, gt=0, description="wall clock one validate_submission check may take (at most "
                                        "grading_timeout_s); over it the tool says so, and submit still grades")
    max_validation_bytes: int = Field(
        default=320 * 1024 * 1024, ge=1,
        description="largest file validate_submission checks; a bigger one is not checked (the tool says so) but "
                    "submit still grades it up to max_submission_bytes. 320 MiB is above any real MLE-bench "
                    "submission (h-and-m's 1.37 million customers, 258 MiB) and bounds the host CPU one call costs",
    )
    # Sandbox options, passed to the backend's config when set (Docker: see DockerSandboxConfig).
    image: str | None = None
    cpus: float | None = None
    memory: str | None = None
    pids_limit: int | None = None
    shm_size: str | None = None
    network: Literal["none", "bridge"] | None = None
    gpus: Any = Field(default="auto", description='"auto", "all", a list of device ids, or None for none')
    gpus_per_episode: int | None = Field(default=None, ge=1, description="Docker: lease this many of the GPUs to "
                                         "each concurrent episode, never shared (MLE-bench's one GPU per run)")
    workspace_root: str | None = None
    disk_limit: str | None = Field(default="20g", description="Docker: most bytes an episode may write (None: no limit)")
    warm_pool: bool | None = None
    warm_pool_depth: int | None = Field(default=None, ge=1, le=16, description="Docker: spare containers kept "
                                        "started per env (default 1); more keep back-to-back resets at swap cost")
    sandbox_options: dict[str, Any] = Field(default_factory=dict, description="extra backend options")
    # Branches (mle_gym.envs.checkpoint): checkpoints on the way, where they are kept, how much they may hold.
    checkpoint_every_s: float | None = Field(
        default=None, gt=0, description="write a checkpoint after the first step that ends this many seconds after "
        "the last one (crash resume: `mle-gym run --resume` continues from the last; info['checkpoint'] says)")
    checkpoint_every_steps: int | None = Field(default=None, ge=1, description="write a checkpoint every N steps")
    checkpoint_dir: str | None = Field(
        default=None, description="a host folder that keeps this env's checkpoints past its process (default: a "
        "temporary folder, removed when the env and its forks close); never visible in a sandbox")
    checkpoint_limit: str | None = Field(
        default=None, description="most bytes the checkpoints of an env and its forks may hold on the host "
        "(default: disk_limit)")

    @field_validator("checkpoint_limit")
    @classmethod
    def _checkpoint_limit(cls, value: str | None) -> str | None:
        if value is not None:
            from mle_gym.units import parse_size

            parse_size(value)
        return value

    @field_validator("sample_seed")
    @classmethod
    def _seed_not_negative(cls, value: int | str) -> int | str:
        if isinstance(value, int) and value < 0:
            raise ValueError(f'sample_seed must be an int >= 0 or "episode", got {value}')
        return value

    @property
    def data_per_episode(self) -> bool:
        """Whether each episode may get its own dataset (so its own sandbox data)."""
        return self.holdout == "train" or self.sample_seed == "episode"

    def backend_options(self) -> dict[str, Any]:
        if self.sandbox == "local":
            keys: tuple[str, ...] = ("workspace_root", "max_saved_output_bytes")
            always: tuple[str, ...] = ()
        else:
            keys = ("image", "cpus", "memory", "pids_limit", "shm_size", "network", "gpus", "gpus_per_episode",
                    "disk_limit", "max_saved_output_bytes", "warm_pool", "warm_pool_depth")
            always = ("gpus", "disk_limit")
        opts = {k: getattr(self, k) for k in keys if getattr(self, k) is not None or k in always}
        opts.update(self.sandbox_options)
        return opts


def make_config(competition: str, options: dict[str, Any]) -> EnvConfig:
    """EnvConfig for `gym.make(id, **options)`; an unknown option or a bad value raises EnvOptionError
    naming the option, what it got and, for a near miss, the option that was probably meant."""
    from mle_gym.errors import EnvOptionError

    fields = sorted(set(EnvConfig.model_fields) - {"competition"})
    for key in options:
        if key not in fields:
            close = difflib.get_close_matches(key, fields, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise EnvOptionError(f"gym.make: {key!r} is not an option of mle-gym's env{hint} "
                                 f"The options: {', '.join(fields)}.")
    try:
        return EnvConfig(competition=competition, **options)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']} (got {e.get('input')!r:.80})"
                             for e in exc.errors())
        raise EnvOptionError(f"gym.make: invalid option value(s): {problems}") from None
