"""check_spec: the static rules an adapter must keep, per template (template.yaml `checks`).

Each rule reads the adapter's files (Python through `ast`, front matter through
`yaml.safe_load`) and reports every broken rule as ``path:line: rule: what is wrong``. Only
``error`` violations fail a check; ``warning`` ones are advice. The rules live in ``rules/``
(common ones, then one module per template); host checks (running the hooks the way each host
does) live in ``hostcheck`` and run only with ``hosts=True``. This module sits above both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from git_hermit.adapter.front_matter import FrontMatter, FrontMatterError, parse_front_matter
from git_hermit.adapter.rules import ahe, common, continual_harness, evo_harness
from git_hermit.adapter.rules.view import AdapterView, Rule
from git_hermit.adapter.templates import Template
from git_hermit.adapter.violations import ERROR, WARNING, Violation, has_errors
from git_hermit.errors import InputError, SchemaError

__all__ = ["ERROR", "WARNING", "RULES", "FrontMatter", "FrontMatterError", "Rule", "Violation",
           "check_adapter", "describe_rules", "has_errors", "parse_front_matter"]


def _join(*rule_sets: Mapping[str, Rule]) -> dict[str, Rule]:
    table: dict[str, Rule] = {}
    for rules in rule_sets:
        clash = table.keys() & rules.keys()
        if clash:
            raise ValueError(f"check rule {sorted(clash)[0]!r} is defined by two rule modules")
        table.update(rules)
    return table


# Every rule a template.yaml may name, by id.
RULES: dict[str, Rule] = _join(common.RULES, ahe.RULES, continual_harness.RULES, evo_harness.RULES)


def check_adapter(adapter_dir: Path, template: Template, *, hosts: bool = False,
                  limits: Mapping[str, int] | None = None, run_host: str | None = None) -> list[Violation]:
    """Run the template's static rules on ``adapter_dir``; sorted by path, then line.

    ``limits`` overrides the template's limits (an evolver's params, e.g. general_min_tasks).
    With ``hosts=True`` the host checks of ``git_hermit.adapter.hostcheck`` run too, when
    that module is installed; otherwise a warning says they were skipped. ``run_host`` is the
    run's host, when there is a run (see ``hostcheck.check_hosts``).
    """
    adapter_dir = Path(adapter_dir)
    if not adapter_dir.is_dir():
        raise InputError(f"adapter directory {adapter_dir} does not exist",
                         hint="pass the directory that holds the adapter's files")
    unknown = [rule_id for rule_id in template.checks if rule_id not in RULES]
    if unknown:
        raise SchemaError(f"template {template.id} names unknown check {unknown[0]!r}",
                          hint="known checks: " + ", ".join(sorted(RULES)))
    adapter = AdapterView(adapter_dir, template, {**template.limits, **(limits or {})})
    violations: list[Violation] = []
    for rule_id in template.checks:
        violations.extend(RULES[rule_id].run(adapter))
    if hosts:
        violations.extend(_host_violations(adapter_dir, run_host))
    return sorted(violations, key=lambda v: (v.path, v.line))


def describe_rules() -> dict[str, str]:
    """Rule id -> one line saying what it requires (for `git hermit check --list` and prompts)."""
    return {rule_id: rule.description for rule_id, rule in sorted(RULES.items())}


def _host_violations(adapter_dir: Path, run_host: str | None) -> list[Violation]:
    try:
        from git_hermit.adapter import hostcheck  # lazy: it runs hooks; absent in a static install
    except ImportError:
        return [Violation(".", 1, "hosts", "host checks skipped: git_hermit.adapter.hostcheck is "
                          "not installed", WARNING)]
    return list(hostcheck.check_hosts(adapter_dir, run_host))
