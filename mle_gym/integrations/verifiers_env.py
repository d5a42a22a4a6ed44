"""mle-gym episodes as a `verifiers` multi-turn environment (install with `pip install 'mle-gym[verifiers]'`).

`MLEGymEnv` is a `verifiers.MultiTurnEnv` whose rollouts are mle-gym episodes. Its dataset holds
one row per (competition, seed); a rollout takes a free episode slot from a pool of environments
(`mle_gym.pools.episode_pool.EpisodePool` by default; `RayEpisodePool` through `pool_factory`), resets it on its
row's competition with its row's seed, and puts the task statement in the prompt. Each assistant
message goes to `env.step()` as raw text (the tool calls inside it, in any format
`mle_gym.tools.message` reads), and the observation comes back as the next user message. The
rollout ends when the episode does (terminated or truncated); its reward is the episode's
terminal reward (the medal by default), and the grade report is kept in the rollout's `info`
under "mle_gym" (with the competition, seed, steps and how the episode ended).

    import verifiers as vf
    from mle_gym.integrations.verifiers_env import load_environment

    env = load_environment(competitions=["aerial-cactus"], seeds=4, env_options={"data": "sample"})
    results = env.evaluate_sync(client=vf.ClientConfig(api_base_url="http://127.0.0.1:8000/v1",
                                                       api_key_var="OPENAI_API_KEY"), model="my-model")
    env.close()

`vf.load_environment("mle_gym.integrations.verifiers_env", ...)` (what `vf-eval` and trainers
built on verifiers call) finds the same `load_environment`. Slots are reused across rollouts: a
slot's environment is made once and reset for each episode (the Docker sandbox then swaps in a
fresh container, made ahead by its warm spare). `close()` (or the environment's teardown at exit)
closes every environment and so every container. The default pool gives each of its
`max_episodes` Docker containers its share of this machine's memory (`EpisodePool.make`).

What a rollout does with an error out of `step()` (`mle_gym.pools.faults`): our own faults (no
Docker daemon, no image, a container that died, data not prepared) retire the slot and fail the
rollout with `vf.InfraError`; any other error, one the agent's actions may have caused (a shell or
helper it killed, a file the grader could not take), ends the rollout **scored**: reward 0,
`info["mle_gym"]["truncation_reason"] == "fault_in_step"` and the reason in
`info["mle_gym"]["fault"]`, so that no policy escapes a bad score by breaking its episode. The
slot's env is then reset at once; if that fails, the fault was ours and the slot is retired.
Messages that reach the trainer carry no host path and no traceback (the log has them).

Models served with a tool-call parser (vLLM's `--enable-auto-tool-choice`) return structured
`tool_calls` instead of raw text: pass `native_tools=True` to send the tool schemas with each
request; the calls are then run as one step, as raw text would be, and answered with tool messages.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

try:
    import verifiers as vf
    from datasets import Dataset
    from verifiers.types import ToolMessage, UserMessage
except ImportError as exc:  # the extra is not installed
    raise ImportError(
        f"mle_gym.integrations.verifiers_env needs the `verifiers` package ({exc}); "
        "install it with `pip install 'mle-gym[verifiers]'`"
    ) from exc

from mle_gym.competitions import get_competition
from mle_gym.errors import CompetitionNotFoundError, MLEGymError
from mle_gym.pools.episode_pool import EpisodePool
from mle_gym.pools.faults import agent_fault, is_our_fault, trainer_message
from mle_gym.registry import split_members
from mle_gym.tools import openai_tools, tool_prompt

log = logging.getLogger(__name__)

PoolFactory = Callable[[str, int, dict[str, Any]], Any]
"""(gym id, number of slots, env options) -> an object with EpisodePool's async API
(`reset(i, seed=, options=)`, `step(i, action)`, `aclose()`, `len()`)."""

ALL_RETIRED = ("every mle-gym episode slot was retired after harness errors (see the log); check Docker and "
               "the sandbox image, then make a new environment")

INTRO = ("You are an agent solving a machine-learning competition in a sandbox. You act only through "
         "tool calls; each of your messages may hold one or several, and their output comes back to you.")


def _episode_pool(env_id: str, n: int, options: dict[str, Any]) -> EpisodePool:
    return EpisodePool.make(env_id, n, **options)


def _text(content: Any) -> str:
    """A message's text: a str, or the text parts of a list of content parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        text = part.get("text") if isinstance(part, Mapping) else getattr(part, "text", None)
        if isinstance(text, str):
            parts.append(text)
    return "".join(parts)


def _field(message: Any, name: str) -> Any:
    return message.get(name) if isinstance(message, Mapping) else getattr(message, name, None)


def system_prompt(style: str = "hermes", *, native_tools: bool = False) -> str:
    """The default system prompt: a short brief and, for raw-text models, the tool section in `style`
    (`mle_gym.tools.tool_prompt`); with `native_tools` the schemas travel in the request instead."""
    if native_tools:
        return INTRO
    return INTRO + "\n\n" + tool_prompt(openai_tools(), style=style)  # type: ignore[arg-type]


def competition_dataset(competitions: Sequence[str], seeds: int | Sequence[int] = 1, *,
                        system: str | None = None) -> Dataset:
    """One row per (competition, seed): `prompt` (the system prompt and a stand-in user message that
    the episode's task statement replaces when its sandbox is ready), `info` {"competition", "seed"},
    and `answer` (empty: the grader holds the answers). `seeds` is a count (seeds
    0..n-1) or a list. Competitions are ids or aliases, with or without the "mle/" prefix; a split
    ("split-lite", "mle/split-low", ...) stands for its packaged competitions."""
    if isinstance(seeds, int):
        if seeds < 1:
            raise ValueError(f"seeds must be a positive count or a list of ints, got {seeds}")
        seeds = list(range(seeds))
    if not competitions:
        raise ValueError("competitions must name at least one competition (an id or alias, e.g. 'aerial-cactus')")
    rows: dict[str, list[Any]] = {"prompt": [], "info": [], "answer": []}
    names: list[str] = []
    for name in competitions:
        name = name.removeprefix("mle/")
        if name.startswith("split-"):
            members = split_members(name.removeprefix("split-"))
            if not members:
                raise CompetitionNotFoundError(f"the split {name!r} has no packaged competition "
                                               "(`mle-gym list` shows what is packaged)")
            names += members
        else:
            names.append(get_competition(name).id)  # raises with the nearest match on a typo
    for competition in names:
        for seed in seeds:
            messages = [] if system is None else [{"role": "system", "content": system}]
            messages.append({"role": "user", "content": f"(competition {competition}, seed {seed}: the task "
                                                        "statement replaces this message when the sandbox is ready)"})
            rows["prompt"].append(messages)
            rows["info"].append({"competition": competition, "seed": int(seed)})
            rows["answer"].append("")
    return Dataset.from_dict(rows)


class MLEGymRubric(vf.Rubric):
    """The reward is the episode's own terminal reward; medal, validity and steps are metrics."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.add_reward_func(self.episode_reward, weight=1.0)
        self.add_metric(self.any_medal)
        self.add_metric(self.valid_submission)
        self.add_metric(self.env_steps)

    @staticmethod
    def _episode(state: Any) -> dict[str, Any]:
        return state.get("mle_gym") or {}

    async def episode_reward(self, state: Any) -> float:
        return float(self._episode(state).get("reward") or 0.0)

    async def any_medal(self, state: Any) -> float:
        grade = self._episode(state).get("grade") or {}
        return 1.0 if grade.get("any_medal") else 0.0

    async def valid_submission(self, state: Any) -> float:
        grade = self._episode(state).get("grade") or {}
        return 1.0 if grade.get("valid_submission") else 0.0

    async def env_steps(self, state: Any) -> float:
        return float(self._episode(state).get("steps") or 0)


class MLEGymEnv(vf.MultiTurnEnv):
    """verifiers rollouts over mle-gym episodes; see the module docstring.

    Arguments: `competitions` and `seeds` build the dataset (or pass `dataset=`), `env_options` go to
    `gym.make` for every slot (data, sandbox, max_steps, reward, ...), `max_episodes` is the number of
    slots (episodes in flight; a rollout beyond it waits for a free slot), `pool_factory` makes the
    pool (default `EpisodePool.make`), `tool_style` the tool section's format for raw-text models,
    `native_tools` sends the schemas as API tools. Other keyword arguments go to `vf.MultiTurnEnv`
    (max_turns, timeout_seconds, sampling_args, ...); by default the episode's own budget
    (`max_steps`, `time_limit_s`) decides when it ends, so that the end is graded.
    """

    def __init__(self, competitions: Sequence[str] = ("aerial-cactus",), seeds: int | Sequence[int] = 1, *,
                 env_options: Mapping[str, Any] | None = None, max_episodes: int = 8,
                 pool_factory: PoolFactory | None = None, tool_style: str = "hermes", native_tools: bool = False,
                 dataset: Dataset | None = None, eval_dataset: Dataset | None = None,
                 system: str | None = None, rubric: vf.Rubric | None = None, **kwargs: Any) -> None:
        if max_episodes < 1:
            raise ValueError(f"max_episodes must be at least 1, got {max_episodes}")
        if system is None:
            system = system_prompt(tool_style, native_tools=native_tools)
        if dataset is None and eval_dataset is None:
            dataset = competition_dataset(competitions, seeds, system=system)
        if native_tools:
            kwargs.setdefault("tool_defs", [dict(t["function"]) for t in openai_tools()])
        super().__init__(dataset=dataset, eval_dataset=eval_dataset if eval_dataset is not None else dataset,
                         rubric=rubric or MLEGymRubric(), **kwargs)
        self.env_options = dict(env_options or {})
        self.max_episodes = max_episodes
        self.pool_factory: PoolFactory = pool_factory or _episode_pool
        self._pool: Any = None
        self._free: list[int] = []
        self._retired: set[int] = set()
        self._waiters: collections.deque[asyncio.Future[int]] = collections.deque()
        self._in_flight: dict[int, asyncio.Future[Any]] = {}

    # -- slots ---------------------------------------------------------------------------------
    async def _acquire(self, competition: str) -> int:
        if self._pool is None:
            self._pool = self.pool_factory(f"mle/{competition}", self.max_episodes, dict(self.env_options))
            self._free, self._retired = list(range(self.max_episodes)), set()
        if self._free:
            return self._free.pop()
        if len(self._retired) >= self.max_episodes:
            raise vf.InfraError(ALL_RETIRED)
        if self._waiters and self._waiters[0].get_loop() is not asyncio.get_running_loop():
            self._waiters.clear()  # left by an earlier event loop (another evaluate_sync call): nobody awaits them
        waiter: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            return await waiter
        except asyncio.CancelledError:  # a slot handed over just as the rollout was cancelled goes back
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._release(waiter.result())
            raise

    def _release(self, slot: int) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(slot)
                return
        self._free.append(slot)

    def _retire(self, slot: int, exc: BaseException) -> None:
        """A harness fault left this slot's environment in an unknown state: a pool that can restart
        an episode (RayEpisodePool) gets a new one; otherwise the slot is not used again."""
        restart = getattr(self._pool, "restart", None)
        if callable(restart):
            try:
                restart(slot)
                return
            except Exception:  # a failed restart retires the slot, as below
                log.exception("restarting mle-gym episode slot %d failed", slot)
        log.error("mle-gym episode slot %d is retired after a harness error: %s", slot, type(exc).__name__,
                  exc_info=exc)
        self._retired.add(slot)

    async def _call(self, slot: int, method: str, *args: Any, **kwargs: Any) -> Any:
        """A pool call that outlives the rollout's cancellation (verifiers' timeout): the slot is
        released only once the environment is idle again (see `release_episode`)."""
        task = asyncio.ensure_future(getattr(self._pool, method)(slot, *args, **kwargs))
        self._in_flight[slot] = task
        try:
            result = await asyncio.shield(task)
        except asyncio.CancelledError:  # the call runs on; `release_episode` waits for it
            raise
        except BaseException:
            self._in_flight.pop(slot, None)
            raise
        self._in_flight.pop(slot, None)
        return result

    # -- rollout hooks -------------------------------------------------------------------------
    async def setup_state(self, state: Any) -> Any:
        info = state.get("info") or {}
        competition = get_competition(str(info.get("competition", "")).removeprefix("mle/")).id
        seed = info.get("seed")
        slot = await self._acquire(competition)
        episode: dict[str, Any] = {"competition": competition, "seed": seed, "slot": slot, "steps": 0,
                                   "reward": 0.0, "finished": False, "terminated": False, "truncated": False,
                                   "truncation_reason": None, "grade": None, "tool_errors": 0}
        state["mle_gym"] = episode
        if isinstance(info, dict):
            info["mle_gym"] = episode  # the rollout's output keeps `info`: the grade travels with it
        try:
            observation, reset_info = await self._call(slot, "reset", seed=seed, options={"competition": competition})
        except MLEGymError as exc:  # the agent has not acted yet: ours
            self._retire(slot, exc)
            raise vf.InfraError(f"resetting the mle-gym episode ({competition}, seed {seed}) failed: "
                                f"{trainer_message(exc)}") from exc
        episode["sandbox"] = reset_info.get("sandbox")
        prompt = list(state["prompt"])
        if prompt and _field(prompt[-1], "role") == "user":
            prompt[-1] = UserMessage(content=observation)
        else:
            prompt.append(UserMessage(content=observation))
        state["prompt"] = prompt
        return state

    async def env_response(self, messages: Any, state: Any, **kwargs: Any) -> Any:
        episode = state["mle_gym"]
        slot = episode["slot"]
        last = messages[-1]
        text = _text(_field(last, "content"))
        calls = _field(last, "tool_calls") or []
        action = text
        if calls:  # a server that parsed the calls out of the text: run them as the text would have
            action = text + "".join(f'<tool_call>{{"name": {json.dumps(_field(c, "name"))}, '
                                    f'"arguments": {_field(c, "arguments") or "{}"}}}</tool_call>' for c in calls)
        try:
            observation, reward, terminated, truncated, info = await self._call(slot, "step", action)
        except MLEGymError as exc:
            if is_our_fault(exc):
                self._retire(slot, exc)
                raise vf.InfraError(f"the mle-gym episode ({episode['competition']}) failed in step "
                                    f"{episode['steps'] + 1}: {trainer_message(exc)}") from exc
            return await self._end_on_fault_in_step(slot, episode, state, exc)
        episode["steps"] = info.get("step", episode["steps"] + 1)
        if "tool_error" in info:
            episode["tool_errors"] += 1
        if calls:
            ids = [_field(c, "id") for c in calls]
            reply = [ToolMessage(tool_call_id=i, content="(ran; the output of this message's calls is in the last "
                                                         "tool result)") for i in ids[:-1]]
            reply.append(ToolMessage(tool_call_id=ids[-1], content=observation))
        else:
            reply = [UserMessage(content=observation)]
        if terminated or truncated:
            episode.update(reward=float(reward), finished=True, terminated=bool(terminated), truncated=bool(truncated),
                           truncation_reason=info.get("truncation_reason"), grade=info.get("grade"))
            state["final_env_response"] = reply
        return reply

    async def _end_on_fault_in_step(self, slot: int, episode: dict[str, Any], state: Any,
                                     exc: MLEGymError) -> list[Any]:
        """A step raised an error the agent's actions may have caused (a shell or helper it killed, a file
        the grader could not take): the rollout ends scored, reward 0, with the reason, never as an
        infrastructure error a trainer would drop (a policy must not learn to escape its score that way).
        The slot's env is reset right away: if that fails, the fault was ours after all, and the slot goes."""
        fault = agent_fault(exc, episode["steps"] + 1)
        try:
            await self._call(slot, "reset", seed=episode["seed"], options={"competition": episode["competition"]})
        except MLEGymError as reset_exc:
            self._retire(slot, reset_exc)
            raise vf.InfraError(f"the mle-gym episode ({episode['competition']}) failed in step {fault.step}: "
                                f"{fault.reason}; its environment could not be reset after it: "
                                f"{trainer_message(reset_exc)}") from exc
        episode.update(reward=fault.reward, finished=True, terminated=False, truncated=True,
                       truncation_reason=fault.truncation_reason, grade=None, fault=dict(fault.record))
        reply = [UserMessage(content=fault.observation)]
        state["final_env_response"] = reply
        return reply

    @vf.cleanup
    async def release_episode(self, state: Any) -> None:
        """Give the rollout's slot back once its environment is idle (a step cut off by a timeout
        still runs to its end in its thread)."""
        episode = state.get("mle_gym")
        if not episode or "slot" not in episode:
            return
        slot = episode.pop("slot")
        pending = self._in_flight.pop(slot, None)  # a call its rollout stopped waiting for
        if pending is not None:
            try:
                await pending
            except Exception as exc:  # nobody else will see it
                log.warning("mle-gym episode slot %d: a call cut off by the rollout's end failed: %s", slot,
                            type(exc).__name__, exc_info=exc)
                if not isinstance(exc, MLEGymError) or is_our_fault(exc):
                    self._retire(slot, exc)
                # else: an error the agent may have caused; the slot's next reset replaces its sandbox
        if not episode.get("finished") and slot not in self._retired and episode.get("sandbox") is not None:
            await self._grade_stopped(slot, episode)
        if slot not in self._retired:
            self._release(slot)
        elif len(self._retired) >= self.max_episodes:
            self._fail_waiters(vf.InfraError(ALL_RETIRED))

    async def _grade_stopped(self, slot: int, episode: dict[str, Any]) -> None:
        """An episode verifiers ended before the env did (its turn or time limit, an overlong prompt, a
        model error) is graded on the submission file as it stands, like a budget truncation: every
        started episode counts with what it left on disk."""
        grade_now = getattr(self._pool, "grade_on_disk", None)
        if grade_now is None:
            return
        try:
            grade, reward = await grade_now(slot)
        except Exception as exc:  # the episode then counts as no medal (reward 0), as before
            log.warning("mle-gym episode slot %d: grading the submission on disk failed: %r", slot, exc)
            return
        episode.update(reward=float(reward), grade=grade, finished=True, truncated=True,
                       truncation_reason="stopped_by_trainer", graded_on_disk=True)

    def _fail_waiters(self, exc: BaseException) -> None:
        """Wake every rollout waiting for a slot with `exc` (a future of a closed loop is dropped)."""
        waiters, self._waiters = self._waiters, collections.deque()
        for waiter in waiters:
            if not waiter.done() and not waiter.get_loop().is_closed():
                waiter.set_exception(exc)

    @vf.teardown
    async def close_episodes(self) -> None:
        await self.aclose()

    # -- closing -------------------------------------------------------------------------------
    async def aclose(self) -> None:
        """Close every episode's environment (and so its sandbox); never raises; safe to call twice."""
        pool, self._pool = self._pool, None
        self._fail_waiters(vf.InfraError("the mle-gym environment was closed while this rollout waited for an "
                                         "episode slot"))
        if pool is not None:
            try:
                await pool.aclose()
            except Exception:  # closing must not raise; the envs' own exit cleanup still runs
                log.exception("closing the mle-gym episode pool failed")

    def close(self) -> None:
        """`aclose` for code outside an event loop."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        try:
            if callable(getattr(pool, "close", None)):
                pool.close()
            else:
                asyncio.run(pool.aclose())
        except Exception:  # closing must not raise
            log.exception("closing the mle-gym episode pool failed")


def load_environment(competitions: Sequence[str] = ("aerial-cactus",), seeds: int | Sequence[int] = 1, *,
                     env_options: Mapping[str, Any] | None = None, max_episodes: int = 8,
                     **kwargs: Any) -> MLEGymEnv:
    """verifiers' entry point (`vf.load_environment("mle_gym.integrations.verifiers_env", ...)`).

    `env_options` default to sample data in the Docker sandbox ({"data": "sample"}); pass
    {"data": "kaggle"} after `mle-gym prepare` for the real competitions.
    """
    return MLEGymEnv(competitions, seeds, env_options={"data": "sample", **(env_options or {})},
                     max_episodes=max_episodes, **kwargs)
