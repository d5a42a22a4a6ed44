"""What a recorded bash command did, read from its text alone: the files it wrote and how, and the programs it ran.

The audit's reading of a command line. It never runs anything: it tokenises the text as a shell would
(quotes, `;`, `&&`, `|`, redirections, here-documents) and classifies each simple command. It is a
heuristic over hostile text: it never raises on what it reads, and what it cannot follow (variables,
command substitution, `eval`, aliases) it leaves unresolved rather than guesses.
"""

from __future__ import annotations

import dataclasses
import posixpath
import re
import shlex
from typing import Literal

WriteKind = Literal["by_hand", "program", "copy", "shell"]

_HEREDOC = re.compile(r"(?<!<)<<(?!<)(-?)[ \t]*(['\"]?)([A-Za-z_][A-Za-z0-9_.-]*)\2")
MAX_SHELL_CHARS = 100_000
"""Of a command line, here-documents aside, that is tokenised; past it the command is not followed
(`ShellReading.unread`): Python's shlex takes seconds on megabytes, and no real command is that long."""
_SEPARATORS = set(";&|\n")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
# Words that start a shell construct rather than name a command: dropped from the front of a command.
_KEYWORDS = {"do", "then", "else", "elif", "if", "while", "until", "{", "}", "!", "time", "done", "fi", "esac"}
_SKIP_SEGMENT = {"for", "case", "select", "function"}
# Commands that run the command after their options: the audit looks through them.
_WRAPPERS = {"sudo", "nohup", "nice", "ionice", "timeout", "env", "stdbuf", "exec", "command", "builtin",
             "xargs", "taskset", "time", "unbuffer", "chronic"}
_INTERPRETER = re.compile(r"^(?:python[0-9.]*|pypy[0-9.]*|ipython[0-9]*|Rscript|R|julia|node|nodejs|java|ruby|"
                          r"perl|php|jupyter|papermill|bash|sh|zsh|dash|accelerate|torchrun|deepspeed)$")
_PYTHON_VALUE_OPTIONS = {"-W", "-X", "-Q"}
_COPIERS = {"cp", "mv", "install", "rsync", "ln", "scp"}
_READERS = {"cat", "head", "tail", "tac"}
_IN_PLACE = {"sed", "perl", "awk", "gawk", "ruby"}


@dataclasses.dataclass
class ShellWrite:
    """A file a command wrote: `target` as written (resolved against the known working folder when
    it could be), how (`by_hand`: its rows typed into the command; `program`: an interpreter's output;
    `copy`: another file's bytes; `shell`: a shell tool's transformation), and what is known of it."""

    target: str
    resolved: bool
    kind: WriteKind
    how: str
    sources: list[str] = dataclasses.field(default_factory=list)
    content: str | None = None
    append: bool = False
    program: ProgramRun | None = None


@dataclasses.dataclass
class ProgramRun:
    """An interpreter or script a command ran: its name, the script file (resolved when it could be),
    the inline code (`-c`, a here-document, stdin from a file) and the command's own words."""

    program: str
    script: str | None
    inline: str | None
    words: list[str]
    stdin_file: str | None = None
    cwd: str | None = None


@dataclasses.dataclass
class ShellReading:
    """A command line read: its writes and program runs in order, the working folder after it (None
    when it cannot be known), and the text of its here-documents."""

    writes: list[ShellWrite]
    programs: list[ProgramRun]
    cwd: str | None
    heredocs: list[str]
    words: list[str]
    heads: list[str] = dataclasses.field(default_factory=list)  # the command word of each simple command
    unread: bool = False  # too long to follow: nothing is known of its writes, programs or working folder


def split_heredocs(command: str) -> tuple[str, list[str]]:
    """The command with each here-document's body taken out, and the bodies in order."""
    lines = command.split("\n")
    kept: list[str] = []
    bodies: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        kept.append(line)
        i += 1
        for match in _HEREDOC.finditer(line):
            strip_tabs, tag = match.group(1) == "-", match.group(3)
            body: list[str] = []
            while i < len(lines):
                current = lines[i]
                i += 1
                if (current.lstrip("\t") if strip_tabs else current) == tag:
                    break
                body.append(current)
            bodies.append("\n".join(body))
    return "\n".join(kept), bodies


def tokens(text: str) -> list[str]:
    """Shell words and operators of `text` (newlines kept as separators); a whitespace split when
    the quotes do not balance."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|<>()\n")
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:  # an unclosed quote: bash would refuse it too; read the words as they stand
        return re.findall(r"[;&|\n]+|[<>]+|[^\s;&|<>]+", text)


def _is_separator(token: str) -> bool:
    return bool(token) and set(token) <= _SEPARATORS | {"(", ")"}


def _is_redirection(token: str) -> bool:
    return bool(token) and set(token) <= set("<>&|") and ("<" in token or ">" in token)


def resolve(path: str, cwd: str | None) -> tuple[str, bool]:
    """`path` made absolute and normalised, and whether that could be done (no variable, no `~`,
    a known working folder for a relative one)."""
    if not path or any(c in path for c in "$`~*?[{"):
        return path, False
    if path.startswith("/"):
        return posixpath.normpath(path), True
    if cwd is None:
        return path, False
    return posixpath.normpath(posixpath.join(cwd, path)), True


@dataclasses.dataclass
class _Simple:
    words: list[str]
    redirects: list[tuple[str, str, int | None]]  # (operator, target, fd)
    heredoc: str | None = None
    herestring: str | None = None


def _simple_commands(toks: list[str], bodies: list[str]) -> list[list[_Simple]]:
    """Pipelines (lists of simple commands) of a token list; here-document bodies attached in order."""
    pipelines: list[list[_Simple]] = []
    pipeline: list[_Simple] = []
    current = _Simple([], [])
    body_iter = iter(bodies)
    i = 0

    def close_command() -> None:
        nonlocal current
        if current.words or current.redirects:
            pipeline.append(current)
        current = _Simple([], [])

    while i < len(toks):
        tok = toks[i]
        if _is_separator(tok) and not _is_redirection(tok):
            close_command()
            if tok.strip("\n") in ("|", "|&"):
                pass  # the pipeline goes on
            elif tok in ("(", ")"):
                pass
            else:
                if pipeline:
                    pipelines.append(pipeline)
                pipeline = []
            i += 1
            continue
        if _is_redirection(tok):
            fd: int | None = None
            if current.words and current.words[-1].isdigit() and len(current.words[-1]) <= 2:
                fd = int(current.words.pop())
            target = toks[i + 1] if i + 1 < len(toks) and not _is_separator(toks[i + 1]) else ""
            if tok.startswith("<<<"):
                current.herestring = target
            elif tok.startswith("<<"):
                current.heredoc = next(body_iter, "")
            current.redirects.append((tok, target, fd))
            i += 2 if target else 1
            continue
        current.words.append(tok)
        i += 1
    close_command()
    if pipeline:
        pipelines.append(pipeline)
    return pipelines


def _strip_front(words: list[str]) -> list[str]:
    """The command's own words: keywords, variable assignments and wrappers (`timeout 60`, `env X=1`) dropped."""
    words = list(words)
    for _ in range(64):  # wrappers nest (sudo timeout 9 nice python ...); a bound keeps hostile text cheap
        if not words:
            return words
        head = words[0]
        if head in _KEYWORDS or _ASSIGNMENT.match(head):
            words = words[1:]
            continue
        if posixpath.basename(head) in _WRAPPERS:
            name = posixpath.basename(head)
            words = words[1:]
            while words and (words[0].startswith("-") or _ASSIGNMENT.match(words[0])):
                option = words.pop(0)
                if name in ("nice", "timeout", "taskset", "ionice") and option in ("-n", "-s", "-k", "-c", "-p") and words:
                    words.pop(0)
            if name == "timeout" and words and re.match(r"^[0-9.]+[smhd]?$", words[0]):
                words = words[1:]
            if name == "taskset" and words and re.match(r"^(0x)?[0-9a-fA-F,-]+$", words[0]):
                words = words[1:]
            continue
        return words
    return words


def _python_parts(args: list[str]) -> tuple[str | None, str | None]:
    """(script, inline code) of a python command line's arguments; `-m module` is neither."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "-c":
            return None, args[i + 1] if i + 1 < len(args) else ""
        if arg.startswith("-c") and len(arg) > 2:
            return None, arg[2:]
        if arg == "-m" or (arg.startswith("-m") and len(arg) > 2):
            return None, None
        if arg == "-":
            return None, None
        if arg in _PYTHON_VALUE_OPTIONS:
            i += 2
            continue
        if arg.startswith("-"):
            i += 1
            continue
        return arg, None
    return None, None


def _program(words: list[str]) -> ProgramRun | None:
    if not words:
        return None
    head = words[0]
    name = posixpath.basename(head)
    if _INTERPRETER.match(name):
        args = words[1:]
        if name.startswith(("python", "pypy", "ipython")):
            script, inline = _python_parts(args)
        elif name in ("bash", "sh", "zsh", "dash"):
            if "-c" in args:
                idx = args.index("-c")
                script, inline = None, args[idx + 1] if idx + 1 < len(args) else ""
            else:
                rest = [a for a in args if not a.startswith("-")]
                script, inline = (rest[0] if rest else None), None
        elif name in ("jupyter", "papermill"):
            rest = [a for a in args if not a.startswith("-") and a not in ("nbconvert", "execute", "run")]
            script, inline = (rest[0] if rest else None), None
        elif name in ("Rscript", "R", "julia", "node", "nodejs", "ruby", "perl", "php"):
            if "-e" in args:
                idx = args.index("-e")
                script, inline = None, args[idx + 1] if idx + 1 < len(args) else ""
            else:
                rest = [a for a in args if not a.startswith("-")]
                script, inline = (rest[0] if rest else None), None
        else:  # java, accelerate, torchrun, deepspeed: the first word that is not an option
            rest = [a for a in args if not a.startswith("-")]
            script, inline = (rest[0] if rest else None), None
        return ProgramRun(program=name, script=script, inline=inline, words=words)
    # a script or binary run by its path (./train.sh, /home/code/run.py), not a system tool
    if (head.startswith(("./", "/", "../")) and not head.endswith("/") and name not in _READERS | _COPIERS
            and not head.startswith(("/usr/", "/bin/", "/sbin/"))):
        return ProgramRun(program=name, script=head, inline=None, words=words)
    return None


def _options_and_args(words: list[str]) -> list[str]:
    return [w for w in words[1:] if not w.startswith("-")]


def read_command(command: str, cwd: str | None, *, home: str | None = None) -> ShellReading:
    """Read `command` as run in `cwd`: what it wrote, which programs it ran, and the working folder after it."""
    text, bodies = split_heredocs(command)
    if len(text) > MAX_SHELL_CHARS:
        return ShellReading(writes=[], programs=[], cwd=None, heredocs=bodies, words=[], unread=True)
    toks = tokens(text)
    writes: list[ShellWrite] = []
    programs: list[ProgramRun] = []
    all_words: list[str] = []
    heads: list[str] = []
    for pipeline in _simple_commands(toks, bodies):
        stages = []
        for simple in pipeline:
            words = _strip_front(simple.words)
            if words and words[0] in _SKIP_SEGMENT:
                words = []
            all_words += words
            if words:
                heads.append(posixpath.basename(words[0]))
            stages.append((simple, words))
        # the pipeline's producer: a program anywhere in it, else what its first stage is
        runs = []
        for simple, words in stages:
            run = _program(words)
            if run is not None:
                if run.inline is None and run.script is None:
                    if simple.heredoc is not None:
                        run.inline = simple.heredoc
                    elif simple.herestring is not None:
                        run.inline = simple.herestring
                for op, target, _ in simple.redirects:
                    if op == "<" and target and run.script is None and run.inline is None:
                        run.stdin_file = resolve(target, cwd)[0]
                run.cwd = cwd
                runs.append(run)
                programs.append(run)
        first_words = stages[0][1] if stages else []
        first = posixpath.basename(first_words[0]) if first_words else ""
        producer: tuple[WriteKind, str, list[str], str | None, ProgramRun | None]
        if runs:
            producer = ("program", runs[0].program, [], None, runs[0])
        elif first in ("echo", "printf"):
            producer = ("by_hand", first, [], " ".join(first_words[1:]), None)
        elif first in _READERS and not _options_and_args(first_words):
            simple = stages[0][0]
            typed = simple.heredoc if simple.heredoc is not None else simple.herestring
            producer = ("by_hand", f"{first} with a here-document", [], typed, None) if typed is not None \
                else ("shell", first, [], None, None)
        elif first in _READERS and all(posixpath.basename(w[0]) in _READERS for _, w in stages if w):
            producer = ("copy", first, [resolve(a, cwd)[0] for a in _options_and_args(first_words)], None, None)
        else:
            sources = [resolve(a, cwd)[0] for _, w in stages for a in _options_and_args(w)]
            producer = ("shell", first or "a redirection", sources, None, None)
        for index, (simple, words) in enumerate(stages):
            name = posixpath.basename(words[0]) if words else ""
            # output redirections of the last stage carry the pipeline's output; of earlier ones, that stage's
            for op, target, fd in simple.redirects:
                if ">" not in op or not target or fd == 2 or op.startswith("<") or (op == ">&" and target.isdigit()):
                    continue
                path, ok = resolve(target, cwd)
                kind, how, sources, content, run = producer if index == len(stages) - 1 or not words else \
                    (("program", name, [], None, _program(words)) if _program(words) else ("shell", name, [], None, None))
                writes.append(ShellWrite(path, ok, kind, f"{how} {op}", sources, content, append=">>" in op, program=run))
            if name == "tee":
                kind, how, sources, content, run = producer if index > 0 else ("shell", "tee", [], None, None)
                for arg in _options_and_args(words):
                    path, ok = resolve(arg, cwd)
                    writes.append(ShellWrite(path, ok, kind, f"{how} | tee", sources, content,
                                             append="-a" in words, program=run))
            elif name in _COPIERS:
                args = _options_and_args(words)
                if name == "rsync" or name == "scp":
                    args = [a for a in args if ":" not in a or a.startswith("/")]
                if len(args) >= 2:
                    dest, sources = args[-1], args[:-1]
                    dest_path, ok = resolve(dest, cwd)
                    if dest.endswith("/") or (len(sources) > 1):
                        for source in sources:
                            target, ok2 = resolve(posixpath.join(dest, posixpath.basename(source)), cwd)
                            writes.append(ShellWrite(target, ok2, "copy", name, [resolve(source, cwd)[0]]))
                    else:
                        writes.append(ShellWrite(dest_path, ok, "copy", name, [resolve(s, cwd)[0] for s in sources]))
                        # `cp x /home/submission` copies into the folder: the audit matches both readings
                        writes.append(ShellWrite(posixpath.join(dest_path, posixpath.basename(sources[-1])), ok,
                                                 "copy", name, [resolve(s, cwd)[0] for s in sources]))
            elif name in _IN_PLACE and any(w == "-i" or w.startswith(("-i", "--in-place")) or w == "inplace"
                                           for w in words[1:]):
                args = [a for a in _options_and_args(words) if a != "inplace"]
                has_script_option = any(w in ("-e", "-f", "--expression") for w in words)
                files = args if has_script_option else args[1:]
                for arg in files:
                    path, ok = resolve(arg, cwd)
                    writes.append(ShellWrite(path, ok, "shell", f"{name} in place", [path]))
            elif name == "cd":
                args = _options_and_args(words)
                if not args:
                    cwd = home
                elif args[0] == "-":
                    cwd = None
                else:
                    path, ok = resolve(args[0], cwd)
                    cwd = path if ok else None
            elif name in ("pushd", "popd"):
                cwd = None
    return ShellReading(writes=writes, programs=programs, cwd=cwd, heredocs=bodies, words=all_words, heads=heads)
