class UserError(Exception):
    """A mistake the user can fix; the CLI prints it as one line, without a traceback."""
