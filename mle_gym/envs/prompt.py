"""The task prompt an episode opens with: mle-gym's own, or MLE-bench's text (`prompt="mlebench"`)."""

from __future__ import annotations

from typing import Any

from mle_gym.tools.parse import usage
from mle_gym.tools.schemas import TOOL_NAMES


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:g} hours"
    if seconds >= 60:
        return f"{seconds / 60:g} minutes"
    return f"{seconds:g} seconds"


def build_prompt(
    *, description: str, paths: dict[str, str], submission_path: str, max_steps: int, time_limit_s: float,
    command_timeout_s: float, max_output_chars: int, sample_data: bool, isolation: str,
    installed: dict[str, Any] | None = None, hardware: dict[str, Any] | None = None,
) -> str:
    """mle-gym's prompt. `installed` is the sandbox image's manifest (profile, Python version,
    distributions): the prompt lists what the image really holds, not a hand-written list."""
    tools = "\n".join(f"- {usage(name)}" for name in TOOL_NAMES)
    sample_note = (
        "\nThis episode uses small synthetic sample data with the real competition's files and columns; "
        "scores on it are not comparable with the real leaderboard.\n" if sample_data else ""
    )
    return f"""You are solving a machine-learning competition end to end, working through tools in a sandbox.

# Competition
{description.strip()}
{sample_note}
# Your sandbox
- Competition data (read-only): {paths["data"]}
- Write your code and intermediate files in: {paths["code"]} (the shell starts there)
- Logs: {paths["logs"]}
- Your submission must be written to: {submission_path}

{_hardware_section(hardware)}{_installed_section(installed)}# Tools
{tools}

# Rules and budgets
- Write predictions for the test set to {submission_path} in the format described above, then call `submit`.
  `submit` ends the episode; the file is graded with the competition's metric against hidden answers.
- `validate_submission` checks the format only (columns, ids, row count, values) and never reveals a score.
- The hidden answers are not in the sandbox; do not look for them.
- You have at most {max_steps} steps (one step is one message of yours, with one or more tool calls) and
  {_duration(time_limit_s)} of wall-clock time. When either runs out, whatever is at {submission_path} at that
  moment is graded.
- One bash call runs at most {_duration(command_timeout_s)} by default (pass timeout_s to change it); longer work can run
  in the background (`nohup python train.py > train.log 2>&1 &`) and be checked on later.
- Tool output longer than {max_output_chars:,} characters is cut to its head and tail; the full text is saved to a file.
- Sandbox isolation: {isolation}.
"""


def hardware_of(described: dict[str, Any]) -> dict[str, Any]:
    """What the agent's sandbox may use, from the sandbox's description: CPUs, memory and GPUs (MLE-bench
    tells its agents the hardware too). Limits not set are the host's (os.cpu_count, physical memory)."""
    import os

    try:
        host_memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        host_memory = None
    return {"cpus": described.get("cpus") or os.cpu_count(), "memory_bytes": described.get("memory_bytes") or host_memory,
            "gpus": list(described.get("gpus") or [])}


def _hardware_section(hardware: dict[str, Any] | None) -> str:
    if not hardware:
        return ""
    cpus = hardware.get("cpus")
    memory = hardware.get("memory_bytes")
    gpus = hardware.get("gpus") or []
    lines = [f"- CPUs: {cpus:g}" if isinstance(cpus, (int, float)) else "- CPUs: unknown",
             f"- Memory: {memory / 2**30:.1f} GiB" if memory else "- Memory: unknown",
             f"- GPUs: {len(gpus)} ({', '.join(map(str, gpus))})" if gpus else "- GPUs: none"]
    return "# Hardware\n" + "\n".join(lines) + "\n\n"


def _installed_section(manifest: dict[str, Any] | None) -> str:
    if not manifest:
        return ""
    # here, not at the top: the package mle_gym.sandbox.docker loads the Docker SDK, which gym.make does not need
    from mle_gym.sandbox.docker.image import chosen_packages

    chosen = chosen_packages(manifest)
    if not chosen:
        return ""
    listed = ", ".join(f"{name} {version}" for name, version in chosen)
    python = f"Python {manifest['python']}" if manifest.get("python") else "Python"
    has_pip = any(name.lower() == "pip" for name in manifest.get("packages") or {})
    command = "`python3`, `pip`" if has_pip else "`python3`; no pip"
    return (f"# Installed software\n{python} ({command}) with these packages, among others: {listed}.\n"
            "Anything else may be missing: check with `python3 -c 'import NAME'` before relying on it.\n\n")


# The separator AIDE's start script (in MLE-bench's agents/) puts between the instructions and the description.
MLEBENCH_SEPARATOR = "\nCOMPETITION INSTRUCTIONS\n------\n\n"


def build_mlebench_prompt(*, instructions: str, description: str) -> str:
    """MLE-bench's text, verbatim: its agent instructions, then the competition's description.

    Joined as MLE-bench's AIDE agent joins them, without AIDE's own notes. The text is
    MLE-bench's alone: it names MLE-bench's paths (`/home/data`, `/home/submission`, which the
    Docker sandbox shares) and its validation server (here the `validate_submission` tool, whose
    schema the agent gets with the other tools).
    """
    return instructions + MLEBENCH_SEPARATOR + description
