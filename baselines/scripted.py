"""Scripted agents: solve a competition through tool calls alone, as an agent would.

They look at the data, write a training script with `write_file`, run it with `bash`, check the
file with `validate_submission` and `submit`. When the script fails or the file is invalid they
fall back once (the CNN to the scikit-learn pipeline; scikit-learn to the sample submission).
A competition with no pipeline gets the sample submission, validated and submitted (a valid
file and no medal: a floor for the table, not a result), unless `unsupported="error"`.
"""

from __future__ import annotations

import shlex
from typing import Any

from mle_gym.baselines.base import Action, submit_action
from mle_gym.baselines.solutions import SOLUTIONS, Solution

SCRIPT_NAME = "solution.py"


_COPY_SAMPLE = """import shutil, sys, tempfile, zipfile
from pathlib import Path
source, target = sys.argv[1], sys.argv[2]
if zipfile.is_zipfile(source):
    with zipfile.ZipFile(source) as archive:
        member = next(n for n in archive.namelist() if not n.endswith("/"))
        with open(target, "wb") as out:
            out.write(archive.read(member))
elif source.endswith(".7z"):
    import py7zr  # in the full image; the slim one has no 7z reader
    with tempfile.TemporaryDirectory() as tmp, py7zr.SevenZipFile(source) as archive:
        archive.extractall(tmp)
        shutil.copyfile(next(p for p in sorted(Path(tmp).rglob("*.csv"))), target)
else:
    shutil.copyfile(source, target)
"""


def _sample_submission_name(env: Any) -> str | None:
    """The competition's sample submission file (its metadata's name), when the env says which competition."""
    comp = getattr(getattr(env, "unwrapped", None), "competition", None)
    return getattr(getattr(comp, "metadata", None), "sample_submission_file", None)


def _competition_of(info: dict[str, Any], env: Any) -> str | None:
    if info.get("competition"):
        return str(info["competition"])
    unwrapped = getattr(env, "unwrapped", None)
    comp = getattr(unwrapped, "competition", None)
    return getattr(comp, "id", None)


class ScriptedAgent:
    """Dispatches by competition id to a pipeline in `mle_gym.baselines.solutions.SOLUTIONS`.

    Options: `use_torch` (None: probe the sandbox with `python3 -c "import torch"`; True/False:
    force), `timeout_s` for the training run. Unknown competitions raise at `reset` with the list
    of scripted ones.
    """

    name = "scripted"

    def __init__(self, *, env: Any = None, seed: int | None = None, use_torch: bool | None = None,
                 timeout_s: float | None = None, unsupported: str = "sample") -> None:
        if unsupported not in ("sample", "error"):
            raise ValueError(f"unsupported must be 'sample' or 'error', got {unsupported!r}")
        self.unsupported = unsupported
        self._env = env
        self.seed = seed
        self.use_torch = use_torch
        self.timeout_s = timeout_s
        self._plan: list[str] = []
        self._solution: Solution | None = None
        self._script: str = ""
        self._paths: dict[str, str] = {}
        self._submission = ""
        self._pending: str | None = None
        self._sample_name: str | None = None
        self._fell_back = False
        self.log: list[str] = []  # what the agent decided, for tests and transcripts

    @staticmethod
    def supported() -> list[str]:
        return sorted(SOLUTIONS)

    def reset(self, prompt: str, info: dict[str, Any]) -> None:
        comp = _competition_of(info, self._env)
        if comp not in SOLUTIONS and self.unsupported == "error":
            raise ValueError(f"the scripted agent has no pipeline for {comp!r}; it solves: {', '.join(self.supported())}")
        self._paths = dict(info["paths"])
        self._submission = str(info["submission_path"])
        self._sample_name = _sample_submission_name(self._env)
        if comp not in SOLUTIONS:
            self._solution = None
            self._fell_back = True
            self._pending = None
            self.log = [f"competition {comp}", "no pipeline for it: submitting the sample submission"]
            self._plan = ["look", "copy_sample", "validate", "submit"]
            return
        self._solution = SOLUTIONS[comp]
        self._script = self._solution.script
        self._fell_back = False
        self._pending = None
        self.log = [f"competition {comp}"]
        self._plan = ["look"]
        if self._solution.torch_script is not None:
            if self.use_torch is None:
                self._plan.append("probe_torch")
            elif self.use_torch:
                self._script = self._solution.torch_script
        self._plan += ["write", "run", "validate", "submit"]

    # -- the loop ------------------------------------------------------------------------
    def act(self, observation: str, info: dict[str, Any]) -> Action:
        if self._pending is not None:
            self._observe(self._pending, observation, info)
        if info.get("steps_left", 2) <= 1 and self._plan and self._plan[0] != "submit":
            self._plan = ["submit"]  # last step of the budget: grade what is there
        if not self._plan:
            self._plan = ["submit"]
        self._pending = self._plan.pop(0)
        return getattr(self, f"_do_{self._pending}")()

    def _observe(self, done: str, observation: str, info: dict[str, Any]) -> None:
        """Read the result of the last action and change the plan when it went wrong."""
        failed = bool(info.get("tool_error")) or (info.get("exit_code") not in (None, 0))
        if done == "probe_torch":
            if not failed:
                assert self._solution is not None and self._solution.torch_script is not None
                self._script = self._solution.torch_script
                self.log.append("torch is available: training the CNN")
            else:
                self.log.append("no torch in the sandbox: scikit-learn features")
        elif done == "run" and failed:
            said = [line for line in observation.splitlines() if line.strip() and not line.startswith("[exit code")]
            self._fall_back(f"the training script failed: {said[-1] if said else 'no output'}")
        elif done == "validate" and (failed or not observation.startswith("Submission is valid")):
            self._fall_back(f"the submission is not valid: {observation.strip()[:200]}")

    def _fall_back(self, why: str) -> None:
        self.log.append(why)
        if self._fell_back:
            self.log.append("already fell back once: submitting as is")
            self._plan = ["submit"]
            return
        self._fell_back = True
        assert self._solution is not None
        if self._script != self._solution.script:
            self.log.append("falling back to the scikit-learn pipeline")
            self._script = self._solution.script
            self._plan = ["write", "run", "validate", "submit"]
        else:
            self.log.append("falling back to the sample submission")
            self._plan = ["copy_sample", "validate", "submit"]

    # -- actions -------------------------------------------------------------------------
    def _do_look(self) -> Action:
        return {"name": "list_dir", "arguments": {"path": self._paths["data"]}}

    def _do_probe_torch(self) -> Action:
        return {"name": "bash", "arguments": {"command": 'python3 -c "import torch; print(torch.__version__)"'}}

    def _do_write(self) -> Action:
        return {"name": "write_file", "arguments": {"path": self._script_path(), "content": self._script}}

    def _do_run(self) -> Action:
        assert self._solution is not None
        argv = ["python3", self._script_path(), self._paths["data"], self._submission, str(self.seed or 0)]
        command = " ".join(shlex.quote(p) for p in argv)
        args: dict[str, Any] = {"command": command}
        timeout = self.timeout_s or self._solution.timeout_s
        if timeout:
            args["timeout_s"] = timeout
        return {"name": "bash", "arguments": args}

    def _do_validate(self) -> Action:
        return {"name": "validate_submission", "arguments": {"path": self._submission}}

    def _do_copy_sample(self) -> Action:
        data = self._paths["data"].rstrip("/")
        if self._sample_name is None or self._sample_name.startswith("../"):  # not in the public folder as a file
            source = f"\"$(ls {shlex.quote(data)}/sample*ubmission* | head -n 1)\""
        else:
            source = shlex.quote(f"{data}/{self._sample_name}")
        # the sample submission as the competition ships it: a CSV, or a zip holding one
        command = f"python3 -c {shlex.quote(_COPY_SAMPLE)} {source} {shlex.quote(self._submission)}"
        return {"name": "bash", "arguments": {"command": command}}

    def _do_submit(self) -> Action:
        return submit_action(self._submission)

    def _script_path(self) -> str:
        return self._paths["code"].rstrip("/") + "/" + SCRIPT_NAME
