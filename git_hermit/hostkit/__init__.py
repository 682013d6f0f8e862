"""The real host CLIs (Codex, Claude Code): where they are installed, a scripted model
server to run them against, one-session runners, conformance checks of the seed host
table, and the doctor report built on them.
"""
