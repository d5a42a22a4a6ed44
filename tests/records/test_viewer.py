"""`mle-gym view`: the page built from a real run (local sandbox, recorder), checked as text and in headless Chromium.

The browser tests drive Debian's `chromium` through Selenium and Debian's `chromium-driver`
(`apt-get install chromium chromium-driver`, `pip install selenium`); without them they skip
and say why. With MLE_GYM_REQUIRE_BROWSER=1 (CI sets it) those skips become failures.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import mle_gym  # noqa: F401  (registers the envs)
from mle_gym.runs.rates import EpisodeRecord, identity_key
from mle_gym.records.trajectory import TrajectoryRecorder
from mle_gym.cli.view import register
from mle_gym.records.viewer import (
    ViewerInputError,
    collect_episodes,
    esc,
    make_server,
    render_page,
    write_page,
)

PAYLOAD = "<script>window.__pwned=1</script>"
IMG_PAYLOAD = '<img src=x onerror="window.__pwned=2">'
NEEDLE = "needle-cmd-7731"
CHROMIUM = os.environ.get("MLE_GYM_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("MLE_GYM_CHROMEDRIVER", "/usr/bin/chromedriver")


# -- a real run folder, made with the env, the local sandbox and the recorder -----------------------
def _play(run: Path, competition: str, seed: int, script: list[Any], *, agent: str = "test-agent",
          model_call: dict[str, Any] | None = None, status: str = "finished", error: str | None = None) -> None:
    env_options = {"data": "sample", "sandbox": "local"}
    base = EpisodeRecord(competition="?", seed=seed, agent=agent, data="sample", sandbox="local")
    env = TrajectoryRecorder(gym.make(f"mle/{competition}", **env_options), run / "trajectories", run_metadata={
        "agent": agent, "seed": seed, "agent_options": {}, "env_options": env_options,
        "config_id": identity_key(base.identity())})
    try:
        _, info = env.reset(seed=seed)
        paths = {"data": info["paths"]["data"], "sub": info["submission_path"]}
        grade = None
        steps = 0
        for i, action in enumerate(script):
            if model_call is not None and i == 0:
                env.record_model_call(model_call)
                env.annotate_next_step({"usage": {"prompt_tokens": 1200, "completion_tokens": 80}, "cost_usd": 0.0021})
            if isinstance(action, dict):
                action = {"name": action["name"], "arguments": {k: (v.format(**paths) if isinstance(v, str) else v)
                                                                for k, v in action["arguments"].items()}}
            _, _, terminated, truncated, info = env.step(action)
            steps += 1
            if terminated or truncated:
                grade = info.get("grade")
                break
        path = env.trajectory_path
    finally:
        env.close()
    row = base.model_copy(update=dict(competition=env.unwrapped.config.competition, grade=grade, steps=steps,
                                      duration_s=1.0, trajectory=str(path), status=status, error=error))
    with (run / "results.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(row.model_dump_json() + "\n")


def _submit_sample() -> list[dict[str, Any]]:
    return [{"name": "bash", "arguments": {"command": "cp {data}/sample_submission.csv {sub}"}},
            {"name": "submit", "arguments": {"path": "{sub}"}}]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory, data_root: Path) -> Path:
    run = tmp_path_factory.mktemp("viewrun")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLE_GYM_DATA", str(data_root))
        _play(run, "spooky", 0, [
            {"name": "bash", "arguments": {"command": f"echo '{PAYLOAD}'"}},
            {"name": "bash", "arguments": {"command": f"echo {NEEDLE} && ls {{data}}"}},
            *_submit_sample(),
        ], model_call={"api": "openai-chat", "model": "fake-model", "system": "You are a test.",
                       "messages": [{"role": "user", "content": "go"}],
                       "response": {"text": f"I will print {PAYLOAD}",
                                    "reasoning": 'thinking <img src=y onerror="window.__pwned=4">'},
                       "usage": {"prompt_tokens": 1200, "completion_tokens": 80}, "cost_usd": 0.0021})
        _play(run, "spooky", 1, [
            {"name": "bash", "arguments": {"command": "exit 3"}},
            {"name": "write_file", "arguments": {"path": "{data}/../code/x.html", "content": IMG_PAYLOAD}},
            *_submit_sample(),
        ])
        _play(run, "insults", 0, [
            "this is not a tool call </pre><script>window.__pwned=3</script>",
            {"name": "bash", "arguments": {"command": "echo " + "wrap" * 400}},  # one long line, no spaces
        ], status="crashed", error=f"RuntimeError: the agent fell over {PAYLOAD}")
    return run


@pytest.fixture(scope="module")
def page(run_dir: Path) -> Path:
    return write_page([run_dir])


RIVAL = "rival<b onmouseover=window.__pwned=5>x</b>"  # an agent name is text from a file too


@pytest.fixture(scope="module")
def rival_dir(tmp_path_factory: pytest.TempPathFactory, data_root: Path) -> Path:
    """A second agent on the same competitions: spooky twice (a valid sample submission, then a bad file), insults once."""
    run = tmp_path_factory.mktemp("rivalrun")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLE_GYM_DATA", str(data_root))
        _play(run, "spooky", 0, [{"name": "list_dir", "arguments": {"path": "{data}"}},
                                 {"name": "nope", "arguments": {}}, *_submit_sample()], agent=RIVAL)
        _play(run, "spooky", 1, [{"name": "write_file", "arguments": {"path": "{sub}", "content": "id,EAP\n1,2\n"}},
                                 {"name": "submit", "arguments": {"path": "{sub}"}}], agent=RIVAL)
        _play(run, "insults", 0, [*_submit_sample()], agent=RIVAL)
    return run


@pytest.fixture(scope="module")
def compare_page(run_dir: Path, rival_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_page([run_dir, rival_dir], tmp_path_factory.mktemp("compare") / "compare.html")


# -- the page as text (always run) --------------------------------------------------------------------
def test_page_lists_every_episode_of_the_run(run_dir: Path, page: Path) -> None:
    assert page == run_dir / "view.html"
    episodes = collect_episodes([run_dir])
    assert sorted((e.record.competition, e.record.seed) for e in episodes) == [
        ("detecting-insults-in-social-commentary", 0), ("spooky-author-identification", 0),
        ("spooky-author-identification", 1)]
    assert all(e.trajectory is not None for e in episodes)
    text = page.read_text(encoding="utf-8")
    assert text.count('<details class="episode"') == 3
    assert "sample data: not comparable to MLE-bench" in text
    assert "1,280 tokens" in text and "$0.0021" in text  # usage and cost of the model call reach the page


def test_trajectory_text_is_escaped(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    # Only the page's own script block: none from a step, an argument, the model's text or an error.
    assert text.count("<script") == 1 and "window.__pwned" not in text.split("<script>")[-1]
    assert "<img src=x" not in text
    assert esc(PAYLOAD) in text and esc(IMG_PAYLOAD) in text and "<img src=y" not in text
    assert "&lt;/pre&gt;&lt;script&gt;window.__pwned=3" in text


def test_page_is_self_contained(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert not re.search(r"""(?:src|href|action)\s*=\s*["']?\s*(?:https?:)?//""", text, re.I)
    assert "@import" not in text and "url(" not in text
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', text)
    assert csp is not None and "default-src 'none'" in csp.group(1)


def test_long_texts_are_clipped_unless_asked(run_dir: Path, tmp_path: Path) -> None:
    long_word = "wrap" * 400
    clipped = write_page([run_dir], tmp_path / "clipped.html", max_chars=200).read_text(encoding="utf-8")
    assert long_word not in clipped and "characters not shown; `mle-gym view --max-chars 0` shows all" in clipped
    whole = write_page([run_dir], tmp_path / "whole.html", max_chars=0).read_text(encoding="utf-8")
    assert long_word in whole


def test_a_crashed_episode_says_why(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert '<span class="badge bad">crashed</span>' in text
    assert "crashed: RuntimeError: the agent fell over " + esc(PAYLOAD) in text
    assert "invalid action (" in text  # the step whose action did not parse


def test_esc_makes_any_text_writable() -> None:
    assert esc("\ud800a\x1b[31m<b>") == "\\ud800a\\x1b[31m&lt;b&gt;"
    assert esc('"\'&') == "&quot;&#x27;&amp;"


def test_a_single_trajectory_file_and_a_bare_folder(run_dir: Path, tmp_path: Path) -> None:
    traj = sorted((run_dir / "trajectories").glob("spooky*.jsonl"))[0]
    out = write_page([traj], tmp_path / "one.html")
    assert out.read_text(encoding="utf-8").count('<details class="episode"') == 1
    bare = tmp_path / "bare"
    shutil.copytree(run_dir / "trajectories", bare)  # no results.jsonl: rows are made from the trajectories
    text = render_page(collect_episodes([bare]))
    assert text.count('<details class="episode"') == 3 and "test-agent" in text


def test_a_moved_run_folder_still_finds_its_transcripts(run_dir: Path, tmp_path: Path) -> None:
    moved = tmp_path / "moved"
    shutil.copytree(run_dir, moved)
    rows = [EpisodeRecord.model_validate_json(line) for line in (moved / "results.jsonl").read_text().splitlines()]
    gone = "/no/longer/here/trajectories/"  # the rows name where the files were when the run wrote them
    (moved / "results.jsonl").write_text("".join(
        r.model_copy(update={"trajectory": gone + Path(r.trajectory or "").name}).model_dump_json() + "\n"
        for r in rows))
    episodes = collect_episodes([moved])
    assert len(episodes) == 3 and all(e.trajectory is not None for e in episodes)
    assert all(e.path is not None and moved in e.path.parents for e in episodes)


def test_two_run_identities_get_two_tables(run_dir: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    shutil.copytree(run_dir, other)
    rows = [EpisodeRecord.model_validate_json(line) for line in (other / "results.jsonl").read_text().splitlines()]
    (other / "results.jsonl").write_text("".join(r.model_copy(update={"agent": "other-agent"}).model_dump_json() + "\n"
                                                 for r in rows))
    text = render_page(collect_episodes([run_dir, other]))
    assert text.count('<section class="run">') == 2 and text.count('<details class="episode"') == 6
    assert "run 1: other-agent · config " in text and "run 2: test-agent · config " in text


def test_a_path_with_no_run_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ViewerInputError, match="holds no results.jsonl and no trajectory"):
        collect_episodes([tmp_path])
    with pytest.raises(ViewerInputError, match="no such file or folder"):
        collect_episodes([tmp_path / "missing"])


def test_the_command_registers_and_serves_only_the_page(page: Path) -> None:
    import argparse

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["view", str(page.parent), "--serve", "--port", "0"])
    assert args.serve and args.port == 0 and args.paths == [str(page.parent)]
    server = make_server(page, port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        assert host == "127.0.0.1"
        with urllib.request.urlopen(f"http://{host}:{port}/") as resp:
            assert resp.read() == page.read_bytes()
        with pytest.raises(urllib.error.HTTPError, match="404"):
            urllib.request.urlopen(f"http://{host}:{port}/results.jsonl")
    finally:
        server.shutdown()
        server.server_close()


# -- in a real browser --------------------------------------------------------------------------------
def _browser_problem() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install selenium)"
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not Path(path).is_file():
            return f"{path} is missing (apt-get install {package})"
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    problem = _browser_problem()
    if problem is not None:
        if os.environ.get("MLE_GYM_REQUIRE_BROWSER") == "1":
            pytest.fail(f"MLE_GYM_REQUIRE_BROWSER=1 but the browser tests cannot run: {problem}", pytrace=False)
        pytest.skip(f"no headless browser: {problem}")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    try:
        yield driver
    finally:
        driver.quit()


def _open(browser: Any, page: Path, width: int = 1200, height: int = 900) -> None:
    browser.set_window_size(width, height)
    browser.get(page.as_uri())
    browser.get_log("browser")  # start each test with an empty log


def _severe(browser: Any) -> list[dict[str, Any]]:
    return [e for e in browser.get_log("browser") if e.get("level") == "SEVERE"]


def test_browser_loads_the_run_without_errors(browser: Any, page: Path) -> None:
    browser.set_window_size(1200, 900)
    browser.get("about:blank")
    browser.get_log("browser")
    browser.get(page.as_uri())
    from selenium.webdriver.common.by import By

    assert _severe(browser) == []
    tables = browser.find_element(By.CSS_SELECTOR, "table.comps").text
    assert "spooky-author-identification" in tables and "detecting-insults-in-social-commentary" in tables
    # The table's competition links to its first episode, which opens.
    browser.find_element(By.LINK_TEXT, "detecting-insults-in-social-commentary").click()
    opened = [e for e in browser.find_elements(By.CSS_SELECTOR, "details.episode") if e.get_attribute("open")]
    assert len(opened) == 1 and "detecting-insults-in-social-commentary" in opened[0].text
    # two shared score strips, percentile against steps and against time, a timeline per transcript
    assert len(browser.find_elements(By.CSS_SELECTOR, "svg.plot")) == 2 + 2 + 3
    assert browser.execute_script("return window.__pwned") is None


def test_browser_opens_a_transcript_on_click(browser: Any, page: Path) -> None:
    from selenium.webdriver.common.by import By

    _open(browser, page)
    episode = browser.find_elements(By.CSS_SELECTOR, "details.episode")[0]
    step = episode.find_elements(By.CSS_SELECTOR, ".step")[0]
    assert not step.is_displayed()
    episode.find_element(By.TAG_NAME, "summary").click()
    assert episode.get_attribute("open") is not None and step.is_displayed()
    assert "window.__pwned=1" in episode.text  # the hostile output is shown as text...
    assert browser.execute_script("return window.__pwned") is None  # ...and never runs
    assert _severe(browser) == []


def test_browser_search_finds_a_command(browser: Any, page: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    _open(browser, page)
    box = browser.find_element(By.ID, "q")
    box.send_keys(NEEDLE, Keys.ENTER)
    shown = [s for s in browser.find_elements(By.CSS_SELECTOR, ".step") if s.is_displayed()]
    assert len(shown) == 1 and NEEDLE in shown[0].text
    marks = browser.find_elements(By.CSS_SELECTOR, "mark")
    assert marks and {m.text for m in marks} == {NEEDLE}
    assert browser.find_element(By.ID, "count").text == "1 step in 1 episode"
    visible = [e for e in browser.find_elements(By.CSS_SELECTOR, "details.episode") if e.is_displayed()]
    assert len(visible) == 1
    box.clear()
    box.send_keys("__pwned=2", Keys.ENTER)  # inside a write_file's collapsed content: the search opens it
    shown = [s for s in browser.find_elements(By.CSS_SELECTOR, ".step") if s.is_displayed()]
    assert len(shown) == 1 and "write_file" in shown[0].text
    assert shown[0].find_element(By.CSS_SELECTOR, "details").get_attribute("open") is not None
    assert browser.find_element(By.CSS_SELECTOR, "mark").is_displayed()
    box.clear()
    box.send_keys(Keys.ENTER)
    assert browser.find_elements(By.CSS_SELECTOR, "mark") == []
    assert len([e for e in browser.find_elements(By.CSS_SELECTOR, "details.episode") if e.is_displayed()]) == 3
    assert _severe(browser) == []


def test_browser_page_fits_a_phone(browser: Any, page: Path) -> None:
    from selenium.webdriver.common.by import By

    _open(browser, page, 390, 844)
    browser.find_element(By.ID, "expand").click()
    for details in browser.find_elements(By.CSS_SELECTOR, "details"):
        browser.execute_script("arguments[0].open = true", details)
    # Long lines (a 1,600-character word included) wrap; wide tables scroll inside their own box.
    width, client = browser.execute_script(
        "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert width <= client
    assert browser.execute_script("return window.__pwned") is None
    assert _severe(browser) == []


# -- comparing runs -----------------------------------------------------------------------------------
def _compare_table(text: str) -> str:
    return text.split('<table class="compare">', 1)[1].split("</table>", 1)[0]


def test_the_comparison_has_a_row_per_run_and_a_column_per_split_and_competition(compare_page: Path) -> None:
    text = compare_page.read_text(encoding="utf-8")
    table = _compare_table(text)
    head, body = table.split("</thead>")
    assert body.count("<tr") == 2  # one row per run identity
    for column in ("Low (Lite)", "All", "detecting-insults-in-social-commentary", "spooky-author-identification"):
        assert column in head
    # A split the runs covered in part shows MLE-bench's padded figure and says so, never a bare rate.
    assert body.count("padded · incomplete: 2 of 22 · over what ran") == 2
    # The first run is the baseline; the other's cells show their differences to it.
    assert body.count('<span class="badge ok">baseline</span>') == 1
    baseline_row, other_row = body.split("</tr>")[:2]
    assert "Δ" not in baseline_row and other_row.count('class="delta') == 2 + 2  # two splits, two competitions
    assert '<span class="delta">Δ 0 pp</span>' in other_row  # neither earned a medal: no difference, said so
    from mle_gym.records.viewer.compare import _delta

    assert _delta(0.5, 0.25, unit=" pp", scale=100) == '<span class="delta up">Δ +25 pp better</span>'
    assert _delta(0.3, 0.25, unit="", lower_better=True) == '<span class="delta down">Δ +0.05 worse</span>'
    assert _delta(None, 0.25, unit="") == '<span class="delta">Δ -</span>'
    # One strip per competition, shared by both runs: dots of both colours on one axis.
    assert text.count('<figure class="strip">') == 2
    spooky = text.split("<figcaption>spooky-author-identification</figcaption>", 1)[1].split("</svg>", 1)[0]
    assert {"#0072B2", "#E69F00"} <= set(re.findall(r'<circle [^>]*fill="(#[0-9A-Fa-f]{6})"', spooky))
    assert spooky.count('class="lane"') == 2
    # Per episode: percentile against steps and time, tool errors by type, and a row per episode.
    assert 'aria-label="leaderboard percentile of each episode against its steps"' in text
    assert 'aria-label="leaderboard percentile of each episode against its wall time"' in text
    errors = text.split('<table class="errors">', 1)[1].split("</table>", 1)[0]
    assert "unknown_tool" in errors or "invalid_action" in errors
    episodes = text.split('<table class="episodes">', 1)[1].split("</table>", 1)[0]
    assert episodes.count("<tr>") == 6 + 1 and "1,200 in / 80 out" in episodes and "$0.0021" in episodes
    assert text.count('<figure class="timeline">') == 6


def test_the_baseline_is_chosen_by_config_id_or_label(run_dir: Path, rival_dir: Path, tmp_path: Path) -> None:
    from mle_gym.records.viewer.page import run_views

    views = run_views(collect_episodes([run_dir, rival_dir]))
    rival = next(v for v in views if v.label.startswith("rival"))
    config = rival.label.rsplit("config ", 1)[1]
    text = write_page([run_dir, rival_dir], tmp_path / "p.html", baseline=config).read_text(encoding="utf-8")
    rows = _compare_table(text).split("</thead>")[1].split("</tr>")
    (base_row,) = [row for row in rows if "badge ok" in row]
    assert esc(rival.label) in base_row and "Δ" not in base_row
    assert write_page([run_dir, rival_dir], tmp_path / "q.html", baseline="test-agent").is_file()
    with pytest.raises(ViewerInputError, match="names none of the runs on the page"):
        write_page([run_dir, rival_dir], tmp_path / "r.html", baseline="nobody")
    with pytest.raises(ViewerInputError, match="names 2 runs"):
        write_page([run_dir, rival_dir], tmp_path / "r.html", baseline="config")


def test_the_comparison_escapes_what_came_from_the_runs(compare_page: Path) -> None:
    text = compare_page.read_text(encoding="utf-8")
    assert "<b onmouseover" not in text and esc(RIVAL) in text
    assert text.count("<script") == 1
    assert 'style="' not in text  # colours are classes: the CSP allows no style attribute


def _compare_in_browser(browser: Any, compare_page: Path, width: int, height: int) -> None:
    from selenium.webdriver.common.by import By

    _open(browser, compare_page, width, height)
    table = browser.find_element(By.CSS_SELECTOR, "table.compare")
    assert len(table.find_elements(By.CSS_SELECTOR, "tbody tr")) == 2
    swatches = browser.find_elements(By.CSS_SELECTOR, "table.compare .swatch")
    colours = {s.value_of_css_property("background-color") for s in swatches}
    assert colours == {"rgba(0, 114, 178, 1)", "rgba(230, 159, 0, 1)"}  # the palette's classes reach the page
    page_width, client = browser.execute_script(
        "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert page_width <= client  # the wide table scrolls in its own box
    strip = browser.find_elements(By.CSS_SELECTOR, "figure.strip svg")[0]
    assert strip.size["width"] <= client
    assert browser.execute_script("return window.__pwned") is None
    assert _severe(browser) == []


def test_browser_shows_the_comparison_on_a_desktop(browser: Any, compare_page: Path) -> None:
    _compare_in_browser(browser, compare_page, 1280, 900)


def test_browser_shows_the_comparison_on_a_phone(browser: Any, compare_page: Path) -> None:
    from selenium.webdriver.common.by import By

    _compare_in_browser(browser, compare_page, 390, 844)
    # The run column stays in view while the table scrolls sideways.
    wrap = browser.find_element(By.CSS_SELECTOR, "section.comparison .tablewrap")
    browser.execute_script("arguments[0].scrollLeft = 400", wrap)
    cell = browser.find_element(By.CSS_SELECTOR, "table.compare tbody th.runcol")
    assert cell.value_of_css_property("position") == "sticky"
    assert cell.location["x"] >= 0 and cell.is_displayed()
