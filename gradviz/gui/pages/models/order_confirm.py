"""The choice offered for a whole pickled module of a class of its own: its forward is not
in the file, so gradviz lists the order its layers would run in, and runs them so only when
the user confirms that this is what the class's forward does."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QLabel, QPushButton, QVBoxLayout, QWidget

#: Layers listed by name at most; the rest are counted.
MAX_LISTED = 40


def order_text(order: tuple[str, ...]) -> str:
    """The layers as an arrow chain, the first MAX_LISTED by name."""
    shown = " → ".join(order[:MAX_LISTED])
    if len(order) > MAX_LISTED:
        shown += f" → … ({len(order) - MAX_LISTED} more)"
    return shown


class OrderConfirmation(QWidget):
    """The assumed order, a "Run these layers in this order" button (``confirmed``) and an
    "Open with model class…" button (``classWanted``: run the weights in the user's code)."""

    confirmed = Signal()
    classWanted = Signal()
    installedWanted = Signal()  # run it in the installed class the file names (trust)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("model-order")
        self.intro = QLabel()
        self.intro.setWordWrap(True)
        self.order = QLabel()
        self.order.setObjectName("model-order-layers")
        self.order.setWordWrap(True)
        self.button = QPushButton("Run these layers in this order")
        self.button.setToolTip(
            "Reload the file and run its layers one after another in the order listed. "
            "Right only if the class's forward does exactly that (no skip connections, no "
            "reused or reordered layers)."
        )
        self.class_button = QPushButton("Open with model class…")
        self.class_button.setToolTip("Run the file's weights in your own class (runs your code)")
        self.installed_button = QPushButton("Use the installed class…")
        self.installed_button.setToolTip(
            "Rebuild the module from the installed class the file names and run its forward "
            "(asks first: importing it runs that package's code)"
        )
        # One above the other: side by side, a narrow panel cut both labels
        # ("hese layers in this", "en with model clas").
        buttons = QVBoxLayout()
        buttons.addWidget(self.button)
        buttons.addWidget(self.class_button)
        buttons.addWidget(self.installed_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.intro)
        layout.addWidget(self.order)
        layout.addLayout(buttons)
        self.button.clicked.connect(self.confirmed)
        self.class_button.clicked.connect(self.classWanted)
        self.installed_button.clicked.connect(self.installedWanted)

    def show_order(self, order: tuple[str, ...], installed: str | None = None) -> None:
        """``installed``: the sentence naming the installed class the file's module could
        be rebuilt from (its button shows only then)."""
        self.intro.setText(
            "The module is of a class of its own and its forward is not in the file. If its "
            "forward runs these layers one after another, run them so; otherwise open the "
            "weights with your model class (your code), or save the model as TorchScript or "
            ".pt2." + (f" {installed}" if installed else "")
        )
        self.order.setText(order_text(order))
        self.installed_button.setVisible(bool(installed))
