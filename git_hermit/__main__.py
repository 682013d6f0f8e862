"""``python -m git_hermit`` runs the CLI (same as the ``git-hermit`` executable)."""

from git_hermit.launcher import main

main()
