"""Accounting: what a run spends and scores — the ledger and its price table, the budget that
caps spending, and the statistics over rollouts (pass@1, pass@k, paired comparisons).
Pure bookkeeping: no process, no git, no rollout machinery.
"""
