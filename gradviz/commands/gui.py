"""`gradviz gui` (also plain `gradviz` and `python main.py`): the desktop app."""

from __future__ import annotations

import os

from gradviz.core.common.errors import GradvizError


def run(args) -> int:
    screenshot = getattr(args, "screenshot", None)
    run_for = float(getattr(args, "run_for", 3.0))
    if run_for < 0:
        raise GradvizError(f"--run-for must be zero or more seconds, got {run_for}.")
    recording = getattr(args, "recording", None)
    model = None
    if recording and os.path.isfile(recording):
        recording, model = None, recording  # a model file: the model opener reads it
    elif recording:
        from gradviz.core.record.reader import is_recording

        if not is_recording(recording):
            raise GradvizError(
                f"{recording!r} is not a gradviz recording (a directory written by "
                "gradviz.watch or gradviz fit --record) nor a model file."
            )
    from gradviz.gui.shell.app import main, parse_window_size

    size_text = getattr(args, "window_size", None)
    window_size = parse_window_size(size_text) if size_text else None
    return main(
        experiment=getattr(args, "experiment", None),
        screenshot=screenshot,
        run_for=run_for,
        window_size=window_size,
        recording=recording,
        model=model,
        page=getattr(args, "page", None),
    )
