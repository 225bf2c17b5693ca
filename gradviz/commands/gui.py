"""`gradviz gui`: the desktop app."""

from __future__ import annotations


def run(args) -> int:
    # The desktop app arrives with the GUI package; until then say so plainly.
    from gradviz.cli import build_parser

    print("gradviz: the desktop app is not available in this version yet; use a subcommand.")
    build_parser().print_help()
    return 0
