"""The host plugin layer: the ``Host`` protocol (base.py), one module per coding-agent CLI
(codex.py, claude_code.py, pi.py) and the one table listing them (registry.py). Below
rollouts, adapter and learners; the tooling that runs real hosts lives in hostkit/.
"""
