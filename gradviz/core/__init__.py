"""The computational core: torch and numpy only, never Qt (see the import-linter contract)."""
