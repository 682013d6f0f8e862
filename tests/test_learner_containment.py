"""Learner output is contained (issue 10, items 2, 4, 5, 6): a learner edit holding a secret,
a symlink, an oversize or binary file, or a name git treats specially is refused with its reason
in the step's record and nothing of it is committed; every commit passes `git fsck --strict`;
learner output that crashes a parser (a manifest nested 100,000 deep) is a rejection (exit 8),
never an internal error. Real git, the real executable, scripted learners for all three evolvers.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from support.cli_helpers import hermit
from conftest import git
from support.step_support import RUN, change, env_for, make_run, memory_lines, plan

SUPPORT = Path(__file__).parent / "support"
SKILL_SCRIPTS = ".agents/skills/debug-failing-test/scripts"
# built at run time: no string shaped like a real key lives in the source
FAKE_KEY = "sk-" + "proj" + "A1b2" * 8
DEEP = "[" * 100_000 + "]" * 100_000


def rev(repo: Path, name: str) -> str:
    return git(repo, "rev-parse", "--verify", "-q", name, check=False).strip()


def step_ref(n: int) -> str:
    return f"refs/heads/hermit/{RUN}/step-{n:04d}"


def analysis_note(repo: Path, commit: str) -> dict:
    return json.loads(git(repo, "notes", "--ref=hermit/analysis", "show", commit))


def fsck_strict(repo: Path) -> str:
    """`git fsck --strict` of the whole repository: '' when clean, else its complaints."""
    proc = subprocess.run(["git", "fsck", "--strict", "--no-dangling", "--no-progress"], cwd=repo,
                          capture_output=True, text=True)
    return "" if proc.returncode == 0 else (proc.stdout + proc.stderr)


def every_object_text(repo: Path) -> str:
    """The content of every object in the repository (commits, trees, blobs, notes)."""
    proc = subprocess.run(["git", "cat-file", "--batch-all-objects", "--batch"], cwd=repo, capture_output=True)
    return proc.stdout.decode("utf-8", "replace")


def hermit_files_text(repo: Path) -> str:
    """Every file git-hermit keeps under .hermit/ (working files, checkpoints, learner copies)."""
    return "".join(p.read_bytes().decode("utf-8", "replace") for p in (repo / ".hermit").rglob("*")
                   if p.is_file() and not p.is_symlink())


def assert_refused(repo: Path, r, reason: str) -> None:
    """Exit 8 with the reason on stderr and in the analysis note; the step's tip holds the seed's adapter."""
    assert r.code == 8, r.out + r.err
    assert "Traceback" not in r.err
    assert "error: the learners' output was rejected: " in r.err and reason in r.err, r.err
    seed, tip = rev(repo, step_ref(0)), rev(repo, step_ref(1))
    assert tip, "the step's ref was not published"
    assert rev(repo, f"{tip}:adapter") == rev(repo, f"{seed}:adapter")
    assert any(reason in why for why in analysis_note(repo, tip)["rejected"])
    assert fsck_strict(repo) == ""


# --- ahe: the Evolve Agent's session edits ----------------------------------------------------------
def test_a_secret_in_a_learner_edit_is_refused_not_committed(repo):
    control = make_run(repo, {"t1": "4"}, k=1)
    plan(control, 1, append={"MEMORY.md": memory_lines({"t1": "4"}) + f"- the API key is {FAKE_KEY}\n"},
         changes=[change("chg-1", ["MEMORY.md"], fixes=["t1"])])
    r = hermit(repo, "step", env=env_for(control))
    assert_refused(repo, r, "MEMORY.md holds a secret")
    assert FAKE_KEY not in every_object_text(repo)
    assert FAKE_KEY not in r.out + r.err
    assert FAKE_KEY not in hermit_files_text(repo)          # the refused copy is scrubbed too
    again = hermit(repo, "step", env=env_for(control))      # the run goes on from the kept refusal
    assert again.code == 0 and rev(repo, step_ref(2)), again.err


@pytest.mark.parametrize("link", ["MEMORY.md", "scripts/helper.py"])
def test_a_symlink_in_a_learner_edit_is_refused_and_never_read(repo, tmp_path, link):
    control = make_run(repo, {"t1": "4"}, k=1)
    outside = tmp_path / "home" / ".ssh" / "id_rsa"
    outside.parent.mkdir(parents=True)
    outside.write_text("HOST-ONLY-CONTENT " + "z9" * 20 + "\n")
    plan(control, 1, symlink={link: str(outside)}, changes=[change("chg-1", [link], fixes=["t1"])])
    r = hermit(repo, "step", env=env_for(control))
    assert_refused(repo, r, f"{link} is a symbolic link")
    text = every_object_text(repo)
    assert "HOST-ONLY-CONTENT" not in text and str(outside) not in text


def test_a_hard_link_in_a_learner_edit_is_refused(repo, tmp_path):
    control = make_run(repo, {"t1": "4"}, k=1)
    outside = tmp_path / "host-notes.md"
    outside.write_text("- answer t1: 4\n- HOST-ONLY-CONTENT\n")
    plan(control, 1, hardlink={"MEMORY.md": str(outside)}, changes=[change("chg-1", ["MEMORY.md"], fixes=["t1"])])
    r = hermit(repo, "step", env=env_for(control))
    assert_refused(repo, r, "MEMORY.md is a hard link")
    assert "HOST-ONLY-CONTENT" not in every_object_text(repo)


def test_a_file_over_the_size_limit_is_refused(repo):
    control = make_run(repo, {"t1": "4"}, k=1)
    big = "".join(f"- answer t{i}: {i}\n" for i in range(20_000))       # ~340 KB of valid memory entries
    assert len(big) > 256 * 1024
    plan(control, 1, append={"MEMORY.md": big}, changes=[change("chg-1", ["MEMORY.md"], fixes=["t1"])])
    r = hermit(repo, "step", env=env_for(control))
    assert_refused(repo, r, "MEMORY.md is over the limit of 262,144 bytes per file")


def test_the_size_limits_are_configurable(repo):
    control = make_run(repo, {"t1": "4"}, k=1)
    seed = rev(repo, step_ref(0))
    sizes = git(repo, "ls-tree", "-r", "-l", seed, "adapter/").splitlines()
    seed_bytes = sum(int(line.split()[3]) for line in sizes)
    limit = seed_bytes + 10_000
    config = yaml.safe_load((repo / "hermit.yaml").read_text())
    config["evolver"]["learner_output"] = {"max_file_bytes": 100_000, "max_adapter_bytes": limit}
    (repo / "hermit.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    plan(control, 1, write={f"{SKILL_SCRIPTS}/notes.py": "# " + "n" * 20_000 + "\n"},
         changes=[change("chg-1", [f"{SKILL_SCRIPTS}/notes.py"], fixes=["t1"])])
    r = hermit(repo, "step", env=env_for(control))
    assert_refused(repo, r, f"over the limit of {limit:,} bytes per adapter")


@pytest.mark.parametrize("name, reason", [
    (f"{SKILL_SCRIPTS}/.gitmodules", "a name git treats specially"),
    (f"{SKILL_SCRIPTS}/.gitattributes", "a name git treats specially"),
    (f"{SKILL_SCRIPTS}/.GIT/config", "a name git treats specially"),
    (f"{SKILL_SCRIPTS}/.git./config", "a name git treats specially"),
    (f"{SKILL_SCRIPTS}/GIT~1/config", "a name git treats specially"),
], ids=["gitmodules", "gitattributes", "dotgit-upper", "dotgit-trailing-dot", "dotgit-ntfs-short"])
def test_names_git_treats_specially_are_refused(repo, name, reason):
    control = make_run(repo, {"t1": "4"}, k=1)
    text = '[submodule "x"]\n\tpath = x\n\turl = --upload-pack=touch${IFS}pwned\n'
    plan(control, 1, write={name: text}, changes=[change("chg-1", [name], fixes=["t1"])])
    r = hermit(repo, "step", env=env_for(control))
    assert_refused(repo, r, reason)


def test_a_binary_file_where_text_is_expected_is_refused(repo):
    control = make_run(repo, {"t1": "4"}, k=1)
    plan(control, 1, write_hex={f"{SKILL_SCRIPTS}/tool.bin": "7f454c4602010100000000ff"},
         changes=[change("chg-1", [f"{SKILL_SCRIPTS}/tool.bin"], fixes=["t1"])])
    r = hermit(repo, "step", env=env_for(control))
    assert_refused(repo, r, "tool.bin is binary")


def test_a_one_shot_learner_edit_holding_a_secret_is_refused(repo):
    pytest.importorskip("openai", reason="the llm learner needs the optional openai extra")
    from support.judges_helpers import FakeChatServer
    control = make_run(repo, {"t1": "4"}, k=1)
    memory = git(repo, "show", f"{step_ref(0)}:adapter/MEMORY.md")
    reply = "My edit.\n```json\n" + json.dumps({
        "files": {"MEMORY.md": memory + memory_lines({"t1": "4"}) + f"- token {FAKE_KEY}\n"},
        "manifest": {"iteration": 1, "changes": [change("chg-1", ["MEMORY.md"], fixes=["t1"])]}}) + "\n```\n"
    config = yaml.safe_load((repo / "hermit.yaml").read_text())
    with FakeChatServer(reply) as server:
        config["evolver"]["base"] = "llm"
        config["evolver"]["model"] = {"name": "fake", "provider": {"base_url": server.base_url,
                                                                   "env_key": "HERMIT_TEST_LLM"}}
        (repo / "hermit.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        r = hermit(repo, "step", env={**env_for(control), "HERMIT_TEST_LLM": "unused"})
    assert any("MEMORY.md" in str(req["body"]) for req in server.requests)     # the one-shot path ran
    assert_refused(repo, r, "MEMORY.md holds a secret")
    assert FAKE_KEY not in every_object_text(repo)
    assert FAKE_KEY not in hermit_files_text(repo)


@pytest.mark.parametrize("deep", [DEEP, '{"a":' * 40_000 + "1" + "}" * 40_000], ids=["list", "object"])
def test_a_manifest_nested_100000_deep_is_a_rejection_not_a_crash(repo, deep):
    control = make_run(repo, {"t1": "4"}, k=1)
    plan(control, 1, append={"MEMORY.md": memory_lines({"t1": "4"})}, manifest_text=deep)
    r = hermit(repo, "step", env=env_for(control))
    assert_refused(repo, r, "state/change_manifest.json is nested too deeply")
    again = hermit(repo, "step", env=env_for(control))       # the run goes on: step 2 is a normal step
    assert again.code in (0, 8) and "Traceback" not in again.err, again.err
    assert rev(repo, step_ref(2))


def test_commits_git_hermit_makes_pass_fsck_strict(repo):
    control = make_run(repo, {"t1": "4"}, k=1)
    plan(control, 1, append={"MEMORY.md": memory_lines({"t1": "4"})},
         write={f"{SKILL_SCRIPTS}/check.py": "print('ok')\n"},
         changes=[change("chg-1", ["MEMORY.md"], fixes=["t1"])])
    r = hermit(repo, "step", env=env_for(control))
    assert r.code == 0, r.out + r.err
    assert rev(repo, f"{step_ref(1)}:adapter/{SKILL_SCRIPTS}/check.py")
    assert fsck_strict(repo) == ""


# --- continual-harness: Refiner passes ------------------------------------------------------------
def _continual_run(repo: Path) -> Path:
    from support.continual_harness_helpers import make_continual_run
    return make_continual_run(repo, tasks=3)


def _continual_env(control: Path) -> dict[str, str]:
    return {"PYTHONPATH": os.pathsep.join([str(SUPPORT), str(Path(__file__).parent),
                                           os.environ.get("PYTHONPATH", "")]),
            "HERMIT_TEST_CONTROL": str(control)}


def test_a_refiner_pass_writing_a_secret_is_refused_and_the_others_commit(repo):
    control = _continual_run(repo)
    (control / "refiner.json").write_text(json.dumps({"1": {
        "skills": json.dumps({"analysis": "a helper", "add": [{
            "name": "call-api", "description": "Call the API.", "body": "Run the script.",
            "scripts": {"call.py": f"KEY = {FAKE_KEY!r}\n"}}]}),
        "memory": DEEP}}))
    r = hermit(repo, "step", env=_continual_env(control))
    assert r.code == 8, r.out + r.err
    assert "Traceback" not in r.err and "call.py holds a secret" in r.err
    tip = rev(repo, step_ref(1))
    tree = git(repo, "ls-tree", "-r", "--name-only", tip, "adapter/").split()
    assert not any("call-api" in p for p in tree)
    assert "adapter/sub_agents/planner-1/AGENT.md" in tree          # the other passes still commit
    passes = analysis_note(repo, tip)["passes"]
    assert passes["skills"]["status"] == "dropped" and "holds a secret" in passes["skills"]["reason"]
    # the memory answer nested 100,000 deep is a dropped pass, not an internal error
    assert passes["memory"]["status"] == "dropped" and "nested too deeply" in passes["memory"]["reason"]
    assert FAKE_KEY not in every_object_text(repo)
    assert FAKE_KEY not in hermit_files_text(repo)
    assert fsck_strict(repo) == ""


# --- evo-harness: curator levels --------------------------------------------------------------------
def test_a_curator_level_with_a_secret_or_special_file_is_refused_whole(repo):
    from support.evo_harness_helpers import env, make_evo_run, plan as evo_plan, skill
    control = make_evo_run(repo, {"t1": "1", "t2": "2", "t3": "3", "t4": "4"}, {"batch_size": 4})
    evo_plan(control, **{
        "1_topic_curator": {"write": {
            "skills/short-answers/SKILL.md": skill("short-answers", "topic", ["t1"], body=f"- key {FAKE_KEY}\n"),
            "skills/short-answers/.gitmodules": '[submodule "x"]\n\tpath = x\n\turl = --upload-pack=x\n'}},
        "1_general_curator": {"write": {
            "skills/deep/SKILL.md": "---\nname: " + DEEP + "\n---\n\nbody\n"}},
        # a Worker answer nested 100,000 deep is an unusable reflection, not an internal error
        "reflect": {"answer": {"t2": '{"a":' * 40_000 + "1" + "}" * 40_000}}})
    r = hermit(repo, "step", env=env(control))
    assert r.code == 8, r.out + r.err
    assert "Traceback" not in r.err
    tip, seed = rev(repo, step_ref(1)), rev(repo, step_ref(0))
    assert rev(repo, f"{tip}:adapter") == rev(repo, f"{seed}:adapter")
    levels = analysis_note(repo, tip)["levels"]
    assert levels["topic"]["status"] == "rejected"
    reasons = " ".join(levels["topic"]["reasons"])
    assert "SKILL.md holds a secret" in reasons and ".gitmodules is a name git treats specially" in reasons
    assert levels["general"]["status"] == "rejected"
    assert "nested too deeply" in " ".join(levels["general"]["reasons"])
    assert analysis_note(repo, tip)["reflections"]["t2#1"].startswith("unusable")
    assert FAKE_KEY not in every_object_text(repo)
    assert FAKE_KEY not in hermit_files_text(repo)
    assert fsck_strict(repo) == ""


def test_a_refiner_pass_writing_a_git_special_file_is_refused(repo):
    control = _continual_run(repo)
    (control / "refiner.json").write_text(json.dumps({"1": {
        "skills": json.dumps({"analysis": "a helper", "add": [{
            "name": "sub", "description": "Fetch a module.", "body": "Run the script.",
            "scripts": {".gitmodules": '[submodule "x"]\n\tpath = x\n\turl = --upload-pack=x\n'}}]})}}))
    r = hermit(repo, "step", env=_continual_env(control))
    assert r.code == 8 and "scripts/.gitmodules is a name git treats specially" in r.err, r.out + r.err
    tip = rev(repo, step_ref(1))
    assert not any(".gitmodules" in p for p in git(repo, "ls-tree", "-r", "--name-only", tip).split())
    assert "refused" in analysis_note(repo, tip)["passes"]["skills"]["reason"]
    assert fsck_strict(repo) == ""
