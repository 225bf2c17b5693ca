"""The code blocks of the README and the docs, and how the tests run them.

A page's ```` ```bash ```` and ```` ```python ```` blocks run in order, in one fresh folder per
page (holding a link to the repository's ``resources/``, so commands read as they would from
a checkout), sharing one Python namespace, as a reader who types them in turn:

- a ```` ```python title="NAME.py" ```` block is a file: it is written there, and a later
  command runs it;
- any other Python block is executed;
- a bash block is split into commands (``\\`` continues a line, ``#`` starts a comment,
  ``&&`` chains, ``NAME=VALUE`` before a command sets its environment). ``gradviz COMMAND``
  runs in this process (``tests/cli/cli_runner.py``), except the app: ``gradviz`` without a
  command, ``gradviz gui ...`` or ``gradviz FILE`` start it in a fresh process, offscreen,
  with ``--screenshot`` (the cheap form of a command that would wait for a person);
  ``python FILE.py ARGS`` runs in a fresh process; ``rm -r PATH`` removes what the page made
  (inside its folder only). Every command must exit 0.

An HTML comment on the lines just before a block changes that:
``<!-- docs-test: skip REASON -->`` leaves it out (the reason is required: installing
packages, the whole test suite, two processes of torchrun, ...);
``<!-- docs-test: requires MODULE -->`` runs it where MODULE imports (an optional extra, such
as ``lightning``) and skips the rest of the page where it does not.

Blocks in other languages (``text``, ``json``) are shown, not run; any other language is
refused, so that no runnable block escapes the tests under another name.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUN = ("bash", "python")
SHOWN = ("text", "json")
#: Commands that start the app: how long one may take, offscreen, before it fails.
APP_TIMEOUT_S = 240
SCRIPT_TIMEOUT_S = 300

_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+)(?P<info>.*)$")
_DIRECTIVE = re.compile(r"^\s*<!--\s*docs-test:\s*(?P<body>.*?)\s*-->\s*$")
_TITLE = re.compile(r'title="(?P<title>[^"]+)"')


@dataclass(frozen=True)
class Block:
    """One fenced code block of a Markdown file."""

    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    title: str | None
    code: str
    directive: str | None  # the text after "docs-test:" of the comment before it

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def skip_reason(self) -> str | None:
        """The reason given with ``skip`` (an empty text when none was given); None when
        the block is not skipped."""
        if self.directive is None or not self.directive.startswith("skip"):
            return None
        return self.directive[len("skip") :].strip()

    @property
    def requires(self) -> str | None:
        """The module named by ``requires`` (None when the block names none)."""
        if self.directive is None or not self.directive.startswith("requires "):
            return None
        return self.directive[len("requires ") :].strip() or None

    @property
    def known_directive(self) -> bool:
        return self.directive is None or self.skip_reason is not None or bool(self.requires)

    @property
    def runs(self) -> bool:
        return self.lang in RUN and self.skip_reason is None


def doc_files() -> list[Path]:
    """The README and every page of the docs."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks_of(path: Path) -> list[Block]:
    """Every fenced block of ``path``, with the docs-test comment that precedes it."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, fence, info = opening["indent"], opening["fence"], opening["info"].strip()
        body, j = [], i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j])
            j += 1
        lang = info.split()[0] if info else ""
        title = _TITLE.search(info)
        found.append(
            Block(
                path,
                i + 1,
                lang,
                title["title"] if title else None,
                "\n".join(body) + "\n",
                _directive_before(lines, i),
            )
        )
        i = j + 1
    return found


def _directive_before(lines: list[str], index: int) -> str | None:
    """The docs-test comment on the nearest non-blank line above ``index``, if any."""
    k = index - 1
    while k >= 0 and not lines[k].strip():
        k -= 1
    match = _DIRECTIVE.match(lines[k]) if k >= 0 else None
    return match["body"] if match else None


def stray_directives(path: Path) -> list[int]:
    """Lines of docs-test comments that stand before no code block (a comment that lost
    its block would otherwise skip nothing, silently)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    stray = []
    for n, line in enumerate(lines):
        if not _DIRECTIVE.match(line):
            continue
        k = n + 1
        while k < len(lines) and not lines[k].strip():
            k += 1
        if k >= len(lines) or not _FENCE.match(lines[k]):
            stray.append(n + 1)
    return stray


# ---- bash ---------------------------------------------------------------------------------------
def commands_of(code: str) -> list[list[str]]:
    """The commands of a bash block as argument lists (continuations joined, comments
    dropped, ``&&`` chains split)."""
    joined = re.sub(r"\\\n", " ", code)
    commands: list[list[str]] = []
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        current: list[str] = []
        for word in words:
            if word == "&&":
                commands.append(current)
                current = []
            else:
                current.append(word)
        if current:
            commands.append(current)
    return commands


def split_environment(words: list[str]) -> tuple[dict[str, str], list[str]]:
    """``NAME=VALUE`` words before the command, and the command."""
    env: dict[str, str] = {}
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
        name, value = words[0].split("=", 1)
        env[name] = value
        words = words[1:]
    return env, words


def starts_the_app(args: list[str]) -> bool:
    """Whether ``gradviz ARGS`` opens the window (as ``gradviz.cli.main`` decides)."""
    from gradviz.cli import _means_the_gui

    return not args or args[0] == "gui" or _means_the_gui(args)


def kind_of(words: list[str]) -> str:
    """How a command runs: ``gradviz`` (in this process), ``app`` or ``script`` (a fresh
    process), or ``unknown``."""
    _, words = split_environment(words)
    if not words:
        return "unknown"
    if words[0] == "gradviz" or words[:3] == ["python", "-m", "gradviz"]:
        args = words[1:] if words[0] == "gradviz" else words[3:]
        return "app" if starts_the_app(args) else "gradviz"
    if words[0] == "python" and len(words) > 1 and words[1].endswith(".py"):
        return "script"
    if words[0] == "rm" and len(words) > 2 and words[1] in ("-r", "-rf"):
        return "remove"
    return "unknown"


def is_costly(block: Block) -> bool:
    """Whether running ``block`` starts another process (the app, a script)."""
    if not block.runs or block.lang != "bash":
        return False
    return any(kind_of(words) in ("app", "script") for words in commands_of(block.code))


# ---- running ------------------------------------------------------------------------------------
class PageRun:
    """Runs one page's blocks in order in ``folder``, as a reader would."""

    def __init__(self, folder: Path):
        self.folder = folder
        (folder / "resources").symlink_to(ROOT / "resources", target_is_directory=True)
        self.namespace: dict = {"__name__": "__main__"}
        # As in an interpreter started in that folder: its files import by name.
        sys.path.insert(0, str(folder))

    def close(self) -> None:
        """Forget the folder and the modules imported from it (another page may write a
        file of the same name)."""
        sys.path.remove(str(self.folder))
        for name, module in list(sys.modules.items()):
            if str(getattr(module, "__file__", "") or "").startswith(str(self.folder)):
                del sys.modules[name]

    def run(self, block: Block) -> None:
        if block.requires:
            import pytest

            pytest.importorskip(block.requires, reason=f"{block.where} needs {block.requires}")
        if block.lang == "python":
            self._python(block)
        else:
            for words in commands_of(block.code):
                self._command(block, words)

    def _python(self, block: Block) -> None:
        if block.title:
            (self.folder / block.title).write_text(block.code, encoding="utf-8")
            return
        exec(compile(block.code, block.where, "exec"), self.namespace)

    def _command(self, block: Block, words: list[str]) -> None:
        env, words = split_environment(words)
        kind = kind_of(words)
        shown = shlex.join(words)
        if kind == "unknown":
            raise AssertionError(
                f"{block.where}: the tests cannot run {shown!r}; make it a gradviz or python "
                "command, or skip its block with <!-- docs-test: skip REASON -->."
            )
        if kind == "remove":
            self._remove(block, words[2:])
            return
        if kind == "gradviz":
            args = words[1:] if words[0] == "gradviz" else words[3:]
            result = self._in_process(args, env)
        elif kind == "app":
            args = words[1:] if words[0] == "gradviz" else words[3:]
            result = self._app(args, env)
        else:
            result = self._process([sys.executable, *words[1:]], env, SCRIPT_TIMEOUT_S)
        assert result.returncode == 0, (
            f"{block.where}: {shown} exited {result.returncode}\n"
            f"stdout: {result.stdout[-2000:]}\nstderr: {result.stderr[-2000:]}"
        )

    def _remove(self, block: Block, paths: list[str]) -> None:
        for name in paths:
            path = (self.folder / name).resolve()
            assert path.is_relative_to(self.folder.resolve()) and path != self.folder.resolve(), (
                f"{block.where}: rm may remove only what the page made ({name!r})"
            )
            shutil.rmtree(path) if path.is_dir() else path.unlink()

    def _in_process(self, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
        from cli_runner import run_cli

        saved = {name: os.environ.get(name) for name in env}
        os.environ.update(env)
        try:
            return run_cli(*args)
        finally:
            for name, value in saved.items():
                if value is None:
                    del os.environ[name]
                else:
                    os.environ[name] = value

    def _app(self, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
        """The app's cheap form: opened offscreen, saved as a screenshot, closed."""
        if args and args[0] == "gui":
            args = args[1:]
        if "--screenshot" not in args:
            args = [*args, "--screenshot", "docs-test-window.png", "--run-for", "0.5"]
        command = [sys.executable, "-m", "gradviz", "gui", *args]
        return self._process(command, {"QT_QPA_PLATFORM": "offscreen", **env}, APP_TIMEOUT_S)

    def _process(
        self, command: list[str], env: dict[str, str], timeout: float
    ) -> subprocess.CompletedProcess:
        full_env = {**os.environ, **env}
        full_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(ROOT), full_env.get("PYTHONPATH")) if p
        )
        return subprocess.run(
            command,
            cwd=self.folder,
            env=full_env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
