"""A cheaper answer for PySide6's import hook, which asks of every module imported after it
whether the module's source mentions "PySide6" (for ``from __feature__ import ...``).

PySide6 answers with ``inspect.getsource(module)``: it reads, decodes and line-splits each
module's whole source through linecache (and keeps it there). On gradviz's start-up that is
every pyqtgraph module on the GUI thread before the window can paint, then torch's ~1,300
modules on the loading thread, each read holding the GIL the window needs to paint. Reading
the file's bytes and searching them gives the same answer (Python source is ASCII-compatible,
so the characters "PySide6" appear iff their bytes do) at a fraction of the cost; modules
without a ``.py`` file keep PySide6's own answer.
"""

from __future__ import annotations

import sys
from types import ModuleType

_MARK = "_gradviz_reads_bytes"


def install() -> bool:
    """Replace the hook's source check; False where this PySide6 has no such check (then
    nothing changes) or it is replaced already."""
    import PySide6.QtCore  # noqa: F401 - the hook arrives with PySide6

    feature = sys.modules.get("shibokensupport.feature")
    original = getattr(feature, "_mod_uses_pyside", None)
    if original is None or getattr(original, _MARK, False):
        return False

    def uses_pyside(module: ModuleType) -> bool:
        try:
            path = getattr(module, "__file__", None)
        except Exception:  # a module object of its own kind (torch.classes raises RuntimeError)
            path = None
        if not isinstance(path, str) or not path.endswith(".py"):
            return original(module)
        try:
            with open(path, "rb") as source:
                return b"PySide6" in source.read()
        except OSError:
            return original(module)

    setattr(uses_pyside, _MARK, True)
    feature._mod_uses_pyside = uses_pyside
    return True
