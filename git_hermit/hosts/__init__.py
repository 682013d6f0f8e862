"""The host plugin layer: the ``Host`` protocol (base.py, with the hook wire's shared part in
wire.py), one package per coding-agent CLI (codex/, claude_code/, pi/: the Host with its wire
and capability rows in ``__init__``, its trajectory reader in ``trajectory.py``, its plugin
layout in ``layout.py``) and the one table listing them (registry.py). The protocol and table
sit below rollouts, adapter and the trajectory readers; a host package sits above adapter and
trajectories (it uses their generic parts) and is reached only through the table. The tooling
that runs real hosts lives in hostkit/.
"""
