"""The package list, which pyproject.toml cannot give: every ``gradviz*`` package found under
the repository, plus ``gradviz.examples``, the bundled experiments, installed from
``resources/experiments`` (mapped in pyproject.toml) without moving them. Everything else
about the build is in pyproject.toml."""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["gradviz*"]), "gradviz.examples"])
