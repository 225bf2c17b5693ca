"""Error dialogs are wide enough for their whole title ("the mod... d not be opened")."""

from __future__ import annotations

from gradviz.gui.shell.dialogs import TITLE_BAR_EXTRA, ErrorDialog, title_width


def test_an_error_dialog_has_room_for_its_whole_title_however_it_is_set(qtbot):
    dialog = ErrorDialog("The file is not a model.", "", "/tmp/gradviz.log")
    qtbot.addWidget(dialog)
    for title in (
        "gradviz: the model could not be opened",
        "gradviz: the experiment file was not opened because its settings do not validate",
    ):
        dialog.setWindowTitle(title)  # as the callers name what failed, after construction
        dialog.show()
        qtbot.waitExposed(dialog)
        assert dialog.windowTitle() == title
        assert dialog.width() >= title_width(title) + TITLE_BAR_EXTRA
