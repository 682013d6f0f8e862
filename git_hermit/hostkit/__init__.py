"""Tooling that runs the real host CLIs: a scripted model server to run them against, one-session
runners (the host modules' own session, pointed at that server), conformance checks of the seed
host table, the doctor report built on them, and `hosts install`. Sits above hosts/ (the plugin
layer it reads every host from) beside rollouts/ and adapter/.
"""
