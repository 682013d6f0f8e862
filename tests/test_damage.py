"""A damaged repository never gives a silent wrong answer (issue 23, items 7 and 8).

On copies of the demo run, each case damages one ref, note, object or cache entry the way a crash,
a disk error, a hand edit or a hostile remote would; `log`, `show` and `report` then either name
the damaged ref or object and exit 18, or name the damaged note in a warning, leave it out and
show the rest of the run — never the wrong record without a word, never exit 70 or 130.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from support.cli_helpers import hermit
from conftest import git
from support.review_support import copy_demo

DAMAGED = 18
STEP = "refs/heads/hermit/demo/step-{:04d}"


@pytest.fixture
def demo(demo_run, tmp_path):
    repo = copy_demo(demo_run, tmp_path / "demo")
    assert hermit(repo, "log").code == 0          # the caches exist, as in a repository in use
    return repo


def _rev(repo: Path, name: str) -> str:
    return git(repo, "rev-parse", name).strip()


def _note(repo: Path, kind: str, commit: str) -> str:
    return git(repo, "notes", f"--ref=hermit/{kind}", "show", commit)


def _set_note(repo: Path, kind: str, commit: str, text: str | bytes, tmp_path: Path) -> None:
    path = tmp_path / f"note-{kind}"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    git(repo, "notes", f"--ref=hermit/{kind}", "add", "-f", "-F", str(path), commit)


def _swap(repo: Path, kind: str, a: str, b: str, tmp_path: Path) -> None:
    first, second = _note(repo, kind, a), _note(repo, kind, b)
    _set_note(repo, kind, a, second, tmp_path)
    _set_note(repo, kind, b, first, tmp_path)


def _step_line(log: str, n: int) -> str:
    return next(line for line in log.splitlines() if line.startswith(f"step {n:>4}  "))


def _write_ref(repo: Path, ref: str, sha: str) -> None:
    path = repo / ".git" / ref
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(sha + "\n")       # as a crash or a hand edit leaves it (update-ref would refuse)


# ------------------------------------------------------------------------------ refs: exit 18
def _ref_to_missing_object(repo, tmp_path):
    _write_ref(repo, STEP.format(2), "1234567890" * 4)
    return STEP.format(2)


def _ref_to_a_blob(repo, tmp_path):
    blob = git(repo, "hash-object", "-w", "hermit.yaml").strip()
    _write_ref(repo, STEP.format(2), blob)
    return STEP.format(2)


def _ref_out_of_order(repo, tmp_path):
    git(repo, "update-ref", STEP.format(3), _rev(repo, STEP.format(1)))    # step 3 back on step 1's tip
    return STEP.format(3)


def _missing_step(repo, tmp_path):
    git(repo, "update-ref", "-d", STEP.format(2))
    return STEP.format(2)


def _notes_ref_to_missing_commit(repo, tmp_path):
    _write_ref(repo, "refs/notes/hermit/verdicts", "1234567890" * 4)
    return "refs/notes/hermit/verdicts"


@pytest.mark.parametrize("damage", [_ref_to_missing_object, _ref_to_a_blob, _ref_out_of_order, _missing_step,
                                    _notes_ref_to_missing_commit])
def test_a_damaged_ref_is_named_and_exits_18(demo, tmp_path, damage):
    ref = damage(demo, tmp_path)
    for args in (("log",), ("log", "--json"), ("report", "3"), ("show", "step-3")):
        r = hermit(demo, *args)
        if args[0] == "show" and damage in (_missing_step, _ref_to_missing_object, _ref_to_a_blob):
            continue     # step 3 itself is sound: show names only what it reads (checked below)
        assert r.code == DAMAGED, (args, r.code, r.out[-500:], r.err)
        assert ref in (r.err + r.out) and "Traceback" not in r.err, (args, r.err)
    if damage in (_ref_to_missing_object, _ref_to_a_blob):
        r = hermit(demo, "show", "step-2")
        assert r.code == DAMAGED and ref in r.err, r.err


# ------------------------------------------------------------------------------ notes: warned, left out
def test_swapped_manifest_notes_are_named_not_shown_as_the_commits(demo, tmp_path):
    one, two = _rev(demo, STEP.format(1)), _rev(demo, STEP.format(2))
    two_says = json.loads(_note(demo, "manifest", two))["changes"][0]["description"]
    _swap(demo, "manifest", one, two, tmp_path)
    r = hermit(demo, "log")
    assert r.code == 0, r.err
    assert f"the manifest note on {one[:12]} is damaged" in r.out and "Hermit-Manifest" in r.out
    step1 = r.out.split("step    2")[0]
    assert two_says[:40] not in step1                    # step 2's change is not shown as step 1's
    assert f"the manifest note on {two[:12]} is damaged" in hermit(demo, "show", "step-2").out
    assert "is damaged" in hermit(demo, "report", "1").out


def test_swapped_verdict_notes_are_named_not_shown_as_the_changes_verdict(demo, tmp_path):
    one, three = _rev(demo, STEP.format(1)), _rev(demo, STEP.format(3))
    assert json.loads(_note(demo, "verdicts", one))["verdict"] == "HARMFUL"
    _swap(demo, "verdicts", one, three, tmp_path)
    r = hermit(demo, "log")
    assert r.code == 0, r.err
    line = next(line for line in r.out.splitlines() if line.strip().startswith(one[:10]) and "chg-2" in line)
    assert "EFFECTIVE" not in line and "verdict damaged" in line, line
    assert f"the verdicts note on {one[:12]} is damaged" in r.out
    data = json.loads(hermit(demo, "log", "--json").out)
    assert any("verdicts note" in w for w in data["steps"][1]["warnings"])


def test_swapped_scores_notes_are_named_not_shown_as_the_steps_score(demo, tmp_path):
    one, two = _rev(demo, STEP.format(1)), _rev(demo, STEP.format(2))
    _swap(demo, "scores", one, two, tmp_path)
    r = hermit(demo, "log")
    assert r.code == 0, r.err
    assert "0.792" not in _step_line(r.out, 1) and "0.375" not in _step_line(r.out, 2)
    assert f"the scores note on {one[:12]} is damaged: it holds the scores of {two[:12]}" in r.out
    assert "is damaged" in hermit(demo, "show", "step-1").out


def test_an_analysis_note_of_another_step_is_named(demo, tmp_path):
    one, two = _rev(demo, STEP.format(1)), _rev(demo, STEP.format(2))
    _set_note(demo, "analysis", one, _note(demo, "analysis", two), tmp_path)
    r = hermit(demo, "log")
    assert r.code == 0 and f"the analysis note on {one[:12]} is damaged" in r.out, r.out


def test_a_truncated_note_object_is_named_not_an_interruption(demo, tmp_path):
    one = _rev(demo, STEP.format(1))
    blob = git(demo, "rev-parse", f"refs/notes/hermit/manifest:{one}").strip()
    loose = demo / ".git" / "objects" / blob[:2] / blob[2:]
    assert loose.is_file(), "the demo's objects are loose"
    data = loose.read_bytes()
    os.chmod(loose, 0o644)
    loose.write_bytes(data[: len(data) // 2])
    # (a warm notes cache holds what the note said before, by its blob id: a cold one reads it)
    shutil.rmtree(demo / ".git" / "hermit" / "cache")
    for args in (("log",), ("show", "step-1"), ("report", "1")):
        r = hermit(demo, *args)
        assert r.code == 0, (args, r.code, r.err)
        assert f"the manifest note on {one[:12]} is damaged" in r.out, (args, r.out[-800:])
    assert "1.000" in _step_line(hermit(demo, "log").out, 4)          # the rest of the run still shows


def test_a_note_that_is_not_utf8_is_named_not_decoded_with_replacements(demo, tmp_path):
    two = _rev(demo, STEP.format(2))
    text = _note(demo, "analysis", two).encode().replace(b'"run": "demo"', b'"run": "d\xffmo"')
    _set_note(demo, "analysis", two, text, tmp_path)
    r = hermit(demo, "show", "step-2")
    assert r.code == 0 and "not UTF-8" in r.out, r.out[-500:]


def test_a_best_tag_on_a_lower_scoring_step_is_named(demo):
    git(demo, "update-ref", "refs/tags/hermit/demo/best", _rev(demo, STEP.format(1)))
    r = hermit(demo, "log")
    assert r.code == 0 and "refs/tags/hermit/demo/best points at step 1" in r.out, r.out[-500:]


# ------------------------------------------------------------------------------ caches: rebuilt
def _edit_cache(path: Path, edit) -> None:
    """Edit a cache file as a hand edit would (whatever checksum it holds stays as it was)."""
    data = path.read_bytes()
    edited = edit(data)
    assert edited != data, "the edit applies"
    path.write_bytes(edited)


def test_an_edited_scores_cache_entry_is_not_believed(demo):
    cache = demo / ".git" / "hermit" / "cache" / "scores-summaries.json"
    assert b'"pass_at_1":0.375' in cache.read_bytes()
    _edit_cache(cache, lambda body: body.replace(b'"pass_at_1":0.375', b'"pass_at_1":0.999'))
    r = hermit(demo, "log")
    assert r.code == 0 and "pass@1 0.375" in _step_line(r.out, 1) and "0.999" not in r.out


def test_an_edited_notes_cache_listing_is_not_believed(demo):
    cache = demo / ".git" / "hermit" / "cache" / "notes.json"
    one, two = _rev(demo, STEP.format(1)), _rev(demo, STEP.format(2))
    # the listing says step 1's commit carries step 2's manifest note
    blob_two = git(demo, "rev-parse", f"refs/notes/hermit/manifest:{two}").strip()
    blob_one = git(demo, "rev-parse", f"refs/notes/hermit/manifest:{one}").strip()
    _edit_cache(cache, lambda body: body.replace(f'"{one}":"{blob_one}"'.encode(), f'"{one}":"{blob_two}"'.encode()))
    r = hermit(demo, "log")
    assert r.code == 0, r.err
    two_says = json.loads(_note(demo, "manifest", two))["changes"][0]["description"]
    assert two_says[:40] not in r.out.split("step    2")[0]


# ------------------------------------------------------------------------------ item 7: bounds
DEEP = "[" * 100_000 + "]" * 100_000


def _second_run_with_scores(repo: Path, tmp_path: Path) -> None:
    assert hermit(repo, "init", "--run", "b").code == 0
    seed = _rev(repo, "hermit/b/step-0000")
    note = json.loads(_note(repo, "scores", "hermit/demo/step-0000"))
    _set_note(repo, "scores", seed, json.dumps({**note, "run": "b", "commit": seed}), tmp_path)


@pytest.mark.parametrize("kind", ["manifest", "verdicts", "scores", "analysis"])
def test_a_note_nested_100000_deep_is_damage_and_the_rest_still_shows(demo, tmp_path, kind):
    _second_run_with_scores(demo, tmp_path)
    one = _rev(demo, STEP.format(1))
    _set_note(demo, kind, one, DEEP, tmp_path)
    for args in (("log",), ("log", "--json"), ("show", "step-1"), ("report", "1"), ("report", "4"),
                 ("estimate",), ("compare", "demo", "b", "--split", "train")):
        r = hermit(demo, *args, "--run", "demo") if args[0] in ("log", "show", "report", "estimate") else \
            hermit(demo, *args)
        assert r.code == 0, (args, r.code, r.err[-500:])
        said = r.out + r.err
        # (report 4 does not show step 1's records; the estimate reads only scores notes, the local
        # ledger being there)
        if not (args[0] == "report" and args[1] == "4") and not (args[0] == "estimate" and kind != "scores"):
            assert "nested too deeply (more than 128 levels)" in said and one[:12] in said, (args, said[-800:])
    r = hermit(demo, "log", "--run", "demo")
    assert "pass@1 1.000" in _step_line(r.out, 4)


def test_the_bounds_are_checked_before_parsing():
    from git_hermit.model.bounded_json import TooDeep, TooLarge, load_bounded
    from git_hermit.model.records import check_note
    with pytest.raises(TooLarge):
        load_bounded(b"[" + b" " * 1000 + b"]", max_depth=5, max_bytes=100)
    with pytest.raises(TooDeep):
        load_bounded("[[[[[[]]]]]]", max_depth=5)
    with pytest.raises(UnicodeDecodeError):
        load_bounded(b'"\xff"', max_depth=5)
    assert "nested too deeply" in check_note("verdicts", DEEP)
    assert check_note("verdicts", b"\xff") .startswith("not UTF-8")
    assert check_note("scores", "{}").startswith("fails its schema")


def test_the_nesting_bound_counts_levels_not_brackets():
    """Many brackets side by side are one level; brackets inside strings are no level at all; the
    limit itself is allowed and one past it is not, whether the text holds few brackets or many."""
    from git_hermit.model.bounded_json import TooDeep, load_bounded
    wide = "[" + ",".join(["{}"] * 500) + "]"               # 501 brackets, 2 levels
    assert len(load_bounded(wide, max_depth=2)) == 500
    with pytest.raises(TooDeep):
        load_bounded(wide, max_depth=1)
    assert load_bounded('["[[[[[[[[[["]', max_depth=1) == ["[[[[[[[[[["]
    for depth in (5, 200):
        at_limit = "[" * depth + "]" * depth
        assert load_bounded(at_limit, max_depth=depth) is not None
        with pytest.raises(TooDeep):
            load_bounded("[" + at_limit + "]", max_depth=depth)
        padded = "[" + ",".join(["[]"] * 300) + "," + at_limit + "]"   # more brackets than the limit
        with pytest.raises(TooDeep):
            load_bounded(padded, max_depth=depth)
        assert load_bounded(padded, max_depth=depth + 1) is not None
