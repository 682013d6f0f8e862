"""Command-line interface: click commands only (parse, call core, render, map errors)."""

import click


@click.group()
def main() -> None:
    """git hermit — evolve a coding agent's adapter in a git-native loop."""
