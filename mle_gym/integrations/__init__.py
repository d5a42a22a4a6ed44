"""Trainer integrations: mle-gym episodes as the environments of RL and evaluation frameworks.

Each integration lives in its own module and imports its framework only there, so importing
`mle_gym` (or this package) never needs a trainer installed:

- `mle_gym.integrations.verifiers_env`: a `verifiers` multi-turn environment (the extra
  `mle-gym[verifiers]`), for `env.evaluate(...)`, `vf-eval` and trainers built on verifiers;
- `mle_gym.integrations.trl_env`: TRL's `GRPOTrainer(environment_factory=...)` (the extra `mle-gym[trl]`);
- `mle_gym.integrations.text_envs`: SkyRL-gym's `BaseTextEnv` (`mle-gym[skyrl]`) and rLLM's `BaseEnv`;
- `mle_gym.integrations.openenv_server`: `mle-gym serve`, OpenEnv's HTTP/WebSocket protocol (`mle-gym[serve]`),
  and `mle_gym.integrations.remote_env.RemoteEnv`, its Gymnasium client (`mle-gym[remote]`);
- `mle_gym.integrations.scripted_server`: a scripted OpenAI-compatible chat server that answers
  in raw text with `<tool_call>` blocks, to try an integration without a model (stdlib only).

May import pools, tools, records (JSON-safe values), envs (spaces), config, registry, competitions and
errors; never the sandbox directly.
"""
