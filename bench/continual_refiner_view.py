"""Side by side: what the continual-harness Refiner is shown of one rollout, by git-hermit and by the
reference implementation (the package hermit-harness, its continual_harness evolver), both captured
as the first policy prompt the scripted model server on 127.0.0.1 receives, for the same 64 KB
``codex exec --json`` stream and the same 8 KB task statement.

Figures per side: the prompt's length, the trajectory view's and the task text's (characters),
whether the session's start and end are in the view, how many commands' output tails it shows (of
how many in the stream). The reference runs in its own interpreter (a venv where hermit-harness is
installed; without one only git-hermit's side is printed). Both sides run offline.

    python bench/continual_refiner_view.py [--reference-python /tmp/ref/bin/python] [--kb 64] [--no-components]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "support"))
from codex_stream import FIRST_MARK, LAST_MARK, codex_stream, output_mark  # noqa: E402

from git_hermit.hostkit.model_server import ScriptedModelServer, Turn  # noqa: E402

STATEMENT = "TASK-HEAD Compute the figure. " + "Use the ledger in the workspace. " * 240 + " TASK-END"
POLICY = "# Policy\n\n- Answer with the figure only.\n"

AGENT = """#!{python}
import sys
from pathlib import Path
sys.stdout.write(Path({stream!r}).read_text())
Path(sys.argv[2], "answer.txt").write_text("42")
"""

# Runs under the reference's interpreter: its evolver on a workspace holding the same rollout.
REFERENCE = textwrap.dedent("""
    import json, shutil, sys, yaml
    from pathlib import Path
    import hermit
    from hermit.evolver.base import Access, Progress, StepContext, Workspace
    from hermit.llm import ChatClient
    from hermit.algorithms.evolvers.continual_harness.evolver import ContinualHarnessEvolver
    root, stream, statement, base_url = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    package = Path(hermit.__file__).parent / "algorithms"
    dirs = {name: root / name for name in ("adapter", "material", "task_info", "history", "state", "scratch", "output")}
    shutil.copytree(package / "templates" / "continual_harness", dirs["adapter"])
    for name, folder in dirs.items():
        folder.mkdir(parents=True, exist_ok=True)
    current = dirs["material"] / "current"
    (current / "tasks").mkdir(parents=True)
    (current / "traj" / "t1").mkdir(parents=True)
    shutil.copy(stream, current / "traj" / "t1" / "agent-codex.jsonl")
    (current / "tasks" / "t1.json").write_text(json.dumps({"id": "t1", "status": "ok", "output": "42",
                                                           "trajectory": "traj/t1"}))
    (dirs["task_info"] / "README.md").write_text(Path(statement).read_text())
    client = ChatClient(base_url, "scripted-model")
    def llm(messages, max_tokens=None, temperature=None):
        extra = {k: v for k, v in (("max_tokens", max_tokens), ("temperature", temperature)) if v is not None}
        return client.chat(messages, **extra)[0]
    defaults = yaml.safe_load((package / "evolvers" / "continual_harness" / "evolver.yaml").read_text())["params"]
    ws = Workspace(dirs["adapter"], dirs["material"], dirs["task_info"], dirs["history"], dirs["state"],
                   dirs["scratch"], dirs["output"])
    ctx = StepContext(ws, Access(), {"llm": llm, "check_spec": lambda path: {"passed": True}},
                      {**defaults, "components": ["policy"]}, progress=Progress(1, 1, False))
    print(ContinualHarnessEvolver().step(ctx).summary)
""")


def figures(prompt: str, view: str, task: str, commands: int) -> dict[str, object]:
    return {"prompt": len(prompt), "trajectory view": len(view), "task text": len(task),
            "start kept": FIRST_MARK in view, "end kept": LAST_MARK in view,
            "output tails": f"{sum(output_mark(n) in view for n in range(1, commands + 1))} of {commands}"}


def git_hermit_side(tmp: Path, stream: Path, base_url: str, components: bool) -> str:
    repo = tmp / "repo"
    repo.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.invalid",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.invalid"}
    hermit = [sys.executable, "-m", "git_hermit"]
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True, env=env)
    subprocess.run([*hermit, "init", "--run", "r", "--template", "continual-harness@1.0"], cwd=repo, check=True,
                   env=env, capture_output=True)
    (repo / "tasks.jsonl").write_text(json.dumps({"id": "t1", "prompt": STATEMENT, "answer": "42"}) + "\n")
    (repo / "rows").mkdir()
    (repo / "rows" / "train.txt").write_text("t1#1\n")
    agent = tmp / "agent.py"
    agent.write_text(AGENT.format(python=sys.executable, stream=str(stream)))
    agent.chmod(0o755)
    import yaml
    config = yaml.safe_load((repo / "hermit.yaml").read_text())
    config["agent"] = {"backend": "command", "timeout_s": 60, "command": [str(agent), "{task_id}", "{workspace}"]}
    config["evolver"] = {"name": "continual-harness", "base": "llm",
                         "model": {"name": "scripted-model", "provider": {"base_url": base_url}},
                         "params": {"k": 1, "step_size": 1, **({"components": ["policy"]} if components else {})}}
    (repo / "hermit.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    done = subprocess.run([*hermit, "step"], cwd=repo, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"git hermit step failed: {done.stderr}")
    return done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference-python", default=None, help="an interpreter with hermit-harness installed")
    parser.add_argument("--kb", type=int, default=64, help="the Codex stream's size in KB")
    parser.add_argument("--no-components", action="store_true",
                        help="leave `components` out (a git-hermit from before it took the parameter)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="refiner-view-") as scratch, \
            ScriptedModelServer(lambda body, results: Turn.say("```markdown\n" + POLICY + "```")) as server:
        tmp = Path(scratch)
        text, commands = codex_stream(args.kb * 1024)
        stream = tmp / "stream.jsonl"
        stream.write_text(text)
        (tmp / "statement.md").write_text(STATEMENT)
        print(f"stream: {len(text):,} bytes, {commands} commands; task statement: {len(STATEMENT):,} characters")
        git_hermit_side(tmp, stream, server.base_url + "/v1", components=not args.no_components)
        ours = server.model_requests()[0].body["messages"][0]["content"]
        view = ours.split("**Trajectory:**\n```text\n", 1)[1].split("\n```", 1)[0]
        task = ours.split("the task statement\n```text\n", 1)[-1].split("\n```", 1)[0] \
            if "the task statement\n" in ours else ""      # a git-hermit that shows no task text
        rows = {"git-hermit": figures(ours, view, task, commands)}
        reference = args.reference_python
        if reference and shutil.which(reference):
            before = len(server.model_requests())
            ref_root = tmp / "reference"
            done = subprocess.run([reference, "-c", REFERENCE, str(ref_root), str(stream), str(tmp / "statement.md"),
                                   server.base_url + "/v1"], capture_output=True, text=True, cwd=tmp)
            if done.returncode:
                raise SystemExit(f"the reference failed: {done.stderr[-2000:]}")
            theirs = server.model_requests()[before].body["messages"][0]["content"]
            ref_view = theirs.split("Trajectory:\n", 1)[1].split("\n\n=== FAILURE SIGNATURES", 1)[0]
            ref_task = theirs.split("=== THE TASK ===\n", 1)[1].split("\n\n=== RECENT ROLLOUTS", 1)[0]
            rows["reference"] = figures(theirs, ref_view, ref_task, commands)
        else:
            print("(no --reference-python with hermit-harness: the reference side is not measured)")
        keys = list(rows["git-hermit"])
        print(f"{'':18}" + "".join(f"{name:>16}" for name in rows))
        for key in keys:
            print(f"{key:18}" + "".join(f"{str(row[key]):>16}" for row in rows.values()))
        if "reference" in rows:
            ratio = rows["git-hermit"]["trajectory view"] / rows["reference"]["trajectory view"]  # type: ignore[operator]
            print(f"trajectory view, git-hermit / reference: {ratio:.3f}")


if __name__ == "__main__":
    main()
