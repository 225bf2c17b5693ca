"""torch's notices about its own future, kept from gradviz's users and written to the log.

torch deprecates TorchScript (``torch.jit.script``, ``trace``, ``save``, ``load``): 2.13 says so
with a DeprecationWarning, 2.14 with a FutureWarning, and torch.func's forward mode calls
``torch.jit.script`` internally on first use. gradviz still has to load TorchScript files that
people have, and a user cannot act on these notices, so around the calls that trigger them
they go to the ``gradviz.torch`` log instead of the terminal or the app. Every other warning
raised in the block passes through as it would have.
"""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger("gradviz.torch")

#: Messages of torch's deprecation notices that gradviz routes to the log (regexes matched at
#: the start of the message, as the warnings module does).
TORCH_DEPRECATIONS: tuple[str, ...] = (
    r"`torch\.jit\.(script|trace|trace_method|save|load)` is deprecated",
    r".*torch\.jit\.load.* is deprecated",
)
_PATTERN = re.compile("|".join(f"(?:{p})" for p in TORCH_DEPRECATIONS))


@contextmanager
def torch_deprecations_logged() -> Iterator[None]:
    """Within the block, torch's TorchScript deprecation notices (any category) are logged at
    INFO level instead of shown; other warnings are re-issued unchanged after the block."""
    try:
        with warnings.catch_warnings(record=True) as caught:
            for message in TORCH_DEPRECATIONS:
                warnings.filterwarnings("always", message=message)
            yield
    finally:
        _pass_on(caught)


def _pass_on(caught: list[warnings.WarningMessage]) -> None:
    for item in caught:
        if _PATTERN.match(str(item.message)):
            log.info("torch: %s (%s)", item.message, item.category.__name__)
        else:
            warnings.warn_explicit(item.message, item.category, item.filename, item.lineno)


class _ToLog(logging.Handler):
    """Passes a torch log record on to the ``gradviz.torch`` log; keeps the last line of
    each exception logged (torch's own error then says only "check the warnings above")."""

    def __init__(self) -> None:
        super().__init__()
        self.causes: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        log.info("torch (%s): %s", record.name, record.getMessage(), exc_info=record.exc_info)
        if record.exc_info and record.exc_info[1] is not None:
            lines = str(record.exc_info[1]).strip().splitlines()
            self.causes.append(lines[0] if lines else type(record.exc_info[1]).__name__)


@contextmanager
def torch_logs_kept() -> Iterator[list[str]]:
    """Within the block, what torch logs (``torch.export.load`` logs a 15-line traceback at
    WARNING before raising its own error) goes to the ``gradviz.torch`` log, not to the
    terminal: gradviz says what went wrong in one sentence. Yields the list that collects
    the first line of each exception torch logged."""
    root = logging.getLogger("torch")
    loggers = [root] + [
        logger
        for name, logger in logging.root.manager.loggerDict.items()
        if name.startswith("torch.") and isinstance(logger, logging.Logger) and logger.handlers
    ]
    saved = [(logger, logger.handlers[:], logger.propagate) for logger in loggers]
    handler = _ToLog()
    try:
        for logger in loggers:  # torch gives some children handlers of their own
            logger.handlers = [handler] if logger is root else []
            logger.propagate = logger is not root
        yield handler.causes
    finally:
        for logger, handlers, propagate in saved:
            logger.handlers = handlers
            logger.propagate = propagate
