"""check_spec: every static rule passes on a good adapter and fails, at the right place, on a
broken one. Each case starts from the template's real seed adapter written by write_seed."""

from __future__ import annotations

import dataclasses
import sys
import types
from pathlib import Path
from typing import Callable

import pytest

from git_hermit import resources
from git_hermit.adapter.check_spec import (
    RULES, Violation, check_adapter, describe_rules, has_errors, parse_front_matter, FrontMatterError,
)
from git_hermit.adapter.templates import list_templates, load_template, write_seed
from git_hermit.errors import InputError, SchemaError

HOOK_FILES = ("hooks.json", "hook_runner.py", "hermit_hooks.py")
HOOKS_READY = all((resources.hooks_dir() / "agent" / n).is_file() for n in HOOK_FILES)


def seed(tmp_path: Path, template_id: str) -> Path:
    if template_id == "ahe@1.0" and not HOOKS_READY:
        pytest.skip("hooks/agent/ runtime not written yet")
    dest = tmp_path / "adapter"
    write_seed(load_template(template_id), dest)
    return dest


def run(adapter: Path, template_id: str, **kwargs) -> list[Violation]:
    return check_adapter(adapter, load_template(template_id), **kwargs)


def of_rule(violations: list[Violation], rule: str) -> list[str]:
    return [str(v) for v in violations if v.rule == rule]


def edit(rel: str, change: Callable[[str], str]) -> Callable[[Path], None]:
    def apply(adapter: Path) -> None:
        path = adapter / rel
        path.write_text(change(path.read_text()))
    return apply


def write(rel: str, text: str) -> Callable[[Path], None]:
    def apply(adapter: Path) -> None:
        (adapter / rel).parent.mkdir(parents=True, exist_ok=True)
        (adapter / rel).write_text(text)
    return apply


def delete(rel: str) -> Callable[[Path], None]:
    return lambda adapter: (adapter / rel).unlink()


def both(*changes: Callable[[Path], None]) -> Callable[[Path], None]:
    def apply(adapter: Path) -> None:
        for change in changes:
            change(adapter)
    return apply


def in_context(change: Callable[[str], str]) -> Callable[[Path], None]:
    """Edit AGENTS.md and keep ADAPTER.md equal, so only the rule under test can break."""
    return both(edit("AGENTS.md", change), lambda a: (a / "ADAPTER.md").write_text((a / "AGENTS.md").read_text()))


SEED_RULES = load_template("ahe@1.0").settings["seed_rules"]
MEMORY_HEADER = load_template("ahe@1.0").settings["memory_header"]


def managed_skill(name: str, level: str = "topic", ids: str = "[train-0]",
                  body: str = "Do the thing.") -> Callable[[Path], None]:
    return write(f"skills/{name}/SKILL.md", f"---\nname: {name}\ndescription: When it applies\nflashrsi:\n"
                                            f"  algorithm: evo_harness\n  level: {level}\n"
                                            f"  source_task_ids: {ids}\n---\n\n{body}\n")


def at(rel: str, needle: str, rest: str) -> Callable[[Path], str]:
    """Expect ``rel:<first line containing needle>: rest`` in the changed adapter."""
    def expected(adapter: Path) -> str:
        lines = (adapter / rel).read_text().splitlines()
        return f"{rel}:{next(i for i, line in enumerate(lines, 1) if needle in line)}: {rest}"
    return expected


def bad_yaml_skill(adapter: Path) -> None:
    write(".agents/skills/debug-failing-test/SKILL.md", "---\nname: debug-failing-test\ndescription: [oops\n---\nx\n")(adapter)


# (template, rule, change, expected "path:line: rule:" prefixes of the violations of that rule)
FAILING = [
    ("ahe@1.0", "required-files", delete("MEMORY.md"), ["MEMORY.md:1: required-files: missing"]),
    ("continual-harness@1.0", "required-files", delete("memory/NOTES.md"), ["memory/NOTES.md:1: required-files:"]),
    ("evo-harness@1.0", "required-files", delete("AGENTS.md"), ["AGENTS.md:1: required-files:"]),
    # 100-byte lines: line 327 is the first to end past byte 32,651, which leaves the 117 bytes deploy
    # appends for Codex (where the seed's files and scripts went) within the 32,768 Codex reads
    ("ahe@1.0", "context-size", write("AGENTS.md", ("x" * 99 + "\n") * 400),
     ["AGENTS.md:327: context-size: is 40000 bytes, over the limit of 32651 (the host reads 32768, "
      "and deploy adds 117 after it)"]),
    ("continual-harness@1.0", "context-size", write("AGENTS.md", ("b" * 79 + "\n") * 100 + "c"),
     ["AGENTS.md:101: context-size: is 8001 characters, over the limit of 8000"]),
    # 50 two-byte characters and a newline: 101 bytes a line, so line 324 crosses 32,714 bytes (the
    # 32,768 Codex reads, less the 54 bytes of deploy's footer)
    ("evo-harness@1.0", "context-size", write("AGENTS.md", ("é" * 50 + "\n") * 400),
     ["AGENTS.md:324: context-size: is 40400 bytes"]),
    ("ahe@1.0", "adapter-md-equal", edit("ADAPTER.md", lambda t: t.replace("autonomous", "careful")),
     ["ADAPTER.md:3: adapter-md-equal: differs from AGENTS.md"]),
    ("ahe@1.0", "adapter-md-equal", edit("ADAPTER.md", lambda t: t + "extra\n"), [at("ADAPTER.md", "extra", "adapter-md-equal: differs")]),
    ("continual-harness@1.0", "adapter-md-equal", delete("ADAPTER.md"),
     ["ADAPTER.md:1: adapter-md-equal: missing: it must be a copy of AGENTS.md"]),
    ("ahe@1.0", "memory-header", edit("MEMORY.md", lambda t: "# Memory\n" + t.split("\n", 1)[1]),
     ["MEMORY.md:1: memory-header: the first line must be the header"]),
    ("ahe@1.0", "memory-header", write("MEMORY.md", ""), ["MEMORY.md:1: memory-header:"]),
    ("ahe@1.0", "memory-entries", edit("MEMORY.md", lambda t: t + "\nA loose paragraph.\n- \n"),
     ["MEMORY.md:8: memory-entries: not a memory entry", "MEMORY.md:9: memory-entries: empty entry"]),
    ("ahe@1.0", "memory-entries", edit("MEMORY.md", lambda t: t.split("\n", 1)[0] + "\n  indented first\n"),
     ["MEMORY.md:2: memory-entries: not a memory entry"]),
    ("ahe@1.0", "python-syntax", write("scripts/broken.py", "import os\ndef f(:\n"),
     ["scripts/broken.py:2: python-syntax: does not parse"]),
    ("ahe@1.0", "python-syntax", write(".agents/skills/debug-failing-test/scripts/a/b.py", "x = (\n"),
     [".agents/skills/debug-failing-test/scripts/a/b.py:1: python-syntax:"]),
    ("continual-harness@1.0", "python-syntax", edit(".agents/skills/run-tests/scripts/run_tests.py", lambda t: t + "\n)\n"),
     [".agents/skills/run-tests/scripts/run_tests.py:"]),
    ("evo-harness@1.0", "python-syntax", write("skills/verify-before-finishing/check.py", "def\n"),
     ["skills/verify-before-finishing/check.py:1: python-syntax:"]),
    ("ahe@1.0", "middleware-functions", edit("middleware.py", lambda t: t.replace("def stop(", "def stopped(")),
     ["middleware.py:1: middleware-functions: stop is not defined"]),
    ("ahe@1.0", "middleware-functions", edit("middleware.py", lambda t: t.replace("def before_model(", "async def before_model(")),
     [at("middleware.py", "async def before_model(", "middleware-functions: before_model is async")]),
    ("ahe@1.0", "middleware-functions", edit("middleware.py", lambda t: t.replace("def after_tool(inp: HookInput)", "def after_tool(inp, state)")),
     [at("middleware.py", "def after_tool(", "middleware-functions: after_tool must take the HookInput")]),
    ("ahe@1.0", "middleware-functions", edit("middleware.py", lambda t: t.replace("def stop(inp: HookInput)", "def stop()")),
     [at("middleware.py", "def stop(", "middleware-functions: stop must take")]),
    ("ahe@1.0", "middleware-functions", edit("middleware.py", lambda t: t.replace("def stop(inp: HookInput)", "def stop(inp, *, strict)")),
     [at("middleware.py", "def stop(", "middleware-functions: stop must take")]),
    ("ahe@1.0", "middleware-process", edit("middleware.py", lambda t: t + "\n\ndef _bail():\n    os._exit(2)\n"),
     [at("middleware.py", "os._exit(2)", "middleware-process: uses os._exit")]),
    ("ahe@1.0", "middleware-process", edit("middleware.py", lambda t: t + "\nimport signal\nsignal.alarm(1)\n"),
     [at("middleware.py", "import signal", "middleware-process: imports 'signal'"),
      at("middleware.py", "signal.alarm", "middleware-process: uses signal.alarm")]),
    ("ahe@1.0", "middleware-process", edit("middleware.py", lambda t: t + "\nos.kill(os.getppid(), 9)\n"),
     [at("middleware.py", "os.kill(", "middleware-process: uses os.kill")]),
    ("ahe@1.0", "middleware-process", edit("middleware.py", lambda t: t + "\nfrom os import _exit as leave\n"),
     [at("middleware.py", "from os import _exit", "middleware-process: imports os._exit")]),
    ("ahe@1.0", "middleware-process", edit("middleware.py", lambda t: t + "\ngetattr(os, '_exit')(2)\n"),
     [at("middleware.py", "getattr(os", "middleware-process: looks up '_exit'")]),
    ("ahe@1.0", "middleware-process", edit("middleware.py", lambda t: t + "\nimport ctypes\n"),
     [at("middleware.py", "import ctypes", "middleware-process: imports 'ctypes'")]),
    ("ahe@1.0", "middleware-process", edit("middleware.py", lambda t: t + "\nimport sys\nsys.exit(2)\n"),
     [at("middleware.py", "sys.exit(2)", "middleware-process: uses sys.exit")]),
    ("ahe@1.0", "middleware-imports", edit("middleware.py", lambda t: t.replace("import os\n", "import os\nimport requests\n")),
     [at("middleware.py", "import requests", "middleware-imports: imports 'requests'")]),
    ("ahe@1.0", "middleware-imports", edit("middleware.py", lambda t: t.replace("import os\n", "import os\nfrom yaml.loader import SafeLoader\n")),
     [at("middleware.py", "from yaml", "middleware-imports: imports 'yaml.loader'")]),
    ("ahe@1.0", "middleware-imports", edit("middleware.py", lambda t: t.replace("import os\n", "import os\nfrom . import helpers\n")),
     [at("middleware.py", "from . import", "middleware-imports: relative import '.'")]),
    ("ahe@1.0", "middleware-imports", edit("middleware.py", lambda t: t + "\n\ndef _late():\n    import importlib\n"
                                                                            "    return importlib.import_module('numpy')\n"),
     [at("middleware.py", "import_module('numpy')", "middleware-imports: imports 'numpy'")]),
    ("ahe@1.0", "middleware-imports", edit("middleware.py", lambda t: t + "\nhook_hosts = __import__('hook_hosts')\n"),
     [at("middleware.py", "__import__", "middleware-imports: imports 'hook_hosts'")]),
    ("ahe@1.0", "memory-at-session-start",
     edit("middleware.py", lambda t: t.replace("if os.path.isfile(MEMORY_FILE):", "if True:")
          .replace("entries = memory_entries(read_text(MEMORY_FILE))", "entries = []")),
     [at("middleware.py", "def session_start(", "memory-at-session-start: session_start no longer reads MEMORY.md")]),
    ("ahe@1.0", "front-matter", write(".agents/skills/debug-failing-test/SKILL.md", "# no front matter\n"),
     [".agents/skills/debug-failing-test/SKILL.md:1: front-matter: does not start with a '---' front-matter block"]),
    ("ahe@1.0", "front-matter", write(".agents/skills/debug-failing-test/SKILL.md", "---\nname: x\n"),
     [".agents/skills/debug-failing-test/SKILL.md:1: front-matter: the front matter is not closed"]),
    ("ahe@1.0", "front-matter", bad_yaml_skill,
     [".agents/skills/debug-failing-test/SKILL.md:3: front-matter: the front matter is not valid YAML"]),
    ("ahe@1.0", "front-matter", write(".agents/skills/debug-failing-test/SKILL.md", "---\n- a\n---\n"),
     [".agents/skills/debug-failing-test/SKILL.md:2: front-matter: the front matter is not a YAML mapping"]),
    ("ahe@1.0", "front-matter", edit(".agents/skills/debug-failing-test/SKILL.md", lambda t: t.replace("name: debug-failing-test", "name: debug")),
     [".agents/skills/debug-failing-test/SKILL.md:2: front-matter: name 'debug' does not match its file's name 'debug-failing-test'"]),
    ("ahe@1.0", "front-matter", edit("agents/reviewer.md", lambda t: t.replace("name: reviewer", "name: Code Reviewer")),
     ["agents/reviewer.md:2: front-matter: name 'Code Reviewer' must be lowercase"]),
    ("ahe@1.0", "front-matter", edit("agents/reviewer.md", lambda t: t.replace("description:", "summary:")),
     ["agents/reviewer.md:1: front-matter: 'description' is missing or empty"]),
    ("ahe@1.0", "front-matter", edit("agents/reviewer.md", lambda t: t.replace("name: reviewer\n", "")),
     ["agents/reviewer.md:1: front-matter: 'name' is missing or empty"]),
    ("ahe@1.0", "front-matter", edit("agents/reviewer.md", lambda t: t.replace("description: ", "description: " + "d" * 1100)),
     ["agents/reviewer.md:3: front-matter: description is"]),
    ("ahe@1.0", "front-matter", write(".agents/skills/empty/README.md", "x"),
     [".agents/skills/empty:1: front-matter: has no SKILL.md"]),
    ("continual-harness@1.0", "front-matter", edit("sub_agents/reviewer/AGENT.md", lambda t: t.replace("name: reviewer", "name: critic")),
     ["sub_agents/reviewer/AGENT.md:2: front-matter: name 'critic' does not match"]),
    ("evo-harness@1.0", "front-matter", edit("skills/verify-before-finishing/SKILL.md", lambda t: t.replace("description: ", "description:  \n#")),
     ["skills/verify-before-finishing/SKILL.md:3: front-matter: 'description' is missing or empty"]),
    ("ahe@1.0", "fixed-file", edit("hook_runner.py", lambda t: t + "# tweak\n"),
     ["hook_runner.py:1: fixed-file: was changed"]),
    ("ahe@1.0", "fixed-file", delete("hooks.json"), ["hooks.json:1: fixed-file: missing"]),
    ("ahe@1.0", "unknown-file", write("notes.txt", "x"), ["notes.txt:1: unknown-file:"]),
    ("ahe@1.0", "unknown-file", write("scripts/lib/util.py", "x = 1\n"), ["scripts/lib/util.py:1: unknown-file:"]),
    ("continual-harness@1.0", "memory-notes",
     edit("memory/NOTES.md", lambda t: t + "\n## running   COMMANDS\nagain\n\n##\ntext\n\n## Empty\n\n# Title again\n"),
     ["memory/NOTES.md:11: memory-notes: topic 'running   COMMANDS' appears twice (first at line 6)",
      "memory/NOTES.md:14: memory-notes: a '## ' heading needs a topic",
      "memory/NOTES.md:17: memory-notes: topic 'Empty' has no note under it",
      "memory/NOTES.md:19: memory-notes: only the first line may be a '# ' title"]),
    ("continual-harness@1.0", "memory-notes", edit("memory/NOTES.md", lambda t: t + "\n## Last\n"),
     ["memory/NOTES.md:11: memory-notes: topic 'Last' has no note under it"]),
    ("continual-harness@1.0", "subagent-size",
     edit("sub_agents/reviewer/AGENT.md", lambda t: t + "z" * (12000 - len(parse_front_matter(t).body.strip()))),
     ["sub_agents/reviewer/AGENT.md:5: subagent-size: instructions are 12001 characters, over the limit of 12000"]),
    ("evo-harness@1.0", "provenance",
     write("skills/a/SKILL.md", "---\nname: a\ndescription: d\nflashrsi: yes\n---\nbody\n"),
     ["skills/a/SKILL.md:4: provenance: 'flashrsi' must be a mapping"]),
    ("evo-harness@1.0", "provenance",
     write("skills/a/SKILL.md", "---\nname: a\ndescription: d\nflashrsi:\n  algorithm: gepa\n  level: global\n"
                                "  source_task_ids: [t1, t1, '', 3]\n---\nbody\n"),
     ["skills/a/SKILL.md:4: provenance: 'flashrsi.algorithm' is 'gepa', not 'evo_harness'",
      "skills/a/SKILL.md:4: provenance: 'flashrsi.level' is 'global'",
      "skills/a/SKILL.md:4: provenance: 'flashrsi.source_task_ids' holds ''",
      "skills/a/SKILL.md:4: provenance: 'flashrsi.source_task_ids' lists task 't1' twice"]),
    ("evo-harness@1.0", "provenance", managed_skill("a", ids="[]"),
     ["skills/a/SKILL.md:4: provenance: 'flashrsi.source_task_ids' must be a non-empty list"]),
    ("evo-harness@1.0", "general-support", managed_skill("g", level="general", ids="[t1, t2, t2]"),
     ["skills/g/SKILL.md:4: general-support: a general skill needs at least 3 distinct source tasks; it cites 2"]),
    ("evo-harness@1.0", "skill-size", managed_skill("big", body="w" * 2001),
     ["skills/big/SKILL.md:9: skill-size: the body is 2001 characters, over max_skill_chars 2000"]),
    ("evo-harness@1.0", "library-size",
     both(*(managed_skill(f"s{i}", body="b" * 1990) for i in range(25))),
     ["skills:1: library-size: the managed skills total"]),
    ("evo-harness@1.0", "library-count",
     both(*(managed_skill(f"g{i}", level="general", ids="[a, b, c]") for i in range(11))),
     ["skills:1: library-count: 11 general skills, over max_general_skills 10"]),
    ("evo-harness@1.0", "skill-shadow", write("skills/verify-before-finishing.md", "flat skill\n"),
     ["skills/verify-before-finishing/SKILL.md:1: skill-shadow: shadows the flat skill skills/verify-before-finishing.md"]),
]
FAILING += [
    ("ahe@1.0", "seed-rules", in_context(lambda t, s=sentence: t.replace(s, "")),
     [f"AGENTS.md:1: seed-rules: seed rule '{name}' was removed; keep the sentence: {s_flat}"])
    for name, sentence in SEED_RULES.items()
    for s_flat in [" ".join(sentence.split())]
]


def case_id(case) -> str:
    return f"{case[0].split('@')[0]}-{case[1]}"


@pytest.mark.parametrize("template_id, rule, change, expected", FAILING, ids=[case_id(c) for c in FAILING])
def test_rule_fails_where_it_should(tmp_path, template_id, rule, change, expected):
    adapter = seed(tmp_path, template_id)
    assert of_rule(run(adapter, template_id), rule) == []    # the seed passes this rule
    change(adapter)
    found = of_rule(run(adapter, template_id), rule)
    assert len(found) == len(expected), found
    for line, prefix in zip(found, expected):
        prefix = prefix(adapter) if callable(prefix) else prefix
        assert line.startswith(prefix), (line, prefix)


def test_every_rule_has_a_failing_case_and_every_template_check_is_a_rule():
    assert {case[1] for case in FAILING} == set(RULES)
    for template_id in list_templates():
        assert set(load_template(template_id).checks) <= set(RULES)
    assert set(describe_rules()) == set(RULES)


# Passing variants: edits each rule must accept (the seeds themselves pass every rule too).
PASSING = [
    ("continual-harness@1.0", "context-size", write("AGENTS.md", ("b" * 79 + "\n") * 100)),
    ("ahe@1.0", "context-size", in_context(lambda t: t + "x" * (32768 - 117 - len(t.encode())))),
    ("evo-harness@1.0", "context-size", write("AGENTS.md", "é" * ((32768 - 54) // 2))),
    ("ahe@1.0", "seed-rules", in_context(lambda t: t.replace(SEED_RULES["background"],
                                                             "**Run long-running\n  processes in the `background`.**"))),
    ("ahe@1.0", "seed-rules", in_context(lambda t: t.replace(SEED_RULES["non-interactive"],
                                                             SEED_RULES["non-interactive"].upper()))),
    ("ahe@1.0", "memory-header", write("MEMORY.md", MEMORY_HEADER + "\n")),
    ("ahe@1.0", "memory-entries", write("MEMORY.md", MEMORY_HEADER + "\n")),
    ("ahe@1.0", "memory-entries", write("MEMORY.md", MEMORY_HEADER + "\n- one\n  continued\n\n- two\n")),
    ("ahe@1.0", "middleware-functions",
     edit("middleware.py", lambda t: t.replace("def stop(inp: HookInput)", "def stop(*args)")
          .replace("def before_model(inp: HookInput)", "def before_model(inp, /, extra=None, *, flag=False)"))),
    ("ahe@1.0", "middleware-imports",
     edit("middleware.py", lambda t: t.replace("import os\n", "import os.path\nimport json, importlib\n"
                                                              "from hermit_hooks import EVENTS\n"))),
    ("ahe@1.0", "middleware-process",
     edit("middleware.py", lambda t: t + "\nimport subprocess\nsubprocess.run(['true'])\nos.environ.get('X')\n")),
    ("ahe@1.0", "memory-at-session-start",
     edit("middleware.py", lambda t: t.replace('MEMORY_FILE = os.path.join(ADAPTER_DIR, "MEMORY.md")',
                                               'MEMORY_NAME = "MEMORY.md"\nMEMORY_FILE = os.path.join(ADAPTER_DIR, MEMORY_NAME)'))),
    ("ahe@1.0", "memory-at-session-start",
     edit("middleware.py", lambda t: t.replace("entries = memory_entries(read_text(MEMORY_FILE))",
                                               "entries = _load()") + "\n\ndef _load():\n    return memory_entries(read_text('MEMORY.md'))\n")),
    ("ahe@1.0", "front-matter", write(".agents/skills/x-2/SKILL.md", "---\nname: x-2\ndescription: 'a: b'\nextra: [1]\n---\n")),
    ("ahe@1.0", "unknown-file", write("__pycache__/middleware.cpython-311.pyc", "")),
    ("continual-harness@1.0", "memory-notes",
     write("memory/NOTES.md", "# Notes\n\npreamble\n\n## A\n```\n## not a heading\n# nor this\n```\n\n## B\n### detail\ntext\n")),
    ("continual-harness@1.0", "memory-notes", write("memory/NOTES.md", "")),
    ("continual-harness@1.0", "subagent-size",
     edit("sub_agents/reviewer/AGENT.md", lambda t: t + "z" * (11999 - len(parse_front_matter(t).body.strip())))),
    ("evo-harness@1.0", "provenance", both(managed_skill("a"), managed_skill("b", ids="[7, t-2]"))),
    ("evo-harness@1.0", "general-support", managed_skill("g", level="general", ids="[t1, t2, t3]")),
    ("evo-harness@1.0", "skill-size", both(managed_skill("ok", body="w" * 2000),
                                           write("skills/native/SKILL.md", "---\nname: native\ndescription: d\n---\n"
                                                 + "n" * 5000 + "\n"))),
    ("evo-harness@1.0", "library-size", both(*(managed_skill(f"s{i}", body="b" * 1500) for i in range(25)))),
    ("evo-harness@1.0", "library-count", both(*(managed_skill(f"g{i}", level="general", ids="[a, b, c]") for i in range(10)),
                                              *(managed_skill(f"t{i}") for i in range(30)))),
    ("evo-harness@1.0", "skill-shadow", write("skills/other.md", "a flat skill without a folder\n")),
]


@pytest.mark.parametrize("template_id, rule, change", PASSING, ids=[case_id(c) for c in PASSING])
def test_rule_accepts_valid_variants(tmp_path, template_id, rule, change):
    adapter = seed(tmp_path, template_id)
    change(adapter)
    assert of_rule(run(adapter, template_id), rule) == []


@pytest.mark.parametrize("template_id", list_templates())
def test_the_seed_passes_every_rule(tmp_path, template_id):
    assert run(seed(tmp_path, template_id), template_id) == []


def test_limits_override_the_templates(tmp_path):
    adapter = seed(tmp_path, "evo-harness@1.0")
    managed_skill("g", level="general", ids="[t1, t2]")(adapter)
    managed_skill("t1")(adapter)
    managed_skill("t2")(adapter)
    assert of_rule(run(adapter, "evo-harness@1.0"), "general-support")
    assert not of_rule(run(adapter, "evo-harness@1.0", limits={"general_min_tasks": 2}), "general-support")
    assert of_rule(run(adapter, "evo-harness@1.0", limits={"max_topic_skills": 1}), "library-count") == [
        "skills:1: library-count: 2 topic skills, over max_topic_skills 1"]


def test_output_is_sorted_and_formatted(tmp_path):
    adapter = seed(tmp_path, "continual-harness@1.0")
    (adapter / "ADAPTER.md").write_text("other\n")
    (adapter / "memory" / "NOTES.md").write_text("# N\n## a\nx\n## a\ny\n")
    (adapter / "zz.txt").write_text("")
    violations = run(adapter, "continual-harness@1.0")
    assert [str(v) for v in violations] == [
        "ADAPTER.md:1: adapter-md-equal: differs from AGENTS.md from this line on: keep it an exact copy of AGENTS.md",
        "memory/NOTES.md:4: memory-notes: topic 'a' appears twice (first at line 2): one note per topic",
        "zz.txt:1: unknown-file: is not a file of the continual-harness@1.0 template: learners may not change it",
    ]
    assert [v.severity for v in violations] == ["error", "error", "warning"]
    assert has_errors(violations) and not has_errors(violations[2:])


def test_a_missing_adapter_directory_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        run(tmp_path / "nope", "ahe@1.0")


def test_an_unknown_check_in_a_template_is_a_schema_error(tmp_path):
    template = dataclasses.replace(load_template("evo-harness@1.0"), checks=("no-such-rule",))
    with pytest.raises(SchemaError, match="unknown check 'no-such-rule'"):
        check_adapter(tmp_path, template)


def test_front_matter_parser_reports_lines():
    fm = parse_front_matter("---\nname: a\n\ndescription: b\n---\nbody\nmore\n")
    assert fm.data == {"name": "a", "description": "b"}
    assert (fm.line_of("name"), fm.line_of("description"), fm.body_line) == (2, 4, 6)
    assert fm.body == "body\nmore"
    with pytest.raises(FrontMatterError) as info:
        parse_front_matter("---\na: 1\nb: [\n---\n")
    assert info.value.line >= 3


def test_hosts_true_without_hostcheck_warns_and_passes(tmp_path, monkeypatch):
    adapter = seed(tmp_path, "evo-harness@1.0")
    import git_hermit.adapter as package
    monkeypatch.delattr(package, "hostcheck", raising=False)                 # as if never imported
    monkeypatch.setitem(sys.modules, "git_hermit.adapter.hostcheck", None)   # and the import fails
    violations = run(adapter, "evo-harness@1.0", hosts=True)
    assert [str(v) for v in violations] == [
        ".:1: hosts: host checks skipped: git_hermit.adapter.hostcheck is not installed"]
    assert not has_errors(violations)


def test_hosts_true_merges_the_host_checks(tmp_path, monkeypatch):
    adapter = seed(tmp_path, "evo-harness@1.0")
    (adapter / "AGENTS.md").unlink()
    fake = types.ModuleType("git_hermit.adapter.hostcheck")
    fake.check_hosts = lambda path, run_host=None: [Violation("AGENTS.md", 0, "host-codex", f"checked {Path(path).name}")]
    monkeypatch.setitem(sys.modules, "git_hermit.adapter.hostcheck", fake)
    import git_hermit.adapter as package
    monkeypatch.setattr(package, "hostcheck", fake, raising=False)
    assert [str(v) for v in run(adapter, "evo-harness@1.0", hosts=True)] == [
        "AGENTS.md:0: host-codex: checked adapter",
        "AGENTS.md:1: required-files: missing: every evo-harness@1.0 adapter has this file",
    ]
    assert [str(v) for v in run(adapter, "evo-harness@1.0")] == [
        "AGENTS.md:1: required-files: missing: every evo-harness@1.0 adapter has this file"]


def test_hosts_true_runs_the_installed_host_checks_on_the_seed(tmp_path):
    pytest.importorskip("git_hermit.adapter.hostcheck", reason="the host checks are not installed")
    adapter = seed(tmp_path, "ahe@1.0")
    found = run(adapter, "ahe@1.0", hosts=True)
    # the one remark: Pi has no sub-agents, so the seed's reviewer is not installed there
    assert [(v.path, v.rule, v.severity) for v in found] == [("agents/reviewer.md", "host-subagents", "warning")]
    # Still reads MEMORY.md (the static rule passes) but no longer hands it over: only a host sees that.
    edit("middleware.py", lambda t: t.replace("return HookResult(context=\"\\n\\n\".join(parts)) if parts else None",
                                              "return None"))(adapter)
    assert run(adapter, "ahe@1.0") == []
    host_errors = [v for v in run(adapter, "ahe@1.0", hosts=True) if v.severity == "error"]
    assert host_errors and all(v.rule.startswith("host") for v in host_errors)
