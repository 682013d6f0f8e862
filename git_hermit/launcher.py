"""The ``git-hermit`` executable's entry point: answer the cheap questions before importing the CLI.

A TAB in the shell (``_GIT_HERMIT_COMPLETE``) and ``--version`` are answered without importing
click or the command modules, so completion stays within a few Python start-ups; everything
else goes to ``git_hermit.cli.main``.
"""

from __future__ import annotations

import os
import sys

from git_hermit import __version__

COMPLETE_VAR = "_GIT_HERMIT_COMPLETE"   # = completer.COMPLETE_VAR; not imported from there, so --version stays cheap


def main() -> None:
    if os.environ.get(COMPLETE_VAR):
        from git_hermit.completer import answer
        sys.exit(answer())
    if sys.argv[1:] in (["--version"], ["-V"]):
        print(f"git-hermit, version {__version__}")   # the same line click's version option prints
        sys.exit(0)
    from git_hermit.cli import main as cli_main
    cli_main()
