"""Exceptions shared by the command line and the library."""


class UserError(Exception):
    """An error in what the user asked for; the CLI prints it without a traceback."""
