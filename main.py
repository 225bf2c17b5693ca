"""Launch gradviz: ``python main.py`` behaves like the ``gradviz`` command."""

from gradviz.cli import program

if __name__ == "__main__":
    raise SystemExit(program())
