"""Placeholder: the helper that owns this command replaces this file."""

import typer


def check() -> None:
    """Not implemented yet."""
    raise typer.Exit(3)
