"""Runs: an agent over competitions and seeds (runner), one episode of it (episode), Ray tasks (ray_run),
the live progress view (progress) and the rates of a run folder, as MLE-bench counts them (rates).

The Ray runner plugs into the runner through one small interface (`RayRunner.play`/`watch`/`close`)
and imports only `episode`, never the runner: no import circle. May import envs (through
Gymnasium), pools (the Ray runner's actors), baselines, records, tools (terminal-safe text),
competitions and errors.
"""
