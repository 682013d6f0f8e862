"""Rollouts: run an adapter version on a benchmark's rows — tasks and rows files, the acting-agent
backends, judges, and the runner that schedules one worker per row on an executor (threads or
Dask). Starting children, counting cost and reading trajectories live below, in ``supervise``,
``accounting`` and ``trajectories``."""
