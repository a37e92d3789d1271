"""Placeholder: the helper that owns this command replaces this file."""

import typer


def run() -> None:
    """Not implemented yet."""
    raise typer.Exit(3)
