"""GitHub webhook payloads as Actions hands them over in ``$GITHUB_EVENT_PATH``, shaped as GitHub's
webhook documentation (and @octokit/webhooks-examples) show them, trimmed to the fields a consumer
reads plus enough of the rest to be recognisable: ``issue_comment`` on a pull request,
``pull_request_review`` and ``pull_request_review_comment``."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

REPO = {"id": 1296269, "name": "hello-world", "full_name": "octocat/hello-world", "private": False,
        "html_url": "https://github.com/octocat/hello-world", "default_branch": "main"}
_ids = itertools.count(1001)


def user(login: str, kind: str = "User") -> dict[str, Any]:
    return {"login": login, "id": 583231, "node_id": "MDQ6VXNlcjU4MzIzMQ==", "type": kind,
            "site_admin": False, "html_url": f"https://github.com/{login.replace('[bot]', '')}"}


def _pull_request(number: int, head: str, base: str) -> dict[str, Any]:
    return {"url": f"https://api.github.com/repos/octocat/hello-world/pulls/{number}", "id": 279147437,
            "number": number, "state": "open", "title": f"hermit step ({head})", "user": user("github-actions[bot]", "Bot"),
            "html_url": f"https://github.com/octocat/hello-world/pull/{number}",
            "head": {"label": f"octocat:{head}", "ref": head, "sha": "ec26c3e57ca3a959ca5aad62de7213c562f8c821",
                     "repo": REPO},
            "base": {"label": f"octocat:{base}", "ref": base, "sha": "f95f852bd8fca8fcc58a9a2d6c842781e32a215e",
                     "repo": REPO},
            "author_association": "NONE"}


def _comment(body: str, login: str, association: str, kind: str, number: int, *, review: bool = False) -> dict:
    cid = next(_ids)
    anchor = (f"#discussion_r{cid}" if review else f"#issuecomment-{cid}")
    return {"id": cid, "node_id": "MDEyOklzc3VlQ29tbWVudDE=", "body": body, "user": user(login, kind),
            "author_association": association, "created_at": "2026-12-02T06:30:00Z",
            "updated_at": "2026-12-02T06:30:00Z",
            "html_url": f"https://github.com/octocat/hello-world/pull/{number}{anchor}"}


def issue_comment(body: str, *, login: str = "alice", association: str = "COLLABORATOR", kind: str = "User",
                  action: str = "created", number: int = 7, pull_request: bool = True) -> dict[str, Any]:
    """A comment in a pull request's conversation (GitHub sends PR conversation comments as issue_comment:
    ``issue.pull_request`` is present only when the issue is a pull request; no head ref is named)."""
    issue: dict[str, Any] = {"url": f"https://api.github.com/repos/octocat/hello-world/issues/{number}",
                             "number": number, "title": "hermit step", "state": "open", "user": user("github-actions[bot]", "Bot"),
                             "html_url": f"https://github.com/octocat/hello-world/pull/{number}"}
    if pull_request:
        issue["pull_request"] = {"url": f"https://api.github.com/repos/octocat/hello-world/pulls/{number}",
                                 "html_url": f"https://github.com/octocat/hello-world/pull/{number}"}
    payload: dict[str, Any] = {"action": action, "issue": issue,
                               "comment": _comment(body, login, association, kind, number),
                               "repository": REPO, "sender": user(login, kind)}
    if action == "edited":
        payload["changes"] = {"body": {"from": "an earlier text"}}
    return payload


def pull_request_review(body: str, *, head: str, base: str = "main", login: str = "alice",
                        association: str = "COLLABORATOR", kind: str = "User", state: str = "commented",
                        action: str = "submitted", number: int = 7) -> dict[str, Any]:
    rid = next(_ids)
    return {"action": action,
            "review": {"id": rid, "node_id": "MDE3OlB1bGxSZXF1ZXN0UmV2aWV3MQ==", "user": user(login, kind),
                       "body": body, "commit_id": "ec26c3e57ca3a959ca5aad62de7213c562f8c821",
                       "submitted_at": "2026-12-02T06:31:00Z", "state": state,
                       "html_url": f"https://github.com/octocat/hello-world/pull/{number}#pullrequestreview-{rid}",
                       "author_association": association},
            "pull_request": _pull_request(number, head, base), "repository": REPO, "sender": user(login, kind)}


def pull_request_review_comment(body: str, *, head: str, base: str = "main", login: str = "alice",
                                association: str = "COLLABORATOR", kind: str = "User", action: str = "created",
                                number: int = 7, path: str = "adapter/AGENTS.md", line: int = 3) -> dict[str, Any]:
    comment = _comment(body, login, association, kind, number, review=True)
    comment.update({"path": path, "line": line, "side": "RIGHT", "diff_hunk": "@@ -1,3 +1,4 @@",
                    "pull_request_review_id": next(_ids), "commit_id": "ec26c3e57ca3a959ca5aad62de7213c562f8c821"})
    return {"action": action, "comment": comment, "pull_request": _pull_request(number, head, base),
            "repository": REPO, "sender": user(login, kind)}


def write(path: Path, payload: dict[str, Any]) -> Path:
    path.write_text(json.dumps(payload, indent=2))
    return path
