"""Experiment files for the app: reading, checking and writing live in gradviz.core.experiment."""

from gradviz.core.experiment import (
    experiment_from_dict,
    experiment_to_dict,
    load_experiment,
    save_experiment,
)

__all__ = ["experiment_from_dict", "experiment_to_dict", "load_experiment", "save_experiment"]
