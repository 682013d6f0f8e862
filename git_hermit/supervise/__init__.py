"""Process supervision: the one runner for every child git-hermit starts (``process``, its guard
server ``_guard.py``), the bubblewrap sandbox with its network bridge, and the scratch directories
of rollouts and learner sessions. Below rollouts and learners, which both start children here.
"""
