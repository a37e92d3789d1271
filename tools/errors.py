"""Errors that mean "the user's input is bad". The CLI prints `str(err)` as one line and exits 2."""


class KilnInputError(Exception):
    """A missing file, a broken problem or candidate, a signature mismatch: one clear line."""


class KilnConfigError(Exception):
    """A bad option, a missing provider package or key: one clear line."""
