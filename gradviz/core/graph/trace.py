"""A live module's graph: ``torch.export`` on a sample input, ``torch.fx.symbolic_trace``
where export fails, and the module tree by names for models too large to trace."""

from __future__ import annotations

import contextlib
import logging
import warnings
from typing import Any

from gradviz.core.common.errors import GradvizError
from gradviz.core.graph.fx_graph import graph_from_exported, graph_from_fx
from gradviz.core.graph.model import ModelGraph
from gradviz.core.graph.names import graph_from_module_tree

#: Modules above which a model is not traced: torch.export costs about 10 ms of CPU per
#: module here (1,000 Linear layers: 10.5 s), so a larger model is shown as its module tree,
#: by names, rather than keep the user waiting for minutes.
MAX_TRACED_MODULES = 1_000

log = logging.getLogger(__name__)


def graph_of_module(module: Any, sample: Any) -> ModelGraph:
    """The graph of ``module`` run on ``sample`` (one tensor, or a tuple of positional
    inputs): export's, else fx's with a note saying why export failed. GradvizError with
    one sentence where neither can read the model."""
    import torch

    count = sum(1 for _ in module.modules())
    if count > MAX_TRACED_MODULES:
        return graph_from_module_tree(
            module,
            (
                f"The model has {count:,} modules, more than the {MAX_TRACED_MODULES:,} "
                "gradviz traces: its graph is the module tree by names.",
            ),
        )
    args = sample if isinstance(sample, tuple) else (sample,)
    try:
        with _quiet():
            program = torch.export.export(module, args)
        return graph_from_exported(program)
    except Exception as exc:
        export_error = _line(exc)
    try:
        with _quiet():
            traced = torch.fx.symbolic_trace(module)
    except Exception as exc:
        raise GradvizError(
            f"gradviz could not read the model's graph: torch.export failed ({export_error}) "
            f"and so did torch.fx ({_line(exc)})."
        ) from None
    return graph_from_fx(
        traced, (f"torch.export failed ({export_error}); the graph is torch.fx's trace.",)
    )


@contextlib.contextmanager
def _quiet():
    """Export's and fx's warnings (about the user's code, not gradviz) go to the log."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for warning in caught:
        log.info("while tracing: %s", warning.message)


def _line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return (lines[0] if lines else type(exc).__name__).rstrip(".")[:200]
