"""One module per CLI subcommand, each with ``run(args) -> exit code``."""
