"""Typed harness errors: each names the subject, what was expected, what was seen, and the remedy."""

from __future__ import annotations


class MLEGymError(Exception):
    """Base class of every error mle-gym raises on purpose."""


class SandboxError(MLEGymError, RuntimeError):
    """The sandbox (container or local workspace) failed: a harness fault, never the agent's."""


class SandboxStartError(SandboxError):
    """The sandbox could not be started."""


class DockerUnavailableError(SandboxStartError, ConnectionError):
    """No Docker daemon could be reached."""


class ImageNotFoundError(SandboxStartError, LookupError):
    """The sandbox image is not present in the local Docker engine."""

    def __str__(self) -> str:  # LookupError would quote the message
        return str(self.args[0]) if self.args else ""


class GPUUnavailableError(SandboxStartError):
    """GPUs were asked for but the daemon cannot provide them."""


class ContainerDiedError(SandboxError):
    """The container stopped or vanished while an episode was using it."""


class ShellDiedError(SandboxError):
    """The persistent shell inside the sandbox exited or stopped answering."""


class SandboxTimeoutError(SandboxError, TimeoutError):
    """A harness operation (not an agent command) took longer than allowed."""


class SandboxPathError(MLEGymError, ValueError):
    """A path given to a file operation lies outside the sandbox's folders."""


class CompetitionNotFoundError(MLEGymError, KeyError):
    """No competition has that id or alias."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class DatasetNotPreparedError(MLEGymError, FileNotFoundError):
    """The dataset asked for has not been prepared on this machine."""


class PrepareError(MLEGymError, RuntimeError):
    """Preparing a competition's data failed."""


class KaggleCredentialsError(PrepareError):
    """Kaggle credentials are missing or rejected, or the competition's rules were not accepted."""


class KaggleClientUnavailableError(PrepareError, ImportError):
    """The `kaggle` package is not installed, or importing it failed."""


class KaggleDownloadError(PrepareError, ConnectionError):
    """Kaggle could not be reached, or a download stopped before its end."""


class HoldoutUnsupportedError(PrepareError, ValueError):
    """holdout="train" was asked of a competition whose split cannot be re-run on its public data."""


class InsufficientDiskSpaceError(PrepareError):
    """The data root's disk has too little free space for a download, its extraction or its split."""


class ChecksumMismatchError(PrepareError):
    """A downloaded or prepared file does not hash to the figure the project carries."""


class MLEBenchTextNotFetchedError(MLEGymError, FileNotFoundError):
    """MLE-bench's task text for a competition has not been fetched on this machine."""


class GradingError(MLEGymError, RuntimeError):
    """The grader itself failed (missing answers, a bug): never scored as the agent's failure."""


class InvalidSubmissionError(MLEGymError, ValueError):
    """A submission does not have the format the competition requires (the agent's fault)."""


class EpisodeEndedError(MLEGymError, RuntimeError):
    """step() was called after the episode ended, or before reset()."""


class TrajectoryError(MLEGymError, ValueError):
    """A trajectory file could not be read or does not match the schema."""


class ResetOptionError(MLEGymError, ValueError):
    """reset() was given an option it does not know, or a bad value for one it knows."""


class EnvOptionError(MLEGymError, ValueError):
    """`gym.make` got an option it does not know, or a value the option cannot take."""
