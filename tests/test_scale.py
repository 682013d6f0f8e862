"""Scale of the read commands (issue 15.1): `log`, `show`, `report` and `compare` start a fixed
number of git processes whatever the run's length (timing targets: bench/log_1000.py)."""

from __future__ import annotations

import json

import pytest

from support.cli_helpers import hermit
from conftest import git
from support.scale_support import build_run, counting_git

N = 6

READS = [
    ("log", "--run", "a"),
    ("log", "--run", "a", "--json"),
    ("show", "step-3", "--run", "a"),              # a step with a rollback commit
    ("show", "step-2", "--run", "a", "--json"),
    ("show", "hermit/a/step-0002"),                # a revision, no run
    ("report", "--run", "a"),
    ("report", "3", "--run", "a", "--format", "json"),
    ("compare", "a", "b"),
    ("compare", "a", "b", "--json"),
]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two repositories, each with runs a and b: N steps in one, 2N in the other."""
    made = {}
    for steps in (N, 2 * N):
        repo = tmp_path_factory.mktemp(f"steps{steps}")
        git(repo, "init", "-q")
        build_run(repo, "a", steps)
        build_run(repo, "b", steps)
        made[steps] = repo
    return made


def test_the_synthetic_run_reads_as_a_run(runs):
    data = json.loads(hermit(runs[N], "log", "--run", "a", "--json").out)
    assert [s["step"] for s in data["steps"]] == list(range(N + 1))
    assert data["steps"][3]["rollbacks"][0]["verdict"] == "HARMFUL"
    assert data["steps"][2]["changes"][0]["verdict"]["verdict"] == "HARMFUL"
    assert data["steps"][2]["changes"][0]["rolled_back_by"] == data["steps"][3]["rollbacks"][0]["commit"]


@pytest.mark.parametrize("args", READS, ids=[" ".join(a) for a in READS])
def test_read_commands_start_a_fixed_number_of_git_processes(runs, tmp_path, args):
    started = {}
    for steps, repo in runs.items():
        hermit(repo, *args)   # the caches filled alike (a warm `log` reads no object: one process fewer)
        log = tmp_path / f"git-{steps}.log"
        r = hermit(repo, *args, env=counting_git(tmp_path / "bin", log))
        assert r.code == 0, r.err
        started[steps] = log.read_text().splitlines() if log.exists() else []
    assert started[N], "the counting git wrapper saw no git process"
    assert len(started[2 * N]) == len(started[N]), \
        f"{N} steps: {len(started[N])} git processes, {2 * N} steps: {len(started[2 * N])}\n" + \
        "\n".join(started[2 * N])


def test_log_json_is_one_record_per_step_and_show_has_the_tasks(runs):
    r = hermit(runs[N], "log", "--run", "a", "--json")
    assert r.code == 0, r.err
    assert len(r.out.splitlines()) == 1          # piped: one line (indented only on a terminal)
    steps = json.loads(r.out)["steps"]
    scores = steps[2]["scores"]
    # each split's tasks counted by outcome, not listed: the log's size does not grow with the tasks
    assert "tasks" not in scores and scores["task_outcomes"] == {"pass": 4, "fail": 2, "exception": 0}
    assert scores["pass_at_1"] == steps[2]["pass_at_1"] and scores["split"] == "train"
    held = steps[N]["scores"]["splits"]["test"]
    assert "tasks" not in held and sum(held["task_outcomes"].values()) == 6
    shown = json.loads(hermit(runs[N], "show", "step-2", "--run", "a", "--json").out)
    tasks = shown["commits"][-1]["scores"]["tasks"]
    assert sorted(tasks) == [f"task-{i}" for i in range(6)] and tasks["task-1"]["attempts"][0]["tokens"] == 101


def test_show_step_lists_the_commits_the_log_gives_that_step(runs):
    log = json.loads(hermit(runs[2 * N], "log", "--run", "a", "--json").out)
    for step in (3, 4):
        view = log["steps"][step]
        expected = [c["commit"] for c in view["changes"]] + [c["commit"] for c in view["rollbacks"]]
        shown = json.loads(hermit(runs[2 * N], "show", f"step-{step}", "--run", "a", "--json").out)
        assert sorted(c["commit"] for c in shown["commits"]) == sorted(expected)
        assert shown["commits"][-1]["commit"] == view["commit"]


def test_scores_summaries_are_kept_by_note_and_a_broken_cache_is_ignored(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    build_run(repo, "a", 3)
    cold = hermit(repo, "log")
    assert cold.code == 0, cold.err
    cache = repo / ".git" / "hermit" / "cache" / "scores-summaries.json"
    assert cache.is_file()
    assert hermit(repo, "log").out == cold.out                   # warm: the same
    # a rewritten note is a new blob: read again, not taken from the cache
    note = json.loads(git(repo, "notes", "--ref=hermit/scores", "show", "hermit/a/step-0001"))
    path = tmp_path / "note.json"
    path.write_text(json.dumps({**note, "pass_at_1": 0.125}))
    git(repo, "notes", "--ref=hermit/scores", "add", "-f", "-F", str(path), "hermit/a/step-0001")
    changed = hermit(repo, "log").out
    assert "pass@1 0.125" in changed and changed != cold.out
    cache.write_text("{not json")
    assert hermit(repo, "log").out == changed
    # the per-task outcomes still come from the note when a command needs them
    build_run(repo, "b", 3)
    r = hermit(repo, "compare", "a", "b", "--split", "train", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["a"]["tasks"] == 6


def test_a_bad_scores_note_is_a_warning_each_time(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    build_run(repo, "a", 2)
    path = tmp_path / "note.json"
    path.write_text('{"v": 1, "run": "a"}')
    git(repo, "notes", "--ref=hermit/scores", "add", "-f", "-F", str(path), "hermit/a/step-0001")
    for _ in range(2):
        r = hermit(repo, "log")
        assert r.code == 0, r.err
        assert "warning: the scores note on" in r.out and "is damaged" in r.out


def _imported(stderr: str) -> set[str]:
    """Module names from ``python -X importtime``'s report."""
    return {line.split("|")[-1].strip() for line in stderr.splitlines() if line.startswith("import time:")}


def test_a_warm_log_neither_parses_yaml_nor_validates_again(tmp_path):
    """What `log` checked once (hermit.yaml, each note blob) is remembered by content, so a second
    `log` imports neither the YAML parser nor the schema validator — and still sees every change."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    build_run(repo, "a", 3)
    cold = hermit(repo, "log", env={"PYTHONPROFILEIMPORTTIME": "1"}, subprocess=True)   # a fresh process
    assert cold.code == 0, cold.err
    assert {"yaml", "jsonschema_rs"} <= _imported(cold.err)       # the first reading checks
    warm = hermit(repo, "log", env={"PYTHONPROFILEIMPORTTIME": "1"}, subprocess=True)
    assert warm.out == cold.out
    assert not {"yaml", "jsonschema_rs"} & _imported(warm.err)
    assert hermit(repo, "log", "--json").out == hermit(repo, "log", "--json").out
    for name in ("notes.json", "configs.json"):   # a broken cache is only a cache: checked again
        (repo / ".git" / "hermit" / "cache" / name).write_text("{not json")
    assert hermit(repo, "log").out == cold.out
    # a note rewritten into a bad one is a new blob: checked, and a warning every time
    path = tmp_path / "note.json"
    path.write_text('{"v": 1, "run": "a"}')
    git(repo, "notes", "--ref=hermit/manifest", "add", "-f", "-F", str(path), "hermit/a/step-0002")
    for _ in range(2):
        r = hermit(repo, "log")
        assert r.code == 0, r.err
        assert "warning: the manifest note on" in r.out and "is damaged" in r.out
    # an edited hermit.yaml is read and checked again: a bad one still refuses
    config = repo / "hermit.yaml"
    config.write_text(config.read_text().replace("run: a", "run: a\nno_such_key: 1", 1))
    r = hermit(repo, "log")
    assert r.code != 0 and "no_such_key" in r.err, (r.code, r.err)


def test_log_json_passes_cached_notes_through_without_making_records(runs, monkeypatch):
    """`log --json` writes each change's and verdict's data as the notes cache holds it: after the
    first `log` (which checks every note), it makes no Change or VerdictNote record at all, and its
    output is the CLI's, byte for byte."""
    from git_hermit.core.history import load_history
    from git_hermit.core.runs import open_run
    from git_hermit.gitio import Repo
    from git_hermit.model import records
    from git_hermit.render.views import log_json

    expected = hermit(runs[N], "log", "--run", "a", "--json").out   # fills the cache

    def refuse(*args, **kwargs):
        raise AssertionError("log --json made a record it only passes through")
    monkeypatch.setattr(records.Change, "from_dict", classmethod(refuse))
    monkeypatch.setattr(records.VerdictNote, "from_dict", classmethod(refuse))
    repo = Repo.discover(runs[N])
    try:
        data = log_json(load_history(open_run(repo, "a")))
    finally:
        repo.close()
    assert json.dumps(data, sort_keys=True, default=str) == expected.rstrip("\n")


def test_text_log_makes_no_change_or_verdict_record(runs, monkeypatch):
    """The text `log` shows a change's id, description and verdict: read from the notes cache's data,
    not made into Change and VerdictNote records (a 1,000-step run: 2,000 records), byte for byte
    the CLI's output."""
    from git_hermit.core.history import load_history
    from git_hermit.core.runs import open_run
    from git_hermit.gitio import Repo
    from git_hermit.model import records
    from git_hermit.render.views import log_lines

    expected = hermit(runs[N], "log", "--run", "a").out   # fills the cache
    assert "HARMFUL (rolled back by" in expected and "EFFECTIVE  tweak memory" in expected

    def refuse(*args, **kwargs):
        raise AssertionError("the text log made a record of data it only shows")
    monkeypatch.setattr(records.Change, "from_dict", classmethod(refuse))
    monkeypatch.setattr(records.VerdictNote, "from_dict", classmethod(refuse))
    repo = Repo.discover(runs[N])
    try:
        lines = log_lines(load_history(open_run(repo, "a")))
    finally:
        repo.close()
    assert "\n".join(lines) + "\n" == expected


# What `log` does not need: the notes writer's retry jitter (random), temporary directories (tempfile),
# and the rollout results' record module.
NOT_FOR_LOG = {"random", "tempfile", "git_hermit.model.rollout"}


@pytest.mark.parametrize("args", [("log",), ("log", "--json")])
def test_a_warm_log_imports_only_what_it_needs(runs, args):
    """`log` is meant to cost little more than the CLI's start-up: a warm one (its caches filled)
    imports none of the modules only writing commands use."""
    probe = ("import atexit, sys\n"
             "atexit.register(lambda: sys.stderr.write('\\nMODULES ' + ' '.join(sorted(sys.modules))))\n"
             "from git_hermit.launcher import main\nmain()\n")
    import subprocess
    import sys
    for _ in range(2):   # the first fills the caches
        r = subprocess.run([sys.executable, "-c", probe, *args, "--run", "a"], cwd=runs[N], capture_output=True,
                           text=True)
        assert r.returncode == 0, r.stderr
    imported = set(r.stderr.rsplit("MODULES ", 1)[1].split())
    assert "git_hermit.core.history" in imported            # the probe sees the log's own modules
    assert not NOT_FOR_LOG & imported, sorted(NOT_FOR_LOG & imported)
    # the notes' data is shown and passed through as it is: no record made, their module not imported
    assert "git_hermit.model.records" not in imported


def test_the_caches_name_each_notes_refs_schema_as_the_records_do():
    from git_hermit.core import history
    from git_hermit.model.records import RECORD_KINDS
    assert history._SCHEMAS == {kind: RECORD_KINDS[kind][0] for kind in history._SCHEMAS}


def _slow_log_json(repo_dir, run: str) -> str:
    """`log --json` as _echo_json writes it to a pipe: the whole log built as data, then json.dumps."""
    from git_hermit.core.history import load_history
    from git_hermit.core.runs import open_run
    from git_hermit.gitio import Repo
    from git_hermit.render.views import log_json
    repo = Repo.discover(repo_dir)
    try:
        data = log_json(load_history(open_run(repo, run)))
    finally:
        repo.close()
    return json.dumps(data, sort_keys=True, default=str, check_circular=False) + "\n"


def test_log_json_joins_kept_fragments_into_the_json_built_whole(tmp_path, monkeypatch):
    """`log --json` encodes each step once and keeps it under the ids of the commits and note blobs
    it is made of: a warm one encodes no step and reads no note's data, yet prints byte for byte the
    JSON of the whole log built as data; a rewritten note (a new blob) makes its step encoded again,
    never read stale."""
    from git_hermit.core import history
    from git_hermit.render import views
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    build_run(repo, "a", N)
    cold = hermit(repo, "log", "--json")
    assert cold.code == 0, cold.err
    assert cold.out == _slow_log_json(repo, "a")
    assert (repo / ".git" / "hermit" / "cache" / "log-json.txt").is_file()

    def refuse(*args, **kwargs):
        raise AssertionError("a warm log --json encoded a step again")
    with monkeypatch.context() as patch:
        patch.setattr(views, "_step_json", refuse)
        patch.setattr(history._Notes, "dicts", property(refuse))      # nor decodes the notes' data
        warm = hermit(repo, "log", "--json")
    assert warm.code == 0, warm.err
    assert warm.out == cold.out
    # a verdict rewritten: its note is a new blob, so its fragment is made again
    note = json.loads(git(repo, "notes", "--ref=hermit/verdicts", "show", "hermit/a/step-0001"))
    path = tmp_path / "note.json"
    path.write_text(json.dumps({**note, "verdict": "PARTIALLY_EFFECTIVE"}))
    git(repo, "notes", "--ref=hermit/verdicts", "add", "-f", "-F", str(path), "hermit/a/step-0001")
    changed = hermit(repo, "log", "--json").out
    assert changed != cold.out and '"verdict": "PARTIALLY_EFFECTIVE"' in changed
    assert changed == _slow_log_json(repo, "a")


def test_a_damaged_or_unwritable_fragment_cache_is_only_encoded_again(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    build_run(repo, "a", 3)
    expected = hermit(repo, "log", "--json").out
    plain = hermit(repo, "log").out
    cache = repo / ".git" / "hermit" / "cache" / "log-json.txt"
    text = cache.read_text()
    damaged = text.replace('"pass_at_1": ', '"pass_at_1": 9', 1)    # a fragment's bytes changed
    assert damaged != text
    cache.write_text(damaged)
    assert hermit(repo, "log", "--json").out == expected
    assert cache.read_text() == text                                  # rewritten whole
    cache.write_text(text.split("\n", 1)[0] + "\nnot a checksum")    # cut short
    assert hermit(repo, "log", "--json").out == expected
    cache.unlink()
    cache.mkdir()                                                     # neither readable nor replaceable
    r = hermit(repo, "log", "--json")
    assert r.code == 0 and r.out == expected, r.err
    assert cache.is_dir() and not list(cache.iterdir())
    # the notes cache's data (its second line, decoded when first read) damaged: checked again
    notes = repo / ".git" / "hermit" / "cache" / "notes.json"
    text = notes.read_text()
    head, body = text.split("\n", 1)
    assert '"description":"tweak memory 2"' in body
    notes.write_text(head + "\n" + body.replace('"description":"tweak memory 2"', '"description":"tweak memory X"'))
    assert hermit(repo, "log").out == plain and hermit(repo, "log", "--json").out == expected
    assert notes.read_text() == text                                  # rewritten whole


@pytest.mark.parametrize("args", [("log", "--run", "a"), ("log", "--run", "a", "--json")])
def test_a_warm_log_starts_three_git_processes(runs, tmp_path, args):
    """A warm `log`: the repository's paths, ONE for-each-ref for the run's step branches, notes refs
    and tags, and one `git log` of the run's commits (no object reader: nothing to read by id)."""
    assert hermit(runs[N], *args).code == 0     # fills the caches
    log = tmp_path / "git.log"
    r = hermit(runs[N], *args, env=counting_git(tmp_path / "bin", log))
    assert r.code == 0, r.err
    started = log.read_text().splitlines()

    def subcommand(line: str) -> str:   # past git's own options (-c name=value)
        words = line.split()
        while words[0] == "-c":
            words = words[2:]
        return words[0]
    assert [subcommand(line) for line in started] == ["rev-parse", "for-each-ref", "log"], "\n".join(started)
