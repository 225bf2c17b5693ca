"""The desktop app (Qt). Nothing here is imported by gradviz.core."""

from gradviz.gui.shell import pyside_hook

pyside_hook.install()  # before pyqtgraph and torch are imported behind it
