"""A cheating agent plants symbolic links to host paths wherever the harness writes or reads.

The logs folder (the output folder itself, its shell.log, the cmd-*.txt files that keep a long
command's full output and the cmd-*.sh files of long commands), the submission file, and links in
the code folder to the host's private answers, to a host canary folder and to the container's
root. Then it runs commands whose output is saved, uses every file tool through the links, and
submits. Nothing may be written outside the sandbox, nothing of the answers may show, and a link
never earns a grade: the submission is invalid (or refused), never a medal.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.docker

MAX_OUTPUT_CHARS = 1000
NAMES = range(1, 121)  # the cmd-NNNNN numbers the harness may use in one episode


def _plant_log_links(episode, host_canary, how: str) -> None:
    canary = host_canary.folder
    if how == "outputs folder":
        episode.sh(f"rm -rf /home/logs/outputs && ln -s {canary}/sub /home/logs/outputs")
        return
    links = "; ".join(
        f"ln -sfn {canary}/sub/cmd-{n:05d}.txt /home/logs/outputs/cmd-{n:05d}.txt; "
        f"ln -sfn {canary}/canary.txt /home/logs/outputs/cmd-{n:05d}.sh"
        for n in NAMES)
    episode.sh(f"mkdir -p /home/logs/outputs; {links}; "
               f"rm -f /home/logs/outputs/shell.log; ln -s {canary}/canary.txt /home/logs/outputs/shell.log")


def _run_long_outputs(episode) -> None:
    for _ in range(4):
        result = episode.bash("seq 1 5000")  # longer than max_output_chars: the full output is saved
        assert result.info["output_truncated"] and "4999" in result.observation, result.observation[-500:]
    # a command too long for one terminal line travels through a script file in the logs folder
    long_command = "echo start; " + "; ".join(f": {'x' * 60}" for _ in range(80)) + "; echo end"
    result = episode.bash(long_command)
    assert "start" in result.observation and "end" in result.observation, result.observation[-500:]
    assert episode.bash("echo still-here").observation.startswith("still-here")


@pytest.mark.parametrize("how", ["outputs folder", "files in the outputs folder"])
def test_links_in_the_logs_folder_write_nothing_outside(
    open_episode, answers, host_canary, private_unchanged, how: str
) -> None:
    episode = open_episode(max_output_chars=MAX_OUTPUT_CHARS, command_timeout_s=60)
    _plant_log_links(episode, host_canary, how)
    _run_long_outputs(episode)
    episode.reset()  # a new episode in the same env: its harness writes the logs again
    _plant_log_links(episode, host_canary, how)
    _run_long_outputs(episode)
    host_canary.assert_unchanged()
    answers.assert_not_in(episode.seen)


def test_file_tools_refuse_links_that_lead_out(open_episode, answers, host_canary, private_unchanged) -> None:
    episode = open_episode(command_timeout_s=60)
    private, canary = answers.private, host_canary.folder
    episode.sh(f"ln -s / /home/code/root && ln -s {canary} /home/code/hc && ln -s {private} /home/code/private && "
               f"ln -s {private}/test.csv /home/code/answers.csv && ln -s /etc/passwd /home/code/passwd && "
               f"ln -s {canary}/new.txt /home/code/dangling.txt")
    refused = [
        episode.tool("read_file", path="/home/code/private/test.csv"),
        episode.tool("read_file", path="/home/code/answers.csv"),
        episode.tool("list_dir", path="/home/code/private"),
        episode.tool("list_dir", path="/home/code/hc"),
        episode.tool("read_file", path="/home/code/root/etc/passwd"),
        episode.tool("read_file", path="/home/code/passwd"),
        episode.tool("list_dir", path="/home/code/root"),
        episode.tool("write_file", path="/home/code/hc/new.txt", content="planted\n"),
        episode.tool("write_file", path="/home/code/hc/canary.txt", content="overwritten\n"),
        episode.tool("edit_file", path="/home/code/hc/canary.txt", old="REPLACE_ME", new="CHANGED"),
        episode.tool("write_file", path="/home/code/private/planted.csv", content="planted\n"),
        episode.tool("validate_submission", path="/home/code/answers.csv"),
        episode.tool("validate_submission", path="/home/code/hc/perfect.csv"),
    ]
    for result in refused:
        call = result.info["tool_call"]
        assert "tool_error" in result.info or "NOT valid" in result.observation or "not valid" in result.observation, (
            f"{call}: a link leading out of the sandbox was followed: {result.observation[:500]!r}")
        assert "root:x:0:0" not in result.observation and "REPLACE_ME" not in result.observation, result.observation
    # a dangling link to a host path must not become a file on the host when written through
    episode.tool("write_file", path="/home/code/dangling.txt", content="planted\n")
    host_canary.assert_unchanged()
    answers.assert_not_in(episode.seen)


def test_a_link_into_what_the_agent_may_not_read_says_permission_denied(open_episode, answers) -> None:
    # /proc/1/root is the root side's view of the file system; following it is refused by the
    # kernel, and the tool says so (not that the path changed, which would invite retries).
    episode = open_episode(command_timeout_s=60)
    episode.sh("ln -s /proc/1/root /home/code/rootside")
    for result in (episode.tool("read_file", path="/home/code/rootside/etc/hostname"),
                   episode.tool("list_dir", path="/home/code/rootside")):
        assert result.info["tool_error"]["type"] == "read_only", result.observation
        assert "permission denied" in result.observation and "changed" not in result.observation
    answers.assert_not_in(episode.seen)


@pytest.mark.parametrize("target", ["private answers", "host perfect submission", "container file",
                                    "link to a link to the host"])
def test_a_linked_submission_is_never_graded_through_the_link(
    open_episode, answers, host_canary, private_unchanged, target: str
) -> None:
    episode = open_episode(command_timeout_s=60, max_steps=5)
    link = {
        "private answers": f"ln -s {answers.private}/test.csv /home/submission/submission.csv",
        "host perfect submission": f"ln -s {host_canary.folder}/perfect.csv /home/submission/submission.csv",
        "container file": "ln -s /etc/passwd /home/submission/submission.csv",
        "link to a link to the host": f"ln -s {host_canary.folder} /home/code/hc && "
                                      "ln -s /home/code/hc/perfect.csv /home/submission/submission.csv",
    }[target]
    episode.sh(link)
    checked = episode.tool("validate_submission")
    assert "Submission is valid" not in checked.observation, checked.observation
    result = episode.tool("submit")
    grade = result.info["grade"]
    assert result.terminated and grade["valid_submission"] is False, grade
    assert not grade["any_medal"] and result.reward == 0.0, f"a medal earned through a link: {grade}"
    assert grade["reason"], grade
    host_canary.assert_unchanged()
    answers.assert_not_in(episode.seen)
