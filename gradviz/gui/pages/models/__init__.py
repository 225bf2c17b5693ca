"""Opening and saving models in the desktop app: File > Open model, drag-and-drop, recent
models, the trust confirmation, the model panel (layers, assumptions) and Save network.

``ModelOpener`` is the controller; nothing here imports torch at import time (the loading
runs on worker threads through ``gradviz.core.modelio``).
"""

from gradviz.gui.pages.models.open_model import ModelOpener

__all__ = ["ModelOpener"]
