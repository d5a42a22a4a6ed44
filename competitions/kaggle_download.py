"""Downloading a competition's files with the Kaggle client: credentials, disk space, resume, errors users can act on.

The client is `kaggle` 2.2 (the `kaggle` extra). Its `KaggleApi` finds the credentials (an API
token, a legacy `kaggle.json` key, or `kaggle auth login`) and streams a download to disk with
a progress bar, resuming a partial file (HTTP Range, checked against the server's ETag) and
retrying on network errors. The request itself goes through the client's SDK, `KaggleClient`,
built here rather than by `KaggleApi.build_kaggle_client`, because the latter pins the
production endpoint while the SDK honours `KAGGLE_API_ENVIRONMENT` (`TEST` is
http://localhost:7777, where the tests' stand-in of Kaggle's API listens).

Layout of a download under `<data root>/<competition-id>/download/`: `<id>.zip` (while partial,
next to the client's `<id>.zip.kaggle-partial` marker) and `<id>.zip.done` once complete, which
records its size and MD5.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from mle_gym.competitions import Competition
from mle_gym.competitions.checksums import md5_file
from mle_gym.errors import (
    InsufficientDiskSpaceError,
    KaggleClientUnavailableError,
    KaggleCredentialsError,
    KaggleDownloadError,
)

log = logging.getLogger(__name__)

TOKEN_URL = "https://www.kaggle.com/settings/api"
INSTALL_HINT = "pip install 'mle-gym[kaggle]'"
Report = Callable[[str], None]


class DownloadedArchive(BaseModel):
    """A complete download: Kaggle's zip of the competition's files."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: Path
    bytes: int
    md5: str


def rules_url(comp: Competition) -> str:
    return comp.metadata.rules_url or f"https://www.kaggle.com/c/{comp.id}/rules"


# -- credentials ----------------------------------------------------------------------------
def _kaggle_json_candidates() -> list[Path]:
    """Where the client looks for a legacy `kaggle.json`, in its order."""
    if os.environ.get("KAGGLE_CONFIG_DIR"):
        return [Path(os.environ["KAGGLE_CONFIG_DIR"]) / "kaggle.json"]
    home = Path.home()
    xdg = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    return [home / ".kaggle" / "kaggle.json", xdg / "kaggle" / "kaggle.json"]


def credential_sources() -> list[str]:
    """Where Kaggle credentials are present on this machine, in the order the client tries them."""
    home = Path.home()
    found = []
    if os.environ.get("KAGGLE_API_TOKEN"):
        found.append("KAGGLE_API_TOKEN")
    found += [str(p) for p in (home / ".kaggle" / "access_token", home / ".kaggle" / "access_token.txt") if p.is_file()]
    if os.environ.get("KAGGLE_USERNAME") and os.environ.get("KAGGLE_KEY"):
        found.append("KAGGLE_USERNAME/KAGGLE_KEY")
    found += [str(p) for p in _kaggle_json_candidates() if p.is_file()]
    if (home / ".kaggle" / "credentials.json").is_file():
        found.append(str(home / ".kaggle" / "credentials.json"))
    return found


def where_credentials_go() -> str:
    legacy = _kaggle_json_candidates()[0]
    return (
        f"Create an API token at {TOKEN_URL} and save it in ~/.kaggle/access_token (or export "
        f"KAGGLE_API_TOKEN=<token>); a legacy API key goes in {legacy} as "
        '{"username": ..., "key": ...} or in KAGGLE_USERNAME and KAGGLE_KEY.'
    )


# -- the client -----------------------------------------------------------------------------
class _Client:
    """The pieces of the kaggle package that a download uses, imported on first use."""

    def __init__(self) -> None:
        printed = io.StringIO()
        try:
            # Importing `kaggle` authenticates at once and prints its help when that fails; the
            # text is relayed to the log, and our own messages say what to do.
            with contextlib.redirect_stdout(printed):
                from kaggle.api.kaggle_api_extended import KaggleApi
                from kagglesdk import KaggleClient
                from kagglesdk.competitions.types.competition_api_service import ApiDownloadDataFilesRequest
                from kagglesdk.kaggle_env import get_endpoint, get_env
                from requests import RequestException
                from urllib3.exceptions import HTTPError as Urllib3Error
        except ModuleNotFoundError as exc:
            if exc.name in ("kaggle", "kagglesdk"):
                raise KaggleClientUnavailableError(
                    f"the `kaggle` package is not installed (no module named {exc.name!r}); run `{INSTALL_HINT}`"
                ) from exc
            raise self._import_failed(exc) from exc
        except Exception as exc:  # a third-party import can fail in any way; the cause is shown, not hidden
            raise self._import_failed(exc) from exc
        finally:
            _relay(printed.getvalue())
        self.KaggleApi = KaggleApi
        self.KaggleClient = KaggleClient
        self.DownloadRequest = ApiDownloadDataFilesRequest
        self.endpoint = get_endpoint(get_env())
        self.network_errors: tuple[type[BaseException], ...] = (RequestException, Urllib3Error)

    @staticmethod
    def _import_failed(exc: BaseException) -> KaggleClientUnavailableError:
        return KaggleClientUnavailableError(
            f"the `kaggle` package is installed but importing it failed: {type(exc).__name__}: {exc}. "
            f"`{INSTALL_HINT}` installs a client that imports (kaggle 2.2 and the `six` it uses without declaring it)"
        )


def _relay(printed: str) -> None:
    """The client's prints, as log records: its warnings as warnings, its help text (we say what to do) as info."""
    for line in filter(None, (raw.strip() for raw in printed.splitlines())):
        (log.warning if line.lower().startswith("warning") else log.info)("kaggle: %s", line)


def _require_credentials() -> list[str]:
    sources = credential_sources()
    if not sources:
        raise KaggleCredentialsError(
            "no Kaggle credentials: expected KAGGLE_API_TOKEN or ~/.kaggle/access_token (an API token), "
            f"{' or '.join(map(str, _kaggle_json_candidates()))} or KAGGLE_USERNAME and KAGGLE_KEY in the "
            f"environment (a legacy key), or `kaggle auth login`. {where_credentials_go()}"
        )
    return sources


def _authenticate(client: _Client, sources: list[str]) -> Any:
    api = client.KaggleApi()
    printed = io.StringIO()
    try:
        # The client prints its help text and calls exit() when no credential works; it also
        # warns on stdout about a kaggle.json readable by others. Both are relayed as messages.
        with contextlib.redirect_stdout(printed):
            api.authenticate()
    except SystemExit:
        raise KaggleCredentialsError(
            f"Kaggle credentials were found ({', '.join(sources)}) but the client could use none of them (it skips "
            f"an API token Kaggle does not recognise). {where_credentials_go()}"
        ) from None
    except client.network_errors as exc:
        raise KaggleDownloadError(f"could not reach Kaggle to check the API token ({exc}); check the network") from exc
    finally:
        _relay(printed.getvalue())
    return api


def _source(api: Any) -> str:
    method = api.config_values.get("auth_method")
    if method == "ACCESS_TOKEN":
        return "an API token (KAGGLE_API_TOKEN or ~/.kaggle/access_token)"
    if method == "OAUTH":
        return "`kaggle auth login` (~/.kaggle/credentials.json)"
    if os.environ.get("KAGGLE_USERNAME") and os.environ.get("KAGGLE_KEY"):
        return f"the legacy key of user {api.config_values.get('username')!r} in KAGGLE_USERNAME/KAGGLE_KEY"
    return f"the legacy key of user {api.config_values.get('username')!r} in {api.config}"


def _refused(comp: Competition, exc: BaseException, api: Any, endpoint: str) -> Exception:
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    if status == 401:
        return KaggleCredentialsError(
            f"Kaggle rejected the credentials (401 Unauthorized: {exc}); they came from {_source(api)}. "
            f"{where_credentials_go()}"
        )
    if status == 403:
        return KaggleCredentialsError(
            f"Kaggle refused the download of {comp.id} (403 Forbidden: {exc}): the account of {_source(api)} has "
            f"not accepted the competition's rules. Accept them at {rules_url(comp)}, then run the command again"
        )
    if status == 404:
        return KaggleDownloadError(f"Kaggle has no competition {comp.id!r} to download (404 Not Found at {endpoint})")
    if status is not None:
        return KaggleDownloadError(f"Kaggle answered {status} to the download of {comp.id}: {exc}")
    return KaggleDownloadError(f"could not reach Kaggle at {endpoint} to download {comp.id}: {exc}")


# -- disk space -----------------------------------------------------------------------------
def _gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e7 else f"{n / 1e6:.2f} MB"


def check_free_space(folder: Path, need_bytes: int, what: str) -> None:
    """Fail before starting `what` when `folder`'s disk has less than `need_bytes` free."""
    folder.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(folder).free
    if free < need_bytes:
        raise InsufficientDiskSpaceError(
            f"{what} needs about {_gb(need_bytes)} free under {folder}, but that disk has {_gb(free)} free. "
            "Free some space, or put the data on a larger disk with --data-root DIR (or MLE_GYM_DATA=DIR)."
        )


# -- download -------------------------------------------------------------------------------
def _partial_marker(archive: Path) -> Path:
    return archive.with_name(archive.name + ".kaggle-partial")  # the client's own resume marker


def find_download(comp: Competition, folder: Path) -> DownloadedArchive | None:
    archive, done = folder / f"{comp.id}.zip", folder / f"{comp.id}.zip.done"
    if not (archive.is_file() and done.is_file()):
        return None
    found = DownloadedArchive.model_validate({**json.loads(done.read_text()), "path": archive})
    return found if archive.stat().st_size == found.bytes else None


def download_competition(
    comp: Competition, folder: Path, *, retries: int = 5, quiet: bool = False, report: Report | None = None,
) -> DownloadedArchive:
    """Kaggle's zip of `comp`'s files in `folder`, downloaded (or resumed) unless already complete."""
    found = find_download(comp, folder)
    if found is not None:
        return found
    sources = _require_credentials()  # before the import, which prints the client's help when there are none
    client = _Client()
    api = _authenticate(client, sources)
    folder.mkdir(parents=True, exist_ok=True)
    archive = folder / f"{comp.id}.zip"
    request = client.DownloadRequest()
    request.competition_name = comp.id
    with client.KaggleClient(
        username=api.config_values.get(api.CONFIG_NAME_USER), password=api.config_values.get(api.CONFIG_NAME_KEY),
        api_token=api.config_values.get(api.CONFIG_NAME_TOKEN), response_processor=api.get_response_processor(),
    ) as sdk:  # env left unset: the SDK reads KAGGLE_API_ENVIRONMENT
        try:
            response = sdk.competitions.competition_api_client.download_data_files(request)
        except client.network_errors as exc:
            raise _refused(comp, exc, api, client.endpoint) from exc
        size = 0
        try:
            length = response.headers.get("Content-Length")
            size = int(length) if length else int((comp.figures.dataset_size_gb or 0) * 1e9)
            have = archive.stat().st_size if archive.is_file() and _partial_marker(archive).is_file() else 0
            # The zip, then its extraction and the split beside it: each about the zip's size or more
            # (the extraction is checked again, exactly, once the zip's directory can be read).
            check_free_space(folder, max(size - have, 0) + 2 * size, f"downloading {comp.id} ({_gb(size)})")
            if report is not None:
                report(f"{comp.id}: downloading {_gb(size)} from {client.endpoint}"
                       + (f", resuming after {_gb(have)}" if have else "") + f" into {archive}")
            api.download_file(response, str(archive), sdk.http_client(), quiet=quiet, resume=True,
                              max_retries=retries)
        except (*client.network_errors, OSError, ValueError) as exc:
            # ValueError: the client's own check that the file has the announced size.
            got = archive.stat().st_size if archive.is_file() else 0
            raise KaggleDownloadError(
                f"the download of {comp.id} stopped after {got:,} of {size:,} bytes "
                f"({type(exc).__name__}: {exc}); the partial file {archive} is kept: run the same command "
                "again to resume it"
            ) from exc
        finally:
            response.close()
    if report is not None:
        report(f"{comp.id}: computing the MD5 of {archive.name}")
    done = DownloadedArchive(path=archive, bytes=archive.stat().st_size, md5=md5_file(archive))
    (folder / f"{comp.id}.zip.done").write_text(done.model_dump_json(exclude={"path"}) + "\n")
    return done
