"""``gradviz diagnose [--json] SCRIPT [ARGS...]``: run a training script with the
non-finite tracer armed and say where its first NaN or Inf started.

The script runs as ``__main__`` with ``sys.argv = [SCRIPT, *ARGS]``. The tracer is armed
from the start and looked at, then re-armed, at every step a ``gradviz.watch`` recorder
logs (``rec.log``, or the optimizer's step with ``optimizer=``): the first interval whose
trace found a non-finite value stops the script and is reported. A script without a
recorder is traced as a whole. Finding a NaN is a result (exit 0); a script that is
missing, does not compile or fails before any non-finite value is exit 2.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import traceback

from gradviz.core.common.errors import GradvizError


class _Found(BaseException):
    """Stops the user's script at the first interval with a non-finite value (a
    BaseException, so that the script's own ``except Exception`` does not swallow it)."""


def run(args) -> int:
    script = os.path.abspath(args.script)
    _check_script(args.script)
    from torch.utils._python_dispatch import _disable_current_modes

    import gradviz.core.record.recorder as recorder
    from gradviz.core.origin.tracer import NonfiniteTracer

    tracer = NonfiniteTracer()
    seen = {"step": None, "intervals": 0, "origin": None, "last": None}

    def on_step(_rec, step: int) -> None:
        seen["intervals"] += 1
        origin = tracer.origin
        if origin is not None:
            # An optimizer's step that ran after the last logged step's ``rec.log`` and
            # before this interval's forward is that step's ``opt.step()``.
            early = tracer.origin_follows_a_logged_step and seen["last"] is not None
            seen["origin"], seen["step"] = origin, seen["last"] if early else step
            raise _Found
        seen["last"] = step
        tracer.reset()  # a clean interval: start the next one afresh

    failure, namespace = None, None
    recorder.STEP_LISTENERS.append(on_step)
    recorder.UNTRACED.append(_disable_current_modes)
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [args.script, *args.script_args]
    sys.path.insert(0, os.path.dirname(script))
    try:
        with tracer:
            try:
                # The script's globals are kept while the origin is asked for: a value that
                # nothing holds any more was masked away (see NonfiniteTracer).
                namespace = runpy.run_path(script, run_name="__main__")
            except _Found:
                pass
            except SystemExit as exc:
                if exc.code not in (None, 0) and tracer.origin is None:
                    failure = f"exited with status {exc.code}"
            except Exception as exc:  # the user's error: said in one sentence below
                failure = _where_it_failed(exc, script)
    finally:
        recorder.STEP_LISTENERS.remove(on_step)
        recorder.UNTRACED.remove(_disable_current_modes)
        sys.argv, sys.path[:] = saved_argv, saved_path
    origin = seen["origin"] or tracer.origin
    del namespace
    if origin is None and failure is not None:
        raise GradvizError(f"{args.script} {failure} before any non-finite value.")
    _report(args, origin, seen["step"], seen["intervals"], failure)
    return 0


def _check_script(path: str) -> None:
    if not os.path.isfile(path):
        raise GradvizError(f"There is no script {path}.")
    try:
        with open(path, "rb") as f:
            compile(f.read(), path, "exec")
    except SyntaxError as exc:
        raise GradvizError(
            f"{path} line {exc.lineno}: {exc.msg}; it does not compile, so it was not run."
        ) from None
    except (OSError, ValueError) as exc:
        raise GradvizError(f"{path} cannot be read: {exc}.") from None


def _where_it_failed(exc: Exception, script: str) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == script]
    line = f" at line {frames[-1].lineno}" if frames else ""
    text = str(exc).splitlines()[0][:200] if str(exc) else ""
    return f"stopped with {type(exc).__name__}{line}" + (f": {text}" if text else "")


def _report(args, origin, step, intervals: int, failure: str | None) -> None:
    if origin is None:
        print(f"{args.script}: no non-finite value ({intervals:,} logged steps traced).")
    else:
        at = f"step {step}" if step is not None else "the traced run"
        print(f"{args.script}: the first non-finite value appeared in {at}.")
        print(origin.words())
        for event in origin.events[:4]:
            node = f" ({event.node})" if event.node else ""
            print(f"  then {event.phase} {event.op}{node} {event.module or '-'}: {event.kind}")
        if failure is not None:
            print(f"(the script then {failure})")
    if args.json:
        summary = {
            "script": args.script,
            "found": origin is not None,
            "step": step,
            "steps_traced": intervals,
            "origin": None if origin is None else origin.to_dict(),
            "script_error": failure,
        }
        print(json.dumps(summary, separators=(",", ":")))
