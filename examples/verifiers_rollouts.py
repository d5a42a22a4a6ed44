"""A few verifiers rollouts of mle-gym episodes against an OpenAI-compatible chat server.

With no --base-url, a scripted stand-in model is served on 127.0.0.1
(`mle_gym.integrations.scripted_server`): it answers in raw text with Hermes `<tool_call>` blocks,
taking in turn the plans "heuristic" (a scoring script, validated and submitted), "sample" (the
sample submission) and "nothing" (no tool call, then a submit without a file), so the rollouts earn
different, real grades. With --base-url, any OpenAI-compatible server (vLLM, SGLang, a hosted API)
plays the model; the key is read from --api-key-var.

    pip install 'mle-gym[verifiers]'
    python examples/verifiers_rollouts.py                        # Docker sandbox, sample data
    python examples/verifiers_rollouts.py --sandbox local        # no container (no isolation)
    python examples/verifiers_rollouts.py --base-url http://127.0.0.1:8000/v1 --model Qwen/Qwen3-8B

Prints one line per rollout (reward, medal, score, steps) and, with --json, writes every rollout's
reward and mle-gym record (competition, seed, grade report, how the episode ended) to a file.
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import nullcontext
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--competition", action="append", default=None,
                        help="competition id or alias (repeatable; default: aerial-cactus)")
    parser.add_argument("--rollouts", type=int, default=3, help="rollouts per competition, seeds 0..N-1 (default 3)")
    parser.add_argument("--sandbox", choices=("docker", "local"), default="docker")
    parser.add_argument("--image", default=None, help="the Docker sandbox image (default: mle-gym's default tag)")
    parser.add_argument("--data", choices=("sample", "kaggle"), default="sample")
    parser.add_argument("--reward", choices=("medal", "any_medal", "percentile"), default="percentile",
                        help="the episode's terminal reward (default percentile: it tells apart rollouts "
                             "that all miss a medal, which GRPO's group advantages need)")
    parser.add_argument("--max-steps", type=int, default=20)
    parser.add_argument("--max-episodes", type=int, default=2, help="episodes (sandboxes) in flight at once")
    parser.add_argument("--base-url", default=None, help="an OpenAI-compatible /v1 endpoint (default: the scripted model)")
    parser.add_argument("--api-key-var", default="OPENAI_API_KEY", help="environment variable holding the API key")
    parser.add_argument("--model", default="scripted")
    parser.add_argument("--native-tools", action="store_true",
                        help="send the tool schemas as API tools (for servers run with a tool-call parser)")
    parser.add_argument("--json", type=Path, default=None, help="write the rollouts' rewards and records here")
    args = parser.parse_args(argv)

    try:
        import verifiers as vf

        from mle_gym.integrations.verifiers_env import load_environment
    except ImportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from mle_gym.integrations.scripted_server import ScriptedChatServer

    env_options = {"sandbox": args.sandbox, "data": args.data, "reward": args.reward, "max_steps": args.max_steps}
    if args.image and args.sandbox == "docker":
        env_options["image"] = args.image
    server = ScriptedChatServer() if args.base_url is None else nullcontext()
    with server:
        base_url = args.base_url or server.base_url
        env = load_environment(
            competitions=args.competition or ["aerial-cactus"], seeds=args.rollouts, max_episodes=args.max_episodes,
            native_tools=args.native_tools, env_options=env_options,
        )
        try:
            results = env.evaluate_sync(client=vf.ClientConfig(api_base_url=base_url, api_key_var=args.api_key_var),
                                        model=args.model, max_concurrent=args.max_episodes)
        finally:
            env.close()

    records = []
    for out in results["outputs"]:
        episode = out["info"]["mle_gym"]
        grade = episode.get("grade") or {}
        records.append({"reward": out["reward"], "error": None if out.get("error") is None else str(out["error"]),
                        "stop_condition": out.get("stop_condition"), "mle_gym": episode})
        ended = ("submitted" if episode["terminated"] else f"truncated ({episode['truncation_reason']})"
                 if episode["truncated"] else f"not finished ({out.get('stop_condition')})")
        print(f"{episode['competition']} seed {episode['seed']}: reward {out['reward']:.4f}  "
              f"medal {grade.get('medal', '-')}  score {grade.get('score')}  valid {grade.get('valid_submission')}  "
              f"steps {episode['steps']}  {ended}")
    rewards = [r["reward"] for r in records]
    print(f"{len(rewards)} rollouts, mean reward {sum(rewards) / max(len(rewards), 1):.4f}")
    if args.json is not None:
        args.json.write_text(json.dumps(records, indent=2, default=str))
    return 1 if any(r["error"] for r in records) else 0


if __name__ == "__main__":
    sys.exit(main())
