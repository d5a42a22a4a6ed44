"""MLEEnv: one MLE-bench competition as a Gymnasium environment of tool calls."""

from __future__ import annotations

import difflib
import logging
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym

from mle_gym.competitions import Competition, get_competition
from mle_gym.competitions.datasets import Dataset, DatasetLease, data_root, load_dataset, open_episode_dataset
from mle_gym.competitions.holdout import check_holdout, holdout_problem
from mle_gym.competitions.mlebench_text import MLEBenchText, load_mlebench_text
from mle_gym.config import make_config
from mle_gym.envs import host_memory
from mle_gym.envs.checkpoint import (
    Checkpoint,
    CheckpointError,
    CheckpointMismatchError,
    CheckpointStore,
    as_checkpoint,
    check_roots,
    check_same,
    restore_checkpoint,
    restore_note,
    take_checkpoint,
)
from mle_gym.envs.prompt import build_mlebench_prompt, build_prompt, hardware_of
from mle_gym.envs.spaces import TextObservation, ToolCallSpace
from mle_gym.envs.submission import SubmissionService
from mle_gym.errors import (
    CompetitionNotFoundError,
    EpisodeEndedError,
    ResetOptionError,
    SandboxError,
    SandboxPathError,
)
from mle_gym.grading import GradeReport
from mle_gym.grading.isolated import GradingLimits, warm_up
from mle_gym.registry import split_members
from mle_gym.sandbox.base import Sandbox
from mle_gym.sandbox.factory import make_sandbox
from mle_gym.tools.execute import ToolExecutor, ToolResult
from mle_gym.tools.message import parse_actions
from mle_gym.tools.parse import ParsedCall, ToolCallError
from mle_gym.tools.schemas import TOOL_NAMES, anthropic_tools, openai_tools
from mle_gym.units import parse_size

log = logging.getLogger(__name__)

RESET_OPTIONS = ("competition", "checkpoint", "resume")
"""What `reset(options=...)` takes: "competition" switches to another competition (id or alias);
"checkpoint" (a Checkpoint or its bytes) starts the episode from that saved state, "resume": True
marks it as the same episode resumed after a crash (`mle-gym run --resume`)."""
AUTO_CHECKPOINTS_KEPT = 2
"""Automatic checkpoints (checkpoint_every_s / checkpoint_every_steps) kept per env; older ones are dropped."""

MEDAL_REWARD = {"gold": 3.0, "silver": 2.0, "bronze": 1.0, "none": 0.0}


class MLEEnv(gym.Env[str, dict]):
    """An MLE-bench competition, solved through tool calls in a sandbox.

    ## Description
    The agent gets the competition's description, its public data in a sandbox (a Docker
    container by default) and a persistent shell. It trains whatever it likes and writes a
    submission file; the file is copied out and graded on the host against private answers
    that never enter the sandbox, then turned into a Kaggle medal with the real leaderboard's
    thresholds.

    ## Action Space
    A tool call: a `ToolCall`, a dict `{"name": ..., "arguments": {...}}`, an OpenAI-style
    `{"function": {"name": ..., "arguments": "<json>"}}`, an Anthropic `tool_use` block, or an
    assistant message's raw text (str or bytes) holding one or several calls in a common format
    (JSON, Hermes/Qwen `<tool_call>`, fenced JSON, Llama 3.1, Mistral; `mle_gym.tools.message`).
    Several calls in one message run in order as one step (one step of `max_steps`), stopping at
    `submit`; `info["tool_calls"]` has one entry per call. Tools: bash, read_file, write_file,
    edit_file, list_dir, validate_submission, submit (`self.tools` holds their OpenAI schemas,
    `self.anthropic_tools` the Anthropic form; `mle_gym.tools.tool_prompt` renders a system
    prompt's tool section). A malformed call, or text with no call (`no_tool_call`), never
    raises: it returns an observation saying what was wrong, `info["tool_error"]`, and counts as
    a step.

    ## Observation Space
    Text: the task prompt after `reset`, then each tool's output (capped at `max_output_chars`
    with head and tail kept; the full output is saved in the sandbox's logs folder).

    ## Rewards
    0 on every step but the last. The last pays, by `reward`: "medal" gold 3, silver 2, bronze
    1, none 0; "any_medal" 1 for any medal (so the mean return is MLE-bench's any-medal rate);
    "percentile" the share of the leaderboard the score beats. No file or an invalid file pays 0.

    ## Episode End
    `submit` terminates (`terminated=True`). Running out of `max_steps` or of `time_limit_s`
    (wall clock since reset) truncates (`truncated=True`, `info["truncation_reason"]`), as does going
    over a sandbox limit ("disk_limit", "memory_limit": see the README's sandbox section). Either
    way the submission present at that moment is graded and `info["grade"]` holds the report.
    `gym.make(id, max_episode_steps=N)` lowers `max_steps` to N, so TimeLimit's truncation is graded.

    ## Arguments
    See `mle_gym.config.EnvConfig`: data ("sample" | "kaggle"), version ("v1": MLE-bench as
    published | "fixed": its known issues repaired; `info["version"]` says which), sandbox ("docker" | "local"),
    prompt ("own" | "mlebench": MLE-bench's text, fetched by `mle-gym prepare ID --mlebench-text`),
    reward, max_steps, time_limit_s, command_timeout_s, max_output_chars, and Docker options
    (image, cpus, memory, pids_limit, shm_size, network, gpus).
    For training: holdout="train" grades each episode on a re-split of the public training data
    made with the reset's seed (MLE-bench's answers are never opened; `info["grade"]["holdout"]`
    says "train"); sample_seed="episode" draws fresh sample data per episode from the reset's seed.
    Either way an episode whose data differs from the last one's gets a new sandbox over it.

    ## Reset Options
    `reset(options={"competition": ID})` switches to another competition with the same settings;
    `reset(options={"checkpoint": c})` starts an episode from a saved state (see Branches); any other
    option raises `ResetOptionError`. `mle/split-<name>` (low, medium, high, lite, all, dev) draws
    each reset's competition from that MLE-bench split, with the reset's seed.

    ## Branches
    `checkpoint()` saves the episode's state at a step boundary (its folders, budgets used, step,
    prompt; not its processes); `restore(c)` continues the episode from it in a fresh sandbox;
    `fork(c=None)` returns a second, independent env starting from it; `reset(options={"checkpoint": c})`
    starts an episode from it. `mle_gym.envs.checkpoint` says what a checkpoint holds and what holds it.

    ## Version History
    - v0 (mle-gym 0.1): first release.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(self, competition: str, render_mode: str | None = None, **options: Any) -> None:
        self.split: list[str] = []  # "split:<name>": the competitions a reset draws from
        if competition.startswith("split:"):
            self.split = split_members(competition.removeprefix("split:"))
            if not self.split:
                raise CompetitionNotFoundError(f"the split {competition.removeprefix('split:')!r} has no packaged "
                                               "competition (`mle-gym list` shows what is packaged)")
            competition = self.split[0]
        self.config = make_config(competition, options)
        if self.config.holdout == "train" and self.split:
            # a split env for training draws only from the competitions a re-split can be made for
            left_out = [c for c in self.split if holdout_problem(get_competition(c).for_version(self.config.version), self.config.data) is not None]
            self.split = [c for c in self.split if c not in left_out] or self.split[:1]
            if left_out:
                log.info('holdout="train": %d competition(s) of the split left out: %s', len(left_out), left_out)
            competition = self.split[0]
            self.config = self.config.model_copy(update={"competition": competition})
        self._options = dict(options)  # what a fork is made with
        self.competition: Competition = get_competition(competition).for_version(self.config.version)
        if self.config.holdout == "train":
            check_holdout(self.competition, self.config.data)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode {render_mode!r} is not supported; expected one of {self.metadata['render_modes']}")
        self.render_mode = render_mode
        self.observation_space = TextObservation()
        self.action_space = ToolCallSpace()
        self.tools = openai_tools()
        self.anthropic_tools = anthropic_tools()
        self.dataset: Dataset | None = None
        self._data_seed: int | None = None  # the seed of this episode's data when it is made per episode
        self._lease: DatasetLease | None = None  # held on the dataset of the episode when it is made for episodes
        self._mlebench_text: MLEBenchText | None = None
        self.sandbox: Sandbox | None = None
        self._executor: ToolExecutor | None = None
        self._submissions: SubmissionService | None = None
        self._active = False
        self._steps = 0
        self._started = 0.0
        self._last_observation = ""
        self._closed = False
        # branches (mle_gym.envs.checkpoint): this episode's id and tree, how it began, where its checkpoints go
        self.episode_id: str | None = None
        self.tree_id: str | None = None
        self.branch: dict[str, Any] | None = None
        """How the current episode began when not from a plain reset: kind (restore, fork, resume, reset),
        checkpoint_id, parent_episode_id, parent_step, tree_id, resumed. Also in reset's info["branch"]."""
        self.restored: tuple[str, dict[str, Any]] | None = None
        """What a fork's (or restore's) first observation and info are: show them to the agent."""
        self._store: CheckpointStore | None = None
        self._parent_checkpoint_id: str | None = None
        self._seed: int | None = None
        self._prompt = ""
        self._auto_ids: list[str] = []
        self._last_auto = 0.0
        self._listeners: list[Callable[[str, dict[str, Any]], None]] = []
        self._sandbox_fresh = False
        self._warm_up_grading = False  # set when the env makes its sandbox; the episode's start then warms grading
        # Counted among the Docker episodes alive on this machine from now on, so that envs made side by
        # side (a vector env's) share its memory under memory="auto" (see mle_gym.envs.host_memory).
        self._live = host_memory.register_episode() if self.config.sandbox == "docker" else None

    # -- budgets -------------------------------------------------------------------------
    def _time_left(self) -> float:
        return max(self.config.time_limit_s - (time.monotonic() - self._started), 0.0)

    def _budget_info(self) -> dict[str, Any]:
        return {
            "step": self._steps,
            "steps_left": max(self.config.max_steps - self._steps, 0),
            "time_left_s": round(self._time_left(), 1),
        }

    def set_step_limit(self, max_episode_steps: int) -> None:
        """Lower the step budget to Gymnasium's `max_episode_steps` (called by `gym.make`).

        TimeLimit then truncates on the very step where the env truncates itself, so that step
        carries the grade; a limit above `max_steps` changes nothing (the env ends first).
        """
        if isinstance(max_episode_steps, bool) or not isinstance(max_episode_steps, int) or max_episode_steps < 1:
            raise ValueError(f"max_episode_steps must be a positive int (or -1 for none), got {max_episode_steps!r}")
        if max_episode_steps < self.config.max_steps:
            self.config = self.config.model_copy(update={"max_steps": max_episode_steps})

    @property
    def submission_path(self) -> str:
        assert self.sandbox is not None
        return self.sandbox.paths.submission.rstrip("/") + "/submission.csv"

    # -- Gymnasium API -------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        if self._closed:
            raise EpisodeEndedError("this environment was closed; make a new one with gym.make(...)")
        checkpoint, kind = None, "reset"
        if options and ("checkpoint" in options or "resume" in options):
            options = dict(options)
            resume = options.pop("resume", False)
            if not isinstance(resume, bool):
                raise ResetOptionError(f"reset(options={{'resume': ...}}) takes True or False, got {resume!r}")
            if "checkpoint" not in options:
                raise ResetOptionError("reset(options={'resume': True}) needs the checkpoint to resume from: "
                                       "options={'checkpoint': c, 'resume': True}")
            checkpoint = as_checkpoint(options.pop("checkpoint"))
            kind = "resume" if resume else "reset"
            if self.split and "competition" not in options and checkpoint.competition in self.split:
                options["competition"] = checkpoint.competition
        return self._begin(seed=seed, options=options, checkpoint=checkpoint, kind=kind)

    def _begin(self, *, seed: int | None, options: dict[str, Any] | None, checkpoint: Checkpoint | None,
               kind: str) -> tuple[str, dict[str, Any]]:
        """Start an episode: fresh, or from `checkpoint` (kind: reset, resume, restore or fork)."""
        if self.split and checkpoint is None and not (options and "competition" in options):
            # a split env draws its competition from the reset's seed (np_random is seeded by it)
            drawn = self.split[int(self.np_random.integers(len(self.split)))]
            options = {**(options or {}), "competition": drawn}
        if options:
            self._apply_reset_options(options)
        if checkpoint is not None:
            check_same(checkpoint, competition=self.competition.id, version=self.config.version, data=self.config.data,
                       sample_seed=self.config.sample_seed, holdout=self.config.holdout, sandbox=self.config.sandbox)
        if self.config.data_per_episode:
            # a branch of an episode (restore, fork, a reset or resume from its checkpoint) runs on that episode's data
            self._open_episode_data(checkpoint.manifest.data_seed if checkpoint is not None else seed)
        elif self.dataset is None:
            assert isinstance(self.config.sample_seed, int)
            self.dataset = load_dataset(self.competition, self.config.data, seed=self.config.sample_seed)
        if self.config.prompt == "mlebench" and self._mlebench_text is None:
            self._mlebench_text = load_mlebench_text(self.competition, root=data_root())
        if self.sandbox is None:
            self._warm_up_grading = True
            options = self.config.backend_options()
            if self.config.sandbox == "docker":
                options = host_memory.resolve_memory(options, self._live)
            self.sandbox = make_sandbox(self.config.sandbox, self.dataset.public, options)
            self.sandbox.start()
        if checkpoint is not None:  # before the running episode's sandbox is replaced
            check_roots(checkpoint, self.sandbox)
        if self._sandbox_fresh:  # a fork's sandbox, started for it a moment ago: nothing to replace yet
            self._sandbox_fresh = False
        else:
            self.sandbox.reset()
        paths = self.sandbox.paths
        self.action_space.code_dir, self.action_space.data_dir = ".", paths.data
        if seed is not None:
            self.action_space.seed(seed)
        grading = GradingLimits(memory_bytes=parse_size(self.config.grading_memory),
                                timeout_s=self.config.grading_timeout_s)
        self._submissions = SubmissionService(
            self.sandbox, self.competition, self.dataset, max_bytes=self.config.max_submission_bytes, limits=grading,
            validation_limits=grading.model_copy(
                update={"timeout_s": min(self.config.validation_timeout_s, self.config.grading_timeout_s)}),
            max_validation_bytes=self.config.max_validation_bytes,
        )
        self._executor = ToolExecutor(
            self.sandbox, command_timeout_s=self.config.command_timeout_s,
            max_output_chars=self.config.max_output_chars, validate_submission=self._submissions.validate,
        )
        self._steps = 0
        self._started = time.monotonic()
        self._seed = seed
        self.episode_id = uuid.uuid4().hex
        self.tree_id, self.branch, self._parent_checkpoint_id, self.restored = self.episode_id, None, None, None
        self._auto_ids = []
        restored: dict[str, Any] | None = None
        if checkpoint is not None:
            restored = self._restore_files(checkpoint, kind)
        self._last_auto = time.monotonic()
        self._active = True
        described = self.sandbox.describe()
        if self._mlebench_text is not None:
            prompt = build_mlebench_prompt(instructions=self._mlebench_text.instructions,
                                           description=self._mlebench_text.description)
        else:
            prompt = build_prompt(
                description=self.competition.description(), paths=paths.as_dict(),
                submission_path=self.submission_path, max_steps=self.config.max_steps,
                time_limit_s=self.config.time_limit_s, command_timeout_s=self.config.command_timeout_s,
                max_output_chars=self.config.max_output_chars, sample_data=self.dataset.sample_data,
                isolation=described.get("isolation", "unknown"), installed=self.sandbox.image_manifest(),
                hardware=hardware_of(described),
            )
        self._prompt = prompt  # the task as this sandbox puts it (a restored one's folders may lie elsewhere)
        if checkpoint is not None:
            prompt = prompt + "\n\n" + restore_note(checkpoint, self.sandbox, steps_left=max(
                self.config.max_steps - self._steps, 0), time_left_s=self._time_left())
        self._last_observation = prompt
        info = {
            "competition": self.competition.id,
            "paths": paths.as_dict(),
            "submission_path": self.submission_path,
            "data": self.config.data,
            "version": self.config.version,
            "sample_data": self.dataset.sample_data,
            "holdout": self.dataset.holdout,
            "sample_seed": self.dataset.seed,
            "split_seed": self.dataset.split_seed,
            "tools": list(TOOL_NAMES),
            "max_steps": self.config.max_steps,
            "time_limit_s": self.config.time_limit_s,
            "sandbox": described,
            "episode_id": self.episode_id,
            **self._budget_info(),
        }
        if self.branch is not None:
            info["branch"] = dict(self.branch)
            info["restored"] = restored
        if self._warm_up_grading:
            # The grading worker imports pandas and scikit-learn (seconds of CPU): started once the episode
            # has begun, so it runs beside the agent's first steps, neither in this reset's container start
            # (on few cores it slowed a new process's first reset) nor when the episode ends.
            self._warm_up_grading = False
            threading.Thread(target=warm_up, name="mle-gym-grading-warm-up", daemon=True).start()
        return prompt, info

    def _open_episode_data(self, seed: int | None) -> None:
        """This episode's dataset (holdout="train", sample_seed="episode"), seeded by the reset's seed
        (a draw from the env's generator when none is given), held while the episode runs."""
        episode_seed = seed if seed is not None else int(self.np_random.integers(2**31 - 1))
        self._data_seed = episode_seed  # a checkpoint names it, so that a branch runs on the same data
        per_episode = self.config.sample_seed == "episode"
        dataset, lease = open_episode_dataset(
            self.competition, self.config.data, sample_seed=episode_seed if per_episode else int(self.config.sample_seed),
            sample_per_episode=per_episode, holdout=self.config.holdout, split_seed=episode_seed,
            keep=self.config.episode_data_keep,
        )
        old_lease, self._lease = self._lease, lease
        if self.dataset is not None and dataset.root != self.dataset.root and self.sandbox is not None:
            # the sandbox holds the last episode's public data: a new one is made over this one's
            self._active = False
            sandbox, self.sandbox, self._executor, self._submissions = self.sandbox, None, None, None
            sandbox.close()
        self.dataset = dataset
        if old_lease is not None:
            old_lease.release()

    # -- branches ------------------------------------------------------------------------
    def _restore_files(self, checkpoint: Checkpoint, kind: str) -> dict[str, Any]:
        """Put `checkpoint`'s files into the (fresh) sandbox and its budgets into the episode."""
        assert self.sandbox is not None
        store = self._ensure_store()
        checkpoint = checkpoint.in_store(store)
        try:
            summary = restore_checkpoint(self.sandbox, checkpoint)
        except BaseException:
            self._active = False  # half a restore is no state to step from: the next reset starts clean
            raise
        self._steps = checkpoint.step
        self._started = time.monotonic() - checkpoint.manifest.time_used_s
        if kind != "reset":  # a restore, fork or resume carries on the same tree of episodes
            self.tree_id = checkpoint.tree_id
        if self._seed is None:
            self._seed = checkpoint.manifest.seed
        self._parent_checkpoint_id = checkpoint.id
        self.branch = {"kind": kind, "checkpoint_id": checkpoint.id, "parent_episode_id": checkpoint.episode_id,
                       "parent_step": checkpoint.step, "tree_id": self.tree_id, "resumed": kind == "resume",
                       "seed": self._seed}
        if kind == "resume" and checkpoint.manifest.auto:
            self._auto_ids = [checkpoint.id]
        return {"files": int(summary.get("files", 0)), "bytes": int(summary.get("bytes", 0))}

    def _ensure_store(self) -> CheckpointStore:
        if self._store is None or self._store.closed:
            limit = self.config.checkpoint_limit or self.config.disk_limit
            limit_bytes = parse_size(limit) if limit else None
            if self.config.checkpoint_dir:
                store = CheckpointStore(Path(self.config.checkpoint_dir), limit_bytes=limit_bytes, persistent=True)
            else:
                store = CheckpointStore.temporary(limit_bytes=limit_bytes)
            self._store = store.acquire()
        return self._store

    def checkpoint(self) -> Checkpoint:
        """The episode's state now, at a step boundary: every folder the agent can write (with modes, times and
        links), the steps and seconds used, the prompt, seed and options. Processes are not kept.

        Made by the helper inside the sandbox and kept by the host in this env's checkpoint store (shared
        with its forks, removed when the last of them closes, unless `checkpoint_dir` was given; bounded by
        `checkpoint_limit`, by default the disk limit). Raises EpisodeEndedError with no episode running,
        CheckpointRefusedError when the agent's files cannot be checkpointed, CheckpointLimitError past the
        limit."""
        return self._checkpoint(auto=False)

    def _checkpoint(self, *, auto: bool) -> Checkpoint:
        if not self._active or self.sandbox is None or self.episode_id is None or self.dataset is None:
            raise EpisodeEndedError("checkpoint() needs a running episode: call it after reset() and before the "
                                    "episode ends (a checkpoint taken before `submit` lets you branch from there)")
        assert self.tree_id is not None
        return take_checkpoint(
            self.sandbox, self._ensure_store(), tree_id=self.tree_id, episode_id=self.episode_id,
            parent_checkpoint_id=self._parent_checkpoint_id, competition=self.competition.id,
            version=self.config.version, data=self.config.data,
            sample_seed=self.dataset.seed if self.config.sample_seed == "episode" else self.config.sample_seed,
            data_seed=self._data_seed if self.config.data_per_episode else None, holdout=self.config.holdout,
            sandbox=self.config.sandbox, step=self._steps,
            time_used_s=round(min(time.monotonic() - self._started, self.config.time_limit_s), 3), seed=self._seed,
            prompt=self._prompt, options=self.config.model_dump(mode="json"), auto=auto)

    def _check_own(self, checkpoint: Checkpoint, what: str) -> None:
        if self.tree_id is None or checkpoint.tree_id != self.tree_id:
            raise CheckpointMismatchError(
                f"{what}: checkpoint {checkpoint.id[:12]} belongs to another episode (tree {checkpoint.tree_id[:8]}, "
                f"this env's is {str(self.tree_id)[:8]}); restore() and fork() continue this env's own episode. To "
                "start a new episode from it, use reset(options={'checkpoint': c})")

    def restore(self, checkpoint: Checkpoint | bytes) -> tuple[str, dict[str, Any]]:
        """Continue this episode from `checkpoint` (one of its own, or of its forks') in a fresh sandbox (the
        warm spare): files, step count and time used as they were then. Returns (observation, info) as
        reset() does; the observation is the prompt and a note telling the agent its processes are gone.
        A `TrajectoryRecorder` around the env starts a new trajectory file that names its parent."""
        checkpoint = as_checkpoint(checkpoint)
        self._check_own(checkpoint, "restore()")
        if self._closed:
            raise EpisodeEndedError("this environment was closed; make a new one with gym.make(...)")
        observation, info = self._begin(seed=None, options=None, checkpoint=checkpoint, kind="restore")
        self.restored = (observation, info)
        for listener in list(self._listeners):
            listener(observation, info)
        return observation, info

    def fork(self, checkpoint: Checkpoint | bytes | None = None) -> MLEEnv:
        """A second, independent env whose episode starts from `checkpoint` (default: one taken now): its own
        sandbox, budgets as at the checkpoint, its own episode id naming this one as parent. What its agent
        should be shown first is `forked.restored` ((observation, info), as reset() returns). The fork shares
        this env's checkpoint store, so either may restore or fork the other's checkpoints. Close it as any env."""
        if checkpoint is None:
            checkpoint = self.checkpoint()
        else:
            checkpoint = as_checkpoint(checkpoint)
            self._check_own(checkpoint, "fork()")
        child = type(self)(checkpoint.competition, render_mode=self.render_mode, **self._options)
        try:
            child.split = list(self.split)
            child.config = self.config
            child.spec = self.spec
            child.competition = self.competition
            child.dataset, child._mlebench_text = self.dataset, self._mlebench_text
            child._store = self._ensure_store().acquire()
            child.tree_id = self.tree_id
            child._start_sandbox_from(self)
            child.restored = child._begin(seed=None, options=None, checkpoint=checkpoint, kind="fork")
        except BaseException:
            child.close()
            raise
        return child

    def _start_sandbox_from(self, parent: MLEEnv) -> None:
        """A fork's sandbox: in Docker, the parent's warm spare when it is ready (the parent starts another; the
        fork's container then has the parent's memory limit, both envs having one config), else a container
        made now; either way fresh, so the fork's first episode does not replace it."""
        assert self.dataset is not None
        options = self.config.backend_options()
        if self.config.sandbox == "docker":
            options = host_memory.resolve_memory(options, self._live)
        sandbox = make_sandbox(self.config.sandbox, self.dataset.public, options)
        self.sandbox = sandbox
        hand_over = getattr(parent.sandbox, "hand_over_spare", None)
        box = hand_over() if callable(hand_over) else None
        if box is not None:
            sandbox.start_from(parent.sandbox, box)  # type: ignore[attr-defined]
        else:
            sandbox.start()
        self._sandbox_fresh = True

    def drop_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Free the store of a checkpoint no longer needed (its blobs no other checkpoint uses go too)."""
        if self._store is not None:
            self._store.drop(checkpoint.id)

    def add_episode_listener(self, listener: Callable[[str, dict[str, Any]], None]) -> None:
        """`listener(observation, info)` runs when `restore()` begins a new branch of the episode in this env
        (what reset() would have returned); the trajectory recorder opens a new file there."""
        self._listeners.append(listener)

    def _auto_due(self) -> bool:
        cfg = self.config
        if cfg.checkpoint_every_steps is not None and self._steps % cfg.checkpoint_every_steps == 0:
            return True
        return cfg.checkpoint_every_s is not None and time.monotonic() - self._last_auto >= cfg.checkpoint_every_s

    def _auto_checkpoint(self) -> dict[str, Any]:
        """A checkpoint for crash resume; one that fails is reported in info, and the episode goes on."""
        started = time.monotonic()
        self._last_auto = started
        try:
            checkpoint = self._checkpoint(auto=True)
        except (CheckpointError, SandboxError) as exc:
            log.warning("episode %s: the automatic checkpoint after step %d failed: %s", self.episode_id, self._steps, exc)
            return {"error": f"{type(exc).__name__}: {exc}"}
        self._auto_ids.append(checkpoint.id)
        while len(self._auto_ids) > AUTO_CHECKPOINTS_KEPT:
            assert self._store is not None
            self._store.drop(self._auto_ids.pop(0))
        return {"id": checkpoint.id, "step": checkpoint.step, "seconds": round(time.monotonic() - started, 3)}

    def _apply_reset_options(self, options: dict[str, Any]) -> None:
        unknown = [key for key in options if key not in RESET_OPTIONS]
        if unknown:
            key = unknown[0]
            close = difflib.get_close_matches(str(key), RESET_OPTIONS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ResetOptionError(f"reset() got an unknown option {key!r}{hint} Known options: "
                                   f"{', '.join(RESET_OPTIONS)} (env settings go to gym.make(...) instead)")
        name = options.get("competition")
        if name is None:
            return
        if not isinstance(name, str):
            raise ResetOptionError(f"reset(options={{'competition': ...}}) takes a competition id or alias (str), "
                                   f"got {type(name).__name__}")
        competition = get_competition(name).for_version(self.config.version)
        if competition.id == self.competition.id:
            return
        if self.config.holdout == "train":
            check_holdout(competition, self.config.data)
        # A new competition is new data in the sandbox: the old sandbox goes, one with the same
        # settings (config) is made for the new data in the reset that follows.
        self._active = False
        sandbox, self.sandbox, self._executor, self._submissions = self.sandbox, None, None, None
        if sandbox is not None:
            sandbox.close()
        self.competition = competition
        self.config = self.config.model_copy(update={"competition": competition.id})
        self.dataset = None
        self._mlebench_text = None

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if not self._active or self.sandbox is None or self._executor is None:
            raise EpisodeEndedError(
                "step() called with no episode running: the last episode ended (terminated or truncated) "
                "or reset() was never called. Call reset() to start a new episode."
            )
        self._steps += 1
        terminated = truncated = False
        reason: str | None = None
        submitted: str | None = None
        ran: list[tuple[ParsedCall | None, ToolResult]] = []
        not_run = ""
        time_left = self._time_left()
        if time_left <= 0:
            ran.append((None, ToolResult(tool="none", observation="The time limit was reached before this action ran.")))
            truncated, reason = True, "time_limit"
        else:
            try:
                calls = parse_actions(action)
            except ToolCallError as exc:
                calls = [exc]
            # One message is one step, however many calls it holds: they run in order until one
            # submits, the time runs out or the sandbox is breached; the rest are reported, not run.
            for index, call in enumerate(calls):
                if index:
                    time_left = self._time_left()
                    if time_left <= 0 or self.sandbox.breach is not None:
                        not_run = (f"\n[{len(calls) - index} later call(s) of this message did not run: "
                                   f"{'the time limit was reached' if time_left <= 0 else 'the episode was stopped'}]")
                        break
                if isinstance(call, ToolCallError):
                    ran.append((None, ToolResult(tool="invalid", observation=f"Error: {call.message}",
                                                 tool_error=call.as_info())))
                    continue
                if call.name == "submit":
                    result, submitted = self._submit(call)
                    ran.append((call, result))
                    terminated = True
                    if index + 1 < len(calls):
                        not_run = f"\n[{len(calls) - index - 1} later call(s) of this message did not run: submit ended the episode]"
                    break
                ran.append((call, self._executor.run(call, time_left_s=time_left)))
        time_left = self._time_left()
        if not terminated and not truncated:
            if self.sandbox.breach is not None:
                truncated, reason = True, self.sandbox.breach
            elif self._steps >= self.config.max_steps:
                truncated, reason = True, "max_steps"
            elif time_left <= 0:
                truncated, reason = True, "time_limit"
        info = self._step_info(ran)
        info["step"] = self._steps
        info["steps_left"] = max(self.config.max_steps - self._steps, 0)
        info["time_left_s"] = round(max(time_left, 0.0), 1)
        if len(ran) == 1:
            observation = ran[0][1].observation + not_run
        else:
            observation = "\n\n".join(f"[call {i}/{len(ran)}: {call.name if call else result.tool}]\n{result.observation}"
                                       for i, (call, result) in enumerate(ran, 1)) + not_run
        reward = 0.0
        if terminated or truncated:
            self._active = False
            # a submit whose path was outside the sandbox leaves `submitted` None: graded as missing
            grade = self._grade(submitted if terminated else self.submission_path)
            reward = self._reward(grade)
            info["grade"] = grade.model_dump()
            if truncated:
                info["truncation_reason"] = reason
                budget = {"max_steps": "step budget ran out", "time_limit": "time limit ran out",
                          "disk_limit": "episode went over its disk limit",
                          "memory_limit": "agent's processes filled the sandbox's memory"}.get(reason or "", f"{reason} was hit")
                observation += f"\n[episode over: the {budget}; {self.submission_path} was graded as it stood]"
        elif self._auto_due():
            info["checkpoint"] = self._auto_checkpoint()
        self._last_observation = observation
        return observation, reward, terminated, truncated, info

    @staticmethod
    def _call_info(call: ParsedCall | None, result: ToolResult) -> dict[str, Any]:
        info: dict[str, Any] = {
            "tool": result.tool,
            "tool_call": call.as_dict() if call else None,
            "exit_code": result.exit_code,
            "duration_s": round(result.duration_s, 2),
            "output_truncated": result.output_truncated,
            "timed_out": result.timed_out,
            "shell_restarted": result.shell_restarted,
        }
        if result.saved_output_path:
            info["saved_output_path"] = result.saved_output_path
        if result.tool_error:
            info["tool_error"] = result.tool_error
        return info

    def _step_info(self, ran: list[tuple[ParsedCall | None, ToolResult]]) -> dict[str, Any]:
        """`info` of a step: one entry per call in `tool_calls`; the top level speaks for the
        message: the last call's tool, call and exit code, the first tool error, the summed
        duration, and whether any call was truncated, timed out or restarted the shell."""
        per_call = [self._call_info(call, result) for call, result in ran]
        if len(per_call) == 1:
            info = dict(per_call[0])
        else:
            last = per_call[-1]
            info = {
                "tool": last["tool"], "tool_call": last["tool_call"], "exit_code": last["exit_code"],
                "duration_s": round(sum(r.duration_s for _, r in ran), 2),
                "output_truncated": any(c["output_truncated"] for c in per_call),
                "timed_out": any(c["timed_out"] for c in per_call),
                "shell_restarted": any(c["shell_restarted"] for c in per_call),
            }
            saved = [c["saved_output_path"] for c in per_call if "saved_output_path" in c]
            if saved:
                info["saved_output_path"] = saved[-1]
            errors = [c["tool_error"] for c in per_call if "tool_error" in c]
            if errors:
                info["tool_error"] = errors[0]
        info["tool_calls"] = per_call
        return info

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return self._last_observation
        return None

    def close(self) -> None:
        self._active = False
        if self._closed:
            return
        self._closed = True
        if self._lease is not None:
            self._lease.release()
            self._lease = None
        sandbox, self.sandbox = self.sandbox, None
        if sandbox is not None:
            try:
                sandbox.close()
            except Exception:  # close() must never raise; backends already swallow their own errors
                log.exception("closing the sandbox failed")
        live, self._live = getattr(self, "_live", None), None
        if live is not None:
            live.release()
        store, self._store = getattr(self, "_store", None), None
        if store is not None:
            store.release()
        super().close()

    # -- grading -------------------------------------------------------------------------
    def _submit(self, call: ParsedCall) -> tuple[ToolResult, str | None]:
        assert self.sandbox is not None
        requested = getattr(call.args, "path", None) or self.submission_path
        try:
            path = self.sandbox.resolve(requested)
        except SandboxPathError as exc:
            message = f"Submitted {requested!r}, which is outside the sandbox ({exc}); it was graded as missing."
            return ToolResult(tool="submit", observation=message,
                              tool_error={"type": "path_outside_sandbox", "message": str(exc)}), None
        return ToolResult(tool="submit", observation=f"Submitted {path}. The episode is over; it is being graded."), path

    def grade_on_disk(self) -> GradeReport | None:
        """The grade of the submission file as it stands now, through the same service as the
        end-of-budget grading; None when there is no sandbox to read it from (never reset, or
        closed). For harnesses that must grade an episode their agent crashed out of."""
        if self._submissions is None or self.sandbox is None:
            return None
        return self._submissions.grade(self.submission_path)

    def _grade(self, path: str | None) -> GradeReport:
        """Grade the file at `path` in the sandbox (None: nothing submitted), in a limited child process."""
        assert self._submissions is not None
        return self._submissions.grade(path)

    def reward_of(self, grade: GradeReport) -> float:
        """The reward this env gives for `grade` under its `reward` setting (what a graded episode ends with)."""
        return self._reward(grade)

    def _reward(self, grade: GradeReport) -> float:
        if not grade.valid_submission:
            return 0.0
        if self.config.reward == "medal":
            return MEDAL_REWARD[grade.medal]
        if self.config.reward == "any_medal":
            return 1.0 if grade.any_medal else 0.0
        return float(grade.percentile or 0.0)
