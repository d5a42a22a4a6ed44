"""The competition registry: metadata, descriptions, data preparation and grading per competition.

Installed as `mle_gym.competitions`. Each competition is a folder `<kaggle-id>/` beside this
file holding `metadata.json` (validated by `CompetitionMetadata`), `description.md` (our own
words) and `competition.py`. What `competition.py` must and may define is the competition
protocol, written out in docs/competitions.md and checked by `protocol_problems` (the contract
test runs it for every competition):

- must: `prepare(raw, public, private)` (MLE-bench's split of the extracted Kaggle download, its
  draws seeded through `helpers.split_seed`, so `holdout.py` can re-run it on public data)
  and `make_raw(raw, seed, **sizes)` (a synthetic download shaped like Kaggle's, small by default);
- may: `SAMPLE_RAW` (the `make_raw` sizes the sample data is made with; sample data is
  `prepare(make_raw(seed, **SAMPLE_RAW))`), `generate_sample(public, private, seed)` (only where
  sample data cannot be made that way), `validate(submission, answers)` and
  `score(aligned, answers)` (when the defaults from the metadata do not fit);
- may, for task version "fixed" (MLE-bench's known issues repaired; docs/fidelity.md):
  `prepare_fixed(raw, public, private)` (the repaired split; its sample data is
  `prepare_fixed(make_raw(...))`), `generate_sample_fixed(public, private, seed)` (beside an own
  `generate_sample`), and `FIXED_FILES` (MLE-bench-checksummed files the repair changes: name ->
  the MD5 MLE-bench's own fix publishes, or None). A competition without them is the same in both.

`Competition.for_version("fixed")` is the competition as version "fixed" prepares and grades it.

Leaderboard figures of all MLE-bench competitions live in `figures.json` (rebuilt by
`build_figures.py`), so every competition has its thresholds even before it has a folder.
Never imports sandboxes or environments. `gym.make` loads this module, so it loads without pandas:
a competition's `competition.py` loads when its data code or grader is first used, the graders
(`mle_gym.grading`'s validation, metrics and answers) when it first grades.
"""

from __future__ import annotations

import copy
import difflib
import functools
import importlib.util
import inspect
import tempfile
import json
import types
from pathlib import Path
from typing import TYPE_CHECKING, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from mle_gym.errors import CompetitionNotFoundError, GradingError
from mle_gym.grading.columns import ColumnOrder
from mle_gym.grading.medals import LeaderboardFigures

if TYPE_CHECKING:
    import pandas as pd

    from mle_gym.grading import GradeReport

HERE = Path(__file__).resolve().parent

TaskVersion = Literal["v1", "fixed"]
"""Which task a competition is: "v1", MLE-bench as published, or "fixed", its known issues repaired."""
TASK_VERSIONS: tuple[str, ...] = get_args(TaskVersion)

CompetitionTag = Literal["leaky", "prepare-bug", "public-source", "crowded-leaderboard", "checksum-mismatch"]
"""A known issue of MLE-bench v1 (its README's "Known Issues" and the threads behind it):
"leaky": the public files carry the test answers; "prepare-bug": MLE-bench's split or files differ from
the competition's own task; "public-source": the data is a subset of a public labelled dataset (no split
can hide it); "crowded-leaderboard": the medal thresholds lie very close together; "checksum-mismatch":
MLE-bench's published checksums cannot all match. Version "fixed" repairs the first two."""
FIXABLE_TAGS = frozenset({"leaky", "prepare-bug"})


class KnownIssue(BaseModel):
    """One of MLE-bench's known issues with a competition, as its metadata records it."""

    model_config = ConfigDict(extra="forbid")

    tag: CompetitionTag
    thread: str = Field(description="MLE-bench's issue or pull request on it (or its README's Known Issues)")
    summary: str = Field(description="what is wrong in v1, in one sentence")
    leaking: list[str] = Field(
        default=[], description="where v1's public data carries the answers: paths relative to the public folder "
        "(shell globs, as fnmatch reads them), or `PATH:FIELD` for one field of the records in PATH (a JSON file, or "
        "the JSON files of a zip; `Video.Labels` names a struct field of the .mat files in a tar.gz of recordings)")


class FixedOverrides(BaseModel):
    """Grading settings that version "fixed" changes (MLE-bench's own fix for the competition changes them too)."""

    model_config = ConfigDict(extra="forbid")

    target_columns: list[str] | None = None


class CompetitionFigures(BaseModel):
    """One row of `figures.json`: what MLE-bench knows about a competition."""

    model_config = ConfigDict(extra="forbid")

    name: str
    complexity: str
    lite: bool
    in_split75: bool
    dev: bool
    metric: str
    category: str | None = None
    dataset_size_gb: float | None = None
    leaderboard: LeaderboardFigures


class KnownLeak(BaseModel):
    """A file or field of a competition's public data that gives away test answers (MLE-bench v1's known
    issues). `mle-gym audit` flags an episode whose commands or code name it: `files` alone, any of them;
    `fields` alone, any of them; both, a field named in the same command or file as one of the files."""

    model_config = ConfigDict(extra="forbid")

    what: str = Field(description="what leaks, in words")
    files: list[str] = Field(default_factory=list, description="glob patterns, relative to the public data "
                             "folder, of the files that hold the answers")
    exclude: list[str] = Field(default_factory=list, description="glob patterns of files `files` matches that leak nothing")
    fields: list[str] = Field(default_factory=list, description="names of a field, key or column that holds the answers")
    reference: str = Field(description="the thread that reports it")


class CompetitionMetadata(BaseModel):
    """`metadata.json` of a competition folder."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="the Kaggle competition id, e.g. aerial-cactus-identification")
    alias: str = Field(description="short env alias, e.g. aerial-cactus")
    title: str
    category: str
    metric: str = Field(description="MLE-bench's name of the metric (figures.json); a name registered in "
                        "mle_gym.grading.metrics unless competition.py defines its own `score`")
    id_column: str
    target_columns: list[str]
    answers_file: str = "answers.csv"
    sample_submission_file: str = "sample_submission.csv"
    submission_file: str = "submission.csv"
    value_range: tuple[float, float] | None = Field(
        default=None, description="allowed range of numeric predictions, when the metric needs one"
    )
    numeric_targets: bool = Field(
        default=True, description="whether validation checks that the targets are finite numbers (within "
        "value_range); false for text targets, and where the grader checks values only on the rows it scores"
    )
    row_sum_tolerance: float | None = Field(
        default=None, description="when set, each row of the target columns must sum to 1 within it "
        "(numpy.isclose's absolute tolerance; its relative one, 1e-5, applies too, as in MLE-bench)"
    )
    extra_columns: bool = Field(
        default=True, description="whether a submission may hold columns besides the id and the targets "
        "(some of MLE-bench's graders reject them)"
    )
    column_order: ColumnOrder = Field(
        default="any", description="a column order the grader relies on: 'id first' or 'targets as listed'"
    )
    text_numbers: bool = Field(
        default=False, description="a target cell pandas read as text still counts when Python's float() reads "
        "it as a number (e.g. '1_0'), as the scikit-learn conversion in some of MLE-bench's graders has it"
    )
    rows_by_position: bool = Field(
        default=False, description="the grader pairs rows with the answers by position, not by id: the "
        "submission's ids must then be in the answers' (the sample submission's) order"
    )
    rules_url: str | None = None
    tags: list[CompetitionTag] = Field(default=[], description="the tags of its known issues")
    known_issues: list[KnownIssue] = []
    leaks: list[KnownLeak] = Field(default_factory=list, description="files or fields of the public data that give "
                                   "away test answers in MLE-bench v1 (`mle-gym audit` flags reading them)")
    fixed: FixedOverrides | None = Field(default=None, description='grading under version "fixed", where it differs')

    @model_validator(mode="after")
    def _tags_name_the_known_issues(self) -> CompetitionMetadata:
        named = list(dict.fromkeys(issue.tag for issue in self.known_issues))
        if sorted(self.tags) != sorted(named):
            raise ValueError(f"tags {self.tags} must be the tags of known_issues, {named}")
        return self


@functools.lru_cache(maxsize=1)
def _all_figures() -> dict[str, CompetitionFigures]:
    raw = json.loads((HERE / "figures.json").read_text())
    return {cid: CompetitionFigures.model_validate(row) for cid, row in raw.items()}


def list_figures() -> dict[str, CompetitionFigures]:
    """Leaderboard figures of every MLE-bench competition, by Kaggle id."""
    return dict(_all_figures())


class Competition:
    """One registered competition: its metadata, description, data code and grader, in one task version."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.metadata = CompetitionMetadata.model_validate_json((folder / "metadata.json").read_text())
        if self.metadata.id != folder.name:
            raise ValueError(f"{folder}/metadata.json has id {self.metadata.id!r}; expected the folder name")
        figures = _all_figures().get(self.metadata.id)
        if figures is None:
            raise ValueError(f"{self.metadata.id} has no row in figures.json; rerun competitions/build_figures.py")
        self.figures = figures
        self.version: TaskVersion = "v1"
        self._versions: dict[str, Competition] = {"v1": self}

    def __repr__(self) -> str:
        return f"Competition({self.id!r})" if self.version == "v1" else f"Competition({self.id!r}, version={self.version!r})"

    # -- task versions -------------------------------------------------------------------
    def for_version(self, version: str) -> Competition:
        """This competition as task `version` prepares and grades it ("v1": MLE-bench as published;
        "fixed": its known issues repaired, where it has any). The same object for the same version."""
        if version not in TASK_VERSIONS:
            close = difflib.get_close_matches(str(version), TASK_VERSIONS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(f"unknown task version {version!r}{hint}; expected one of {', '.join(TASK_VERSIONS)}")
        found = self._versions.get(version)
        if found is None:
            found = copy.copy(self)  # shares the loaded module and the figures
            found.version = version  # type: ignore[assignment]
            overrides = self.metadata.fixed.model_dump(exclude_none=True) if self.metadata.fixed else {}
            found.metadata = self.metadata.model_copy(update=overrides)
            self._versions[version] = found
        return found

    @property
    def tags(self) -> list[str]:
        """The tags of MLE-bench's known issues with this competition (`CompetitionTag`); [] for none."""
        return list(self.metadata.tags)

    @property
    def known_issues(self) -> list[KnownIssue]:
        return list(self.metadata.known_issues)

    @property
    def fixed_differs(self) -> bool:
        """Whether version "fixed" prepares or grades this competition differently from v1."""
        module = self.module
        return (self.metadata.fixed is not None or hasattr(module, "prepare_fixed")
                or hasattr(module, "generate_sample_fixed"))

    @property
    def data_version(self) -> TaskVersion:
        """The version its data is prepared as: "fixed" only where that differs from v1, so caches keyed by it
        keep v1 and fixed data of a repaired competition apart and store an unchanged one once."""
        return "fixed" if self.version == "fixed" and self.fixed_differs else "v1"

    @property
    def id(self) -> str:
        return self.metadata.id

    @property
    def alias(self) -> str:
        return self.metadata.alias

    @property
    def leaderboard(self) -> LeaderboardFigures:
        return self.figures.leaderboard

    @property
    def is_lower_better(self) -> bool:
        return self.figures.leaderboard.is_lower_better

    def description(self) -> str:
        return (self.folder / "description.md").read_text()

    @property
    def module(self) -> types.ModuleType:
        return _load_module(self.folder, self.id)

    # -- data ----------------------------------------------------------------------------
    def generate_sample(self, public: Path, private: Path, seed: int) -> None:
        """Sample data: the module's own `generate_sample` where it has one, else `prepare(make_raw(seed, **SAMPLE_RAW))`
        (in version "fixed": `generate_sample_fixed`, or the fixed `prepare`)."""
        own = getattr(self.module, "generate_sample", None)
        if self.version == "fixed":
            own = getattr(self.module, "generate_sample_fixed", own)
        if own is not None:
            own(public, private, seed)
            return
        with tempfile.TemporaryDirectory(prefix="mle-gym-raw-") as tmp:
            self.module.make_raw(Path(tmp), seed, **getattr(self.module, "SAMPLE_RAW", {}))
            self.prepare(Path(tmp), public, private)

    def prepare(self, raw: Path, public: Path, private: Path) -> None:
        """MLE-bench's split of the extracted download `raw` (version "fixed": `prepare_fixed` where there is one)."""
        fixed = getattr(self.module, "prepare_fixed", None) if self.version == "fixed" else None
        (fixed or self.module.prepare)(raw, public, private)

    # -- grading -------------------------------------------------------------------------
    def load_answers(self, private: Path) -> pd.DataFrame:
        from mle_gym.grading.answers import load_answers_csv

        path = private / self.metadata.answers_file
        if not path.is_file():
            raise GradingError(
                f"the answers of {self.id} are missing: expected {path}. "
                f"Prepare the data again (`mle-gym prepare {self.id}`)."
            )
        return load_answers_csv(path)  # from memory when this process read the unchanged file before

    def validate(self, submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
        custom = getattr(self.module, "validate", None)
        if custom is not None:
            return custom(submission, answers)
        from mle_gym.grading.validation import validate_standard

        meta = self.metadata
        return validate_standard(
            submission, answers, id_column=meta.id_column, target_columns=meta.target_columns,
            value_range=meta.value_range, numeric_targets=meta.numeric_targets,
            row_sum_tolerance=meta.row_sum_tolerance, extra_columns=meta.extra_columns,
            column_order=meta.column_order, rows_by_position=meta.rows_by_position,
            text_numbers=meta.text_numbers,
        )

    def score(self, aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
        custom = getattr(self.module, "score", None)
        if custom is not None:
            return float(custom(aligned, answers))
        from mle_gym.grading.metrics import get_metric

        metric = get_metric(self.metadata.metric)
        return metric(aligned, answers, self.metadata.id_column, self.metadata.target_columns)

    def grade(self, submission_path: Path | None, private: Path, *, sample_data: bool) -> GradeReport:
        """Grade a submission file (on the host) against the answers in `private`."""
        from mle_gym.grading.report import grade_submission

        return grade_submission(
            submission_path, self.load_answers(private), competition_id=self.id,
            figures=self.leaderboard, validate=self.validate, score=self.score, sample_data=sample_data,
        )


@functools.lru_cache(maxsize=None)
def _load_module(folder: Path, competition_id: str) -> types.ModuleType:
    """A competition's competition.py, loaded once per process (every task version shares it)."""
    path = folder / "competition.py"
    name = "mle_gym.competitions._" + competition_id.replace("-", "_")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# name: (required, positional parameters it must take)
PROTOCOL: dict[str, tuple[bool, tuple[str, ...]]] = {
    "prepare": (True, ("raw", "public", "private")),
    "make_raw": (True, ("raw", "seed")),
    "generate_sample": (False, ("public", "private", "seed")),
    "validate": (False, ("submission", "answers")),
    "score": (False, ("aligned", "answers")),
    "prepare_fixed": (False, ("raw", "public", "private")),
    "generate_sample_fixed": (False, ("public", "private", "seed")),
}


def protocol_problems(comp: Competition) -> list[str]:
    """What a competition module lacks or gets wrong against the protocol (empty when it keeps it)."""
    module, problems = comp.module, []
    for name, (required, params) in PROTOCOL.items():
        func = getattr(module, name, None)
        if func is None:
            if required:
                problems.append(f"{comp.id}/competition.py must define {name}({', '.join(params)}, ...)")
            continue
        if not callable(func):
            problems.append(f"{comp.id}/competition.py: {name} must be a function")
            continue
        try:
            signature = inspect.signature(func)
            signature.bind(*params)
        except (TypeError, ValueError):
            problems.append(f"{comp.id}/competition.py: {name} must accept ({', '.join(params)}) positionally")
    if getattr(module, "score", None) is None:
        from mle_gym.grading.metrics import get_metric

        try:
            get_metric(comp.metadata.metric)
        except KeyError:
            problems.append(f"{comp.id}: metric {comp.metadata.metric!r} is not registered in mle_gym.grading.metrics "
                            "and competition.py defines no score(aligned, answers)")
    fixable = sorted(set(comp.tags) & FIXABLE_TAGS)
    if fixable and not comp.fixed_differs:
        problems.append(f"{comp.id} is tagged {', '.join(fixable)} but version \"fixed\" changes nothing: define "
                        "prepare_fixed(raw, public, private) or the metadata's \"fixed\" grading")
    if hasattr(module, "generate_sample") and hasattr(module, "prepare_fixed") and not hasattr(
            module, "generate_sample_fixed"):
        problems.append(f"{comp.id}/competition.py has its own generate_sample and a prepare_fixed: its fixed sample "
                        "data needs generate_sample_fixed(public, private, seed)")
    fixed_files = getattr(module, "FIXED_FILES", {})
    if not isinstance(fixed_files, dict) or not all(
            isinstance(k, str) and k.startswith(("public/", "private/")) and (v is None or isinstance(v, str))
            for k, v in fixed_files.items()):
        problems.append(f"{comp.id}/competition.py: FIXED_FILES must map 'public/NAME' or 'private/NAME' to an MD5 "
                        "or None")
    sizes = getattr(module, "SAMPLE_RAW", {})
    if not isinstance(sizes, dict) or not all(isinstance(k, str) for k in sizes):
        problems.append(f"{comp.id}/competition.py: SAMPLE_RAW must be a dict of make_raw keyword arguments")
    elif callable(getattr(module, "make_raw", None)):
        try:
            inspect.signature(module.make_raw).bind(Path("raw"), 0, **sizes)
        except TypeError as exc:
            problems.append(f"{comp.id}/competition.py: make_raw does not take SAMPLE_RAW's sizes ({exc})")
    return problems


@functools.lru_cache(maxsize=1)
def _registry() -> dict[str, Competition]:
    found = {}
    for folder in sorted(HERE.iterdir()):
        if folder.is_dir() and (folder / "metadata.json").is_file():
            comp = Competition(folder)
            found[comp.id] = comp
    return found


def list_competitions() -> list[Competition]:
    """Every competition with a folder (ready to run), sorted by id."""
    return list(_registry().values())


def find_competition(name: str) -> Competition | None:
    """A competition by Kaggle id or alias (an `mle/` prefix is allowed), or None; in version v1
    (`.for_version("fixed")` gives the other)."""
    key = name.removeprefix("mle/")
    registry = _registry()
    if key in registry:
        return registry[key]
    for comp in registry.values():
        if comp.alias == key:
            return comp
    return None


def get_competition(name: str) -> Competition:
    """Like find_competition, but raises CompetitionNotFoundError with the nearest names."""
    comp = find_competition(name)
    if comp is not None:
        return comp
    names = [n for c in _registry().values() for n in (c.id, c.alias)]
    close = difflib.get_close_matches(name.removeprefix("mle/"), names, n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    if name.removeprefix("mle/") in _all_figures():
        hint = "; it is an MLE-bench competition that mle-gym does not package yet"
    raise CompetitionNotFoundError(
        f"no competition {name!r}{hint} (`mle-gym list` shows the {len(registry_ids())} available)"
    )


def registry_ids() -> list[str]:
    return sorted(_registry())
