from gradviz.cli import program

raise SystemExit(program())
