"""Where a non-finite value starts: the operation, module, source line and cause.

``trace_nonfinite`` (a dispatch mode over any code) and ``find_origin`` are the library's;
``modules`` holds the module-level check of ``gradviz.watch`` (every module's output and the
gradient reaching it), run at every step or, where the loop allows it, only on a bad step
run again (``replay``).
"""

from gradviz.core.origin.result import Event, Origin
from gradviz.core.origin.tracer import find_origin, trace_nonfinite

__all__ = ["Event", "Origin", "find_origin", "trace_nonfinite"]
