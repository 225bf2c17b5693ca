"""The setup form's network: its spec text and its editor kept as one, its output width tied
to D, and the gradients of the run on screen drawn on it.

The form's ``{name}_spec`` parameter is the text (the expert's way in); the NetworkEditor
under it is the same network drawn and edited by clicks. A click writes the text; the text,
as typed, redraws the diagram, or (where it does not parse) leaves it on the last valid
network and says so. The network's output width is D, the points' dimension: a change of
D (or a point file that sets it) rewrites the last width of a valid spec. A spec typed with
another last width is left as typed; the form's problem line says what to change.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from gradviz.core.common.errors import GradvizError
from gradviz.core.lab.snapshot import Snapshot
from gradviz.core.nets.chain_edits import spec_text, with_output_width
from gradviz.core.nets.layer_gradients import layer_gradients
from gradviz.core.nets.networks import NetworkSpec
from gradviz.gui.widgets.network_editor import NO_GRADIENTS, NetworkEditor

OUTPUT_LOCK = (
    "The output width is D, each point's number of coordinates: change D under Target "
    "points (a point file sets it) and the network follows."
)


def lab_input_words(width: int) -> str:
    return (
        f"{width:,} feature{'s' if width != 1 else ''} per point: seeded standard-normal "
        "numbers, fixed for the run, that the network maps to the point's coordinates"
    )


def lab_output_words(width: int) -> str:
    return f"{width:,} = D, the coordinates of each point"


def gradient_step_words(snapshot: Snapshot) -> str:
    """Which gradients a snapshot's parameter fields hold, in the status bar's terms: those of
    step k (its loss is the last of the history), or those of the weights after k steps."""
    history, loss = snapshot.loss_history, snapshot.loss
    if len(history) and (history[-1] == loss or (math.isnan(history[-1]) and math.isnan(loss))):
        return f"step {len(history) - 1:,}"
    if snapshot.step == 0:
        return "step 0"
    return f"the weights after {snapshot.step:,} steps"


class FormNetwork:
    """The network editor of setting ``name`` of a SetupForm (see the module docstring).

    ``text_param()`` is the spec parameter; ``dim()`` the D the form shows; ``set_text(t)``
    writes the spec text as the user would (the form then validates and says ``changed``).
    """

    def __init__(
        self,
        text_param: Callable[[], object],
        dim: Callable[[], int],
        set_text: Callable[[str], None],
    ) -> None:
        self._text_param, self._dim, self._set_text = text_param, dim, set_text
        self.editor = NetworkEditor(lab_input_words, lab_output_words, OUTPUT_LOCK)
        self.editor.setObjectName("lab-network-editor")
        self.editor.specEdited.connect(self._set_text)

    def show_text(self, text: str) -> None:
        """The spec text now (typed or set): draw it, or keep the last valid network."""
        try:
            spec = NetworkSpec.parse(text)
        except GradvizError as exc:
            self.editor.set_stale(str(exc))
            return
        self.editor.set_spec(spec)

    def following_dim(self, text: str) -> str | None:
        """``text`` with its last width set to the form's D, or None where it parses not
        or ends in D already."""
        try:
            spec = NetworkSpec.parse(text)
        except GradvizError:
            return None
        dim = self._dim()
        return None if spec.out_dim == dim else spec_text(with_output_width(spec, dim))

    def show_gradients(self, snapshot: Snapshot | None, run_net: str | None) -> None:
        """Draw the gradients of ``snapshot`` (on screen) where its run's network
        (``run_net``, None: free coordinates) is the one in the editor; else say why not."""
        shown = self.editor.spec
        if snapshot is None or shown is None:
            self.editor.show_gradients(None, NO_GRADIENTS)
            return
        if not snapshot.param_health:
            self.editor.show_gradients(
                None, "The picture on screen holds no parameter gradients (a recording)."
            )
            return
        if run_net is None:
            self.editor.show_gradients(
                None, "The run on screen fits free coordinates; Reset runs this network."
            )
            return
        try:
            same = NetworkSpec.parse(run_net) == shown
        except GradvizError:
            same = False
        gradients = layer_gradients(shown, snapshot.param_health, snapshot.param_norms)
        if not same or gradients is None:
            self.editor.show_gradients(
                None, f"The run on screen has the network {run_net}; Reset runs this one."
            )
            return
        self.editor.show_gradients(gradients, gradient_step_words(snapshot))
