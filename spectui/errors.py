"""Errors a user can act on. The CLI prints `str(error)` as one line and exits non-zero."""


class SpectuiError(Exception):
    exit_code = 1


class ModelError(SpectuiError):
    """Unknown model, bad weights, offline hub, vocabulary mismatch."""

    exit_code = 2


class UsageError(SpectuiError):
    """An option out of range."""

    exit_code = 2
