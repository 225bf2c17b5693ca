"""Launch gradviz: ``python main.py`` behaves like the ``gradviz`` command."""

from gradviz.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
