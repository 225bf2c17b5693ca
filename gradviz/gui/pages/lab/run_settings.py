"""The lab's form as the settings of a run: read (a sentence in a dialog where a value is
wrong), checked against the memory the run would need, and compared with the run waiting
at step 0."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gradviz.core.common.errors import GradvizError
from gradviz.core.settings.config import FitConfig
from gradviz.gui.run.session import RunSession, RunState
from gradviz.gui.widgets.settings_form import SetupForm


def form_config(
    form: SetupForm, session: RunSession, show_error: Callable[..., Any]
) -> FitConfig | None:
    """The form's settings for a new run, which also gives the session the form's frame
    rate (an opened experiment fills the form without a change signal for each setting);
    None (after a dialog) where a value is wrong."""
    try:
        config = form.config()
    except GradvizError as exc:
        show_error(str(exc), "")
        return None
    session.set_frame_rate(form.live_settings().frame_rate)
    return config


def fitting_config(
    form: SetupForm, session: RunSession, show_error: Callable[..., Any]
) -> FitConfig | None:
    """The form's settings, or None (after a dialog) when they are invalid or the run
    would not fit in the memory available (both numbers and what to do)."""
    config = form_config(form, session, show_error)
    if config is None:
        return None
    from gradviz.core.common.decimate import MAX_DISPLAY
    from gradviz.core.common.devices import resolve_device
    from gradviz.core.lab import memory  # torch is loaded: runs are available

    try:
        memory.check_fits(
            config, resolve_device(config.device), snapshot_side=min(config.n, MAX_DISPLAY)
        )
    except GradvizError as exc:
        show_error(str(exc), "")
        return None
    return config


def run_differs_from_form(form: SetupForm, session: RunSession) -> bool:
    """A run waiting at step 0 (not started) made with other settings than the form
    shows: the form was set from a lab recording meanwhile. (Changed settings reset a
    waiting run at once; a going run keeps its own, as the user answered.)"""
    if session.worker is None or session.state is not RunState.READY:
        return False
    try:
        return form.config() != session.settings_now
    except GradvizError:
        return False
