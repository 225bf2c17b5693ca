"""The Jacobian explorer: a tab that shows per-input Jacobians of a small network.

``ExplorerTab`` is the widget; see its docstring for the public API (``set_network``,
``failed``, ``shutdown``). Nothing here imports torch at import time: the computation
imports it on the worker thread.
"""

from gradviz.gui.pages.explorer.explorer_tab import ExplorerTab

__all__ = ["ExplorerTab"]
