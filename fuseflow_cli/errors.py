"""The command line's error for bad input."""


class UserError(Exception):
    """An error in what the user asked for; the CLI prints it without a traceback."""
