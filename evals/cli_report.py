"""Placeholder: the helper that owns this command replaces this file."""

import typer


def report() -> None:
    """Not implemented yet."""
    raise typer.Exit(3)
