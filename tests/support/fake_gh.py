"""A stateful, recording stand-in for the GitHub CLI (no network in tests).

``install(bin_dir, state_dir)`` writes an executable ``gh`` into ``bin_dir`` that keeps one
repository's pull requests, labels and commit statuses in ``state_dir/state.json`` and appends
every call to ``state_dir/calls.jsonl`` (argv, and the text of a ``--body-file``). It answers
the subset of gh that git-hermit uses, the way gh does:

- ``pr list [--head H] [--base B] [--state open|closed|merged|all] [--json F,..] [--limit N]``
- ``pr view SEL [--json F,..]`` (SEL: number, URL or head branch)
- ``pr create --base B --head H --title T (--body-file F | --body B) [--label L]``: fails like gh
  when an open pull request for H exists ("a pull request for branch ... already exists")
- ``pr edit SEL [--title] [--body-file|--body] [--base] [--add-label L,..] [--remove-label L,..]``:
  a label must exist in the repository (gh: "'x' not found")
- ``pr comment SEL (--body-file F | --body B)`` (kept in the pull request's ``comments``)
- ``label create NAME [--color] [--description] [--force]``
- ``api [-X|--method M] repos/{owner}/{repo}/statuses/SHA -f state=.. -f context=.. -f description=..``
  (``{owner}/{repo}`` or the repository's own OWNER/REPO), and GET ``.../commits/SHA/statuses``

``FakeGitHub(state_dir)`` is the test's side: ``calls()``, ``prs()``, ``statuses(sha)``, and
``merge(n)`` / ``close(n)`` for what a reviewer does on github.com.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

REPO = "acme/widgets"
FIELDS = ("number", "state", "headRefName", "baseRefName", "url", "title", "body", "labels")


def install(bin_dir: Path, state_dir: Path, repo: str = REPO) -> dict[str, str]:
    """Write ``bin_dir/gh``; returns the environment entries that put it first on PATH."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    state_dir.mkdir(parents=True, exist_ok=True)
    state = state_dir / "state.json"
    if not state.exists():
        state.write_text(json.dumps({"repo": repo, "next": 1, "prs": [], "labels": {}, "statuses": {}}))
    gh = bin_dir / "gh"
    gh.write_text(f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(Path(__file__).parent)!r})\n"
                  f"import fake_gh\nsys.exit(fake_gh.main(sys.argv[1:], {str(state_dir)!r}))\n")
    gh.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}


class FakeGitHub:
    def __init__(self, state_dir: Path) -> None:
        self.dir = Path(state_dir)

    def _load(self) -> dict[str, Any]:
        return json.loads((self.dir / "state.json").read_text())

    def _save(self, state: dict[str, Any]) -> None:
        (self.dir / "state.json").write_text(json.dumps(state, indent=1))

    def calls(self) -> list[dict[str, Any]]:
        path = self.dir / "calls.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []

    def argvs(self, *prefix: str) -> list[list[str]]:
        """The calls' argv lists that start with ``prefix`` (``"pr", "edit"``)."""
        return [c["argv"] for c in self.calls() if c["argv"][:len(prefix)] == list(prefix)]

    def prs(self) -> list[dict[str, Any]]:
        return self._load()["prs"]

    def pr(self, head: str) -> dict[str, Any]:
        return next(p for p in reversed(self.prs()) if p["head"] == head)

    def statuses(self, sha: str) -> list[dict[str, Any]]:
        return self._load()["statuses"].get(sha, [])

    def _set(self, number: int, state: str) -> None:
        data = self._load()
        next(p for p in data["prs"] if p["number"] == number)["state"] = state
        self._save(data)

    def merge(self, number: int) -> None:
        self._set(number, "MERGED")

    def close(self, number: int) -> None:
        self._set(number, "CLOSED")


# ------------------------------------------------------------------------------------ the gh side
class _Fail(Exception):
    pass


def _opts(args: list[str], flags: dict[str, str]) -> tuple[list[str], dict[str, list[str]]]:
    """Positional arguments and {canonical option: [values]}; ``flags`` maps each spelling to its name."""
    pos: list[str] = []
    found: dict[str, list[str]] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        name, _, inline = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        if name in flags:
            key = flags[name]
            if key.endswith("!"):      # a switch
                found.setdefault(key[:-1], []).append("1")
                i += 1
                continue
            value = inline if inline else args[i + 1]
            found.setdefault(key, []).append(value)
            i += 1 if inline else 2
        elif arg.startswith("-"):
            raise _Fail(f"unknown flag: {arg}")
        else:
            pos.append(arg)
            i += 1
    return pos, found


def _view(state: dict[str, Any], pr: dict[str, Any], fields: list[str]) -> dict[str, Any]:
    full = {"number": pr["number"], "state": pr["state"], "headRefName": pr["head"], "baseRefName": pr["base"],
            "url": pr["url"], "title": pr["title"], "body": pr["body"],
            "labels": [{"name": name} for name in pr["labels"]]}
    return {f: full[f] for f in fields} if fields else full


def _select(state: dict[str, Any], sel: str) -> dict[str, Any]:
    number = sel.rsplit("/", 1)[-1]
    if number.isdigit():
        for pr in state["prs"]:
            if pr["number"] == int(number):
                return pr
    heads = [p for p in state["prs"] if p["head"] == sel]
    open_ = [p for p in heads if p["state"] == "OPEN"]
    if open_ or heads:
        return (open_ or heads)[-1]
    raise _Fail(f'no pull requests found for branch "{sel}"')


def _body(found: dict[str, list[str]]) -> str | None:
    if "body-file" in found:
        return Path(found["body-file"][-1]).read_text()
    return found["body"][-1] if "body" in found else None


def _labels(found: dict[str, list[str]], key: str) -> list[str]:
    return [name.strip() for value in found.get(key, []) for name in value.split(",") if name.strip()]


def _pr(state: dict[str, Any], args: list[str]) -> str:
    sub, rest = args[0], args[1:]
    if sub == "list":
        _, found = _opts(rest, {"--head": "head", "-H": "head", "--base": "base", "-B": "base", "--state": "state",
                                "-s": "state", "--json": "json", "--limit": "limit", "-L": "limit"})
        want = (found.get("state") or ["open"])[-1].upper()
        prs = [p for p in state["prs"] if want == "ALL" or p["state"] == want]
        if "head" in found:
            prs = [p for p in prs if p["head"] == found["head"][-1]]
        if "base" in found:
            prs = [p for p in prs if p["base"] == found["base"][-1]]
        prs = sorted(prs, key=lambda p: -p["number"])[: int((found.get("limit") or ["30"])[-1])]
        fields = (found.get("json") or [""])[-1].split(",") if "json" in found else []
        return json.dumps([_view(state, p, [f for f in fields if f]) for p in prs]) if "json" in found else \
            "".join(f"{p['number']}\t{p['title']}\t{p['head']}\t{p['state']}\n" for p in prs)
    if sub == "view":
        pos, found = _opts(rest, {"--json": "json"})
        pr = _select(state, pos[0])
        fields = [f for f in (found.get("json") or [""])[-1].split(",") if f]
        return json.dumps(_view(state, pr, fields))
    if sub == "create":
        _, found = _opts(rest, {"--base": "base", "-B": "base", "--head": "head", "-H": "head", "--title": "title",
                                "-t": "title", "--body-file": "body-file", "-F": "body-file", "--body": "body",
                                "-b": "body", "--label": "label", "-l": "label", "--draft": "draft!", "-d": "draft!"})
        head, base = found["head"][-1], found["base"][-1]
        for pr in state["prs"]:
            if pr["head"] == head and pr["state"] == "OPEN":
                raise _Fail(f'a pull request for branch "{head}" into branch "{pr["base"]}" already exists:\n{pr["url"]}')
        labels = _labels(found, "label")
        missing = [name for name in labels if name not in state["labels"]]
        if missing:
            raise _Fail(f"could not add label: '{missing[0]}' not found")
        number = state["next"]
        state["next"] += 1
        url = f"https://github.com/{state['repo']}/pull/{number}"
        state["prs"].append({"number": number, "head": head, "base": base, "state": "OPEN", "url": url,
                             "title": found["title"][-1], "body": _body(found) or "", "labels": labels})
        return url + "\n"
    if sub == "edit":
        pos, found = _opts(rest, {"--base": "base", "-B": "base", "--title": "title", "-t": "title",
                                  "--body-file": "body-file", "-F": "body-file", "--body": "body", "-b": "body",
                                  "--add-label": "add-label", "--remove-label": "remove-label"})
        pr = _select(state, pos[0])
        missing = [name for name in _labels(found, "add-label") if name not in state["labels"]]
        if missing:
            raise _Fail(f"'{missing[0]}' not found")
        if "title" in found:
            pr["title"] = found["title"][-1]
        body = _body(found)
        if body is not None:
            pr["body"] = body
        if "base" in found:
            pr["base"] = found["base"][-1]
        gone = set(_labels(found, "remove-label"))
        pr["labels"] = [n for n in pr["labels"] if n not in gone]
        pr["labels"] += [n for n in _labels(found, "add-label") if n not in pr["labels"]]
        return pr["url"] + "\n"
    if sub == "comment":
        pos, found = _opts(rest, {"--body-file": "body-file", "-F": "body-file", "--body": "body", "-b": "body"})
        pr = _select(state, pos[0])
        pr.setdefault("comments", []).append(_body(found) or "")
        return f"{pr['url']}#issuecomment-{len(pr['comments'])}\n"
    raise _Fail(f"unknown command: pr {sub}")


def _label(state: dict[str, Any], args: list[str]) -> str:
    if args[0] != "create":
        raise _Fail(f"unknown command: label {args[0]}")
    pos, found = _opts(args[1:], {"--color": "color", "-c": "color", "--description": "description",
                                  "-d": "description", "--force": "force!", "-f": "force!"})
    name = pos[0]
    if name in state["labels"] and "force" not in found:
        raise _Fail(f"label with name \"{name}\" already exists; use `--force` to update its color and description")
    state["labels"][name] = {"color": (found.get("color") or [""])[-1],
                             "description": (found.get("description") or [""])[-1]}
    return ""


def _api(state: dict[str, Any], args: list[str]) -> str:
    pos, found = _opts(args, {"-X": "method", "--method": "method", "-f": "field", "--raw-field": "field",
                              "-F": "field", "--field": "field"})
    path = pos[0].lstrip("/").replace("{owner}/{repo}", state["repo"])
    fields = dict(f.split("=", 1) for f in found.get("field", []))
    method = (found.get("method") or ["POST" if fields else "GET"])[-1].upper()
    prefix = f"repos/{state['repo']}/"
    if not path.startswith(prefix):
        raise _Fail("HTTP 404: Not Found (https://api.github.com/" + path + ")")
    parts = path[len(prefix):].split("/")
    if method == "POST" and len(parts) == 2 and parts[0] == "statuses":
        if fields.get("state") not in ("error", "failure", "pending", "success"):
            raise _Fail("HTTP 422: Validation Failed (state)")
        if len(fields.get("description", "")) > 140:
            raise _Fail("HTTP 422: Validation Failed (description is too long (maximum is 140 characters))")
        status = {k: fields[k] for k in ("state", "context", "description", "target_url") if k in fields}
        kept = [s for s in state["statuses"].get(parts[1], []) if s.get("context", "").lower()
                != status.get("context", "default").lower()]
        state["statuses"][parts[1]] = kept + [status]
        return json.dumps(status) + "\n"
    if method == "GET" and len(parts) == 4 and parts[0] == "commits" and parts[2] == "statuses":
        return json.dumps(state["statuses"].get(parts[1], [])) + "\n"
    raise _Fail("HTTP 404: Not Found (https://api.github.com/" + path + ")")


def main(argv: list[str], state_dir: str) -> int:
    here = Path(state_dir)
    entry: dict[str, Any] = {"argv": argv}
    for flag in ("--body-file", "-F"):
        if flag in argv and argv[:1] == ["pr"]:
            entry["body"] = Path(argv[argv.index(flag) + 1]).read_text()
    with open(here / "calls.jsonl", "a") as log:
        log.write(json.dumps(entry) + "\n")
    state = json.loads((here / "state.json").read_text())
    try:
        if argv[:1] == ["pr"]:
            out = _pr(state, argv[1:])
        elif argv[:1] == ["label"]:
            out = _label(state, argv[1:])
        elif argv[:1] == ["api"]:
            out = _api(state, argv[1:])
        else:
            raise _Fail(f"unknown command {argv[:1]} for gh (the stand-in)")
    except (_Fail, IndexError, KeyError) as exc:
        sys.stderr.write(f"{exc}\n")
        return 1
    (here / "state.json").write_text(json.dumps(state, indent=1))
    sys.stdout.write(out)
    return 0
