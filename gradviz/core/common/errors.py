"""The one error type that carries a message meant for a person."""


class GradvizError(Exception):
    """Bad input or an impossible request, stated as one sentence that says what to do.

    The CLI prints it on stderr and exits 2; the GUI shows it in a dialog. Anything else
    that escapes is a bug.
    """
