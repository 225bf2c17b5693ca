"""The front door: ``gradviz`` (= ``gradviz gui``), ``fit``, ``jacobian``, ``inspect``, ``bench``,
``diagnose``.

Each subcommand lives in ``gradviz.commands.<name>`` and is imported only when chosen, so
``gradviz --help`` stays instant. A GradvizError becomes one sentence on stderr and exit 2.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys

from gradviz import __version__
from gradviz.core.common.errors import GradvizError
from gradviz.core.settings.config import ACTIVATIONS, DTYPES, JACOBIAN_METHODS, FitConfig
from gradviz.core.settings.program_limits import ProgramLimits
from gradviz.core.settings.table import add_arguments

EXIT_USAGE = 2


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """``--help`` names each option's default (none for unset options and off switches)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            not action.option_strings
            or "%(default)" in text
            or default is None
            or default is False
            or default is argparse.SUPPRESS
        ):
            return text
        return f"{text} (default: %(default)s)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gradviz",
        formatter_class=DefaultsHelpFormatter,
        description="See gradients: NaN gradients of distance matrices and per-input "
        "Jacobians. With no command, opens the desktop app.",
    )
    parser.add_argument("--version", action="version", version=f"gradviz {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_gui(sub)
    _add_fit(sub)
    _add_jacobian(sub)
    _add_inspect(sub)
    _add_bench(sub)
    _add_diagnose(sub)
    return parser


def _add_gui(sub) -> None:
    p = sub.add_parser(
        "gui", help="open the desktop app (the default)", formatter_class=DefaultsHelpFormatter
    )
    p.add_argument(
        "recording",
        nargs="?",
        metavar="MODEL_OR_RECORDING",
        help="recording directory or model file to open",
    )
    p.add_argument(
        "--page",
        choices=("lab", "explorer", "health", "runs", "graph"),
        help="the page to show once the file is open (graph: the model as a graph)",
    )
    p.add_argument(
        "--experiment",
        metavar="FILE_OR_LINE",
        help="experiment to open: a JSON experiment file, or its settings in one line such as "
        "'helix;n=200;net=8-16:relu-3;method=masked' (Edit > Copy as experiment line); an "
        "existing file is read as a file, other text with '=' or ';' as a line",
    )
    p.add_argument("--screenshot", metavar="PNG", help="save a screenshot of the window and exit")
    p.add_argument(
        "--run-for",
        type=float,
        default=3.0,
        metavar="SECONDS",
        help="with --screenshot: run the experiment this long first",
    )
    p.add_argument(
        "--window-size",
        metavar="WxH",
        help="open the window at this size in pixels, e.g. 1024x700 (a screenshot is exactly "
        "this size; without it the window keeps its last size, a screenshot 1440x900)",
    )


def _add_fit(sub) -> None:
    p = sub.add_parser(
        "fit", help="run the distance-matrix fit headless", formatter_class=DefaultsHelpFormatter
    )
    add_arguments(p, FitConfig)  # one option per run setting, described in core.config
    p.add_argument("--out", metavar="RUN.npz", help="save losses, coordinates and distances")
    p.add_argument(
        "--record",
        metavar="RUN",
        help="record gradient statistics and matrix snapshots into a new recording directory",
    )
    p.add_argument("--json", action="store_true", help="print a JSON summary as the last line")


def _add_jacobian(sub) -> None:
    p = sub.add_parser(
        "jacobian",
        help="per-input Jacobians of a network over a batch",
        formatter_class=DefaultsHelpFormatter,
    )
    model = p.add_mutually_exclusive_group(required=True)
    model.add_argument("--net", metavar="SPEC", help="network spec, e.g. 2-20-20-4:tanh")
    model.add_argument("--model", metavar="PATH", help="saved model file")
    inputs = p.add_mutually_exclusive_group(required=True)
    inputs.add_argument("--batch", type=int, metavar="B", help="random standard-normal batch")
    inputs.add_argument("--inputs", metavar="file:PATH", help="inputs from a CSV/NPY file")
    p.add_argument("--seed", type=int, default=0, help="seed of the random batch")
    p.add_argument(
        "--method",
        default="auto",
        choices=list(JACOBIAN_METHODS),
        help="how the Jacobians are computed (auto picks by size)",
    )
    p.add_argument(
        "--full",
        action="store_true",
        help="also the full (B*m, B*n) batch Jacobian and its largest off-block entry",
    )
    p.add_argument(
        "--activation",
        choices=list(ACTIVATIONS),
        help="activation to assume where a model file cannot say",
    )
    p.add_argument(
        "--trust",
        action="store_true",
        help="allow formats that can run code from the file (TorchScript, .pt2), and "
        "installed classes outside torch.nn that a whole pickled module names",
    )
    add_arguments(p, ProgramLimits)  # --time-limit, --memory-limit of a trusted program
    p.add_argument("--in-dim", type=int, metavar="N", help="input width, where the file cannot say")
    _add_model_choices(p)
    p.add_argument(
        "--input-shape",
        metavar="S",
        help="shape of one random input, e.g. 3,32,32 (default: the model's input width)",
    )
    p.add_argument(
        "--output",
        type=int,
        metavar="K",
        help="output explained by saliency (default: each sample's largest output)",
    )
    p.add_argument("--dtype", default="float32", choices=list(DTYPES), help="floating-point type")
    p.add_argument("--device", default="cpu", help="auto, cpu, cuda, cuda:N or mps")
    p.add_argument("--out", metavar="J.npy", help="write J as (B, m, n) float32")
    p.add_argument("--json", action="store_true", help="print a JSON summary as the last line")


def _add_inspect(sub) -> None:
    p = sub.add_parser(
        "inspect",
        help="describe a saved model file without running it, or a recording",
        formatter_class=DefaultsHelpFormatter,
        description="Describe a saved model file without running it, or a recording "
        "directory. Exit status: 0, 1 for a recording that opens but has lost data (named "
        "under 'damaged') or a rank whose records end before another's (named under "
        "'ranks_ending_early'), 2 for a file or recording that cannot be read.",
    )
    p.add_argument("path", metavar="PATH")
    p.add_argument(
        "--trust",
        action="store_true",
        help="allow formats that can run code from the file (TorchScript, .pt2), and "
        "installed classes outside torch.nn that a whole pickled module names",
    )
    add_arguments(p, ProgramLimits)  # --time-limit, --memory-limit of a trusted program
    p.add_argument(
        "--activation",
        choices=list(ACTIVATIONS),
        help="activation to assume where the file cannot say",
    )
    _add_model_choices(p)
    from gradviz.commands import inspect_graph  # --graph, --input-shape (argparse only)

    inspect_graph.add_arguments(p)
    p.add_argument("--json", action="store_true", help="print a JSON summary as the last line")


def _add_assume_sequential(p) -> None:
    p.add_argument(
        "--assume-sequential",
        action="store_true",
        help="run a pickled module of a class of its own as its layers in declaration order",
    )


def _add_model_choices(p) -> None:
    """How a model file whose forward is not in it may still run."""
    _add_assume_sequential(p)
    p.add_argument(
        "--model-class",
        metavar="FILE.py:NAME",
        help="the model's class (path/to/file.py:Net or package.module:Net); needs --trust",
    )
    p.add_argument(
        "--model-args", metavar="JSON", help="constructor arguments of --model-class, as JSON"
    )


def _add_bench(sub) -> None:
    from gradviz.bench import SUITES  # the names alone (the package's init imports nothing)

    p = sub.add_parser(
        "bench",
        help="measure speed (ratios against named baselines)",
        formatter_class=DefaultsHelpFormatter,
    )
    p.add_argument(
        "--suite",
        default="all",
        choices=["all", *SUITES],
        help="which measurements to run",
    )
    p.add_argument("--repeats", type=int, default=3, help="interleaved repeats (median)")
    p.add_argument("--quick", action="store_true", help="small sizes only (a smoke run)")
    p.add_argument("--json", action="store_true", help="print results as JSON")
    p.add_argument(
        "--out",
        metavar="FILE.json",
        help="save the results, the machine, its load and the command line to a JSON file",
    )


DIAGNOSE_EPILOG = """\
Options before SCRIPT.py are gradviz's; everything after it belongs to the script and
reaches it unchanged as its sys.argv[1:] (its own --json, -h or -- included).

example:
  gradviz diagnose --json train.py --json --lr 0.1
    train.py runs with sys.argv[1:] == ['--json', '--lr', '0.1'];
    gradviz prints its own JSON summary as the last line of the output.
"""


def _add_diagnose(sub) -> None:
    p = sub.add_parser(
        "diagnose",
        help="run a training script with the NaN tracer armed; say where its first NaN began",
        description="Run SCRIPT.py as __main__ with the non-finite tracer armed and say where "
        "its first NaN or Inf began.",
        epilog=DIAGNOSE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--json", action="store_true", help="print a JSON summary as the last line")
    p.add_argument("script", metavar="SCRIPT.py", help="the script, run as __main__")
    p.add_argument(
        "script_args", nargs=argparse.REMAINDER, metavar="ARGS", help="the script's own arguments"
    )


def _split_diagnose(argv: list[str]) -> tuple[list[str], list[str]]:
    """``diagnose``'s arguments as (gradviz's, up to and including SCRIPT; the script's,
    verbatim). argparse alone drops a ``--`` after SCRIPT, which is the script's."""
    for i, arg in enumerate(argv[1:], start=1):
        if arg == "--":  # gradviz's end of options: SCRIPT follows
            return argv[: i + 2], argv[i + 2 :]
        if not arg.startswith("-"):
            return argv[: i + 1], argv[i + 1 :]
    return argv, []


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if _means_the_gui(argv):
        argv = ["gui", *argv]  # `gradviz RUN --window-size 1024x700` is `gradviz gui ...`
    script_args = None
    if argv and argv[0] == "diagnose":
        argv, script_args = _split_diagnose(argv)
    args = build_parser().parse_args(argv)
    if script_args is not None:
        args.script_args = script_args
    command = args.command or "gui"
    if args.command is None:  # plain `gradviz`: the gui's defaults
        args = build_parser().parse_args(["gui", *argv])
    args.argv = argv  # the arguments as given (`gradviz bench --out` records its command line)
    try:
        module = importlib.import_module(f"gradviz.commands.{command}")
        return int(module.run(args) or 0)
    except GradvizError as exc:
        # One line, whatever a file's name holds: unprintable characters are escaped.
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(exc))
        print(f"gradviz {command}: error: {text}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"gradviz {command}: interrupted", file=sys.stderr)
        return 130


def program(argv: list[str] | None = None) -> int:
    """``main`` as the whole life of a process (the ``gradviz`` command, ``python -m
    gradviz``, ``main.py``): its exit status, the process then ending without its last
    garbage collections.

    At exit Python collects every object that is still alive, and with torch (and Qt)
    loaded that walk is ~1.3 s of a 6.4 s ``gradviz fit`` here, after the command's work
    is done and its files are closed. ``gc.freeze()`` takes what exists out of those
    collections; everything is still released by reference counting as modules are torn
    down, exit handlers still run (recordings close in them), and what they make is still
    collected. ``diagnose`` runs a user's script in this process, whose own objects get
    the collections they would get under ``python script.py``."""
    code = main(argv)
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] != "diagnose":
        gc.freeze()
    return code


def _means_the_gui(argv: list[str]) -> bool:
    """Arguments without a command are the gui's: an option of its, or a file to open (a
    word that is neither a command nor a file stays argparse's 'invalid choice')."""
    if not argv or argv[0] in _COMMANDS or argv[0] in ("-h", "--help", "--version"):
        return False
    return argv[0].startswith("-") or os.path.exists(argv[0])


_COMMANDS = ("gui", "fit", "jacobian", "inspect", "bench", "diagnose")


def gui_main() -> int:
    """Entry point of the ``gradviz-gui`` launcher."""
    return program(["gui", *sys.argv[1:]])
