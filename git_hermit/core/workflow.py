"""The GitHub Actions workflow `git hermit init --github` writes, made to run as shipped.

Its install step installs this same git-hermit, read from the installation's own record (PEP 610
``direct_url.json``): a release by its exact version, a direct-URL install by its URL (and a VCS
install's commit), a local checkout (a directory, editable or not) through the repository variable
``HERMIT_INSTALL``, the job failing at once with what to set while it is unset.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

WORKFLOW_PATH = ".github/workflows/hermit-step.yml"
INSTALL_VARIABLE = "HERMIT_INSTALL"
EXTRAS = "git-hermit[openai,anthropic]"
# what the secrets feed: {secret: the hermit.yaml keys init --github points at it}
SECRETS = {"OPENAI_API_KEY": ("agent.provider.env_key", "evolver.model.provider.env_key")}


@dataclass(frozen=True)
class InstallSource:
    """Where this git-hermit came from, as pip can install it again on a runner."""

    kind: Literal["release", "url", "local"]
    requirement: str | None        # the pip requirement (None: local, the repository variable gives it)
    origin: str                    # what the header says (the version, the URL and commit, the checkout)


def install_source(direct_url: dict[str, Any] | None, version: str) -> InstallSource:
    """PEP 610: no ``direct_url.json`` is an index install (a release); ``vcs_info`` a VCS URL at a
    commit; ``archive_info`` an archive URL; ``dir_info`` (or any ``file:`` URL) a local directory."""
    if not direct_url:
        return InstallSource("release", f"{EXTRAS}=={version}", f"git-hermit {version} from the package index")
    url = str(direct_url.get("url") or "")
    vcs = direct_url.get("vcs_info")
    if url.startswith("file:") or "dir_info" in direct_url or not url:
        return InstallSource("local", None, "a local checkout")
    if isinstance(vcs, dict) and vcs.get("vcs") and vcs.get("commit_id"):
        requirement = f"{EXTRAS} @ {vcs['vcs']}+{url}@{vcs['commit_id']}"
        subdirectory = direct_url.get("subdirectory")
        if subdirectory:
            requirement += f"#subdirectory={subdirectory}"
        return InstallSource("url", requirement, f"{url} at {vcs['commit_id']}")
    archive = direct_url.get("archive_info")
    hashes = archive.get("hashes") if isinstance(archive, dict) else None
    fragment = f"#sha256={hashes['sha256']}" if isinstance(hashes, dict) and hashes.get("sha256") else ""
    return InstallSource("url", f"{EXTRAS} @ {url}{fragment}", url)


def this_installation() -> InstallSource:
    """The install source of the running git-hermit (its distribution's PEP 610 record)."""
    import importlib.metadata
    from git_hermit import __version__
    try:
        text = importlib.metadata.distribution("git-hermit").read_text("direct_url.json")
    except importlib.metadata.PackageNotFoundError:     # run from a source tree, never installed
        return InstallSource("local", None, "a source tree")
    try:
        data = json.loads(text) if text else None
    except ValueError:
        data = None
    return install_source(data if isinstance(data, dict) else None, __version__)


def _install_steps(source: InstallSource) -> str:
    """The workflow's install steps (YAML, indented as steps of a job)."""
    if source.requirement is not None:
        return ("      - name: Install git-hermit (" + source.origin.replace('"', "'") + ")\n"
                "        run: python -m pip install " + json.dumps(source.requirement) + "\n")
    return (f"      - name: Install git-hermit (the repository variable {INSTALL_VARIABLE})\n"
            f"        env:\n"
            f"          {INSTALL_VARIABLE}: ${{{{ vars.{INSTALL_VARIABLE} }}}}\n"
            f"        run: python -m pip install \"${INSTALL_VARIABLE}\"\n")


def _check_step(source: InstallSource) -> str:
    """A local checkout cannot be installed on a runner: the first step fails at once, saying what to set."""
    if source.requirement is not None:
        return ""
    message = (f"git-hermit was installed from {source.origin} when init wrote this workflow: set the repository "
               f"variable {INSTALL_VARIABLE} (Settings > Secrets and variables > Actions > Variables) to what pip "
               f"installs it from, e.g. {EXTRAS} @ git+https://github.com/OWNER/git-hermit@COMMIT")
    return (f"      - name: Check the install source (the repository variable {INSTALL_VARIABLE})\n"
            f"        env:\n"
            f"          {INSTALL_VARIABLE}: ${{{{ vars.{INSTALL_VARIABLE} }}}}\n"
            f"        run: |\n"
            f"          if [ -z \"${INSTALL_VARIABLE}\" ]; then\n"
            f"            echo {json.dumps('::error::' + message)}\n"
            f"            exit 1\n"
            f"          fi\n")


def workflow_text(*, host: str, source: InstallSource | None = None) -> str:
    """The workflow of templates/github/, installing ``source`` (default: this installation) and the
    pinned ``host`` CLI (the one the run's hermit.yaml names: no host is this module's default)."""
    from git_hermit.resources import templates_dir
    source = source or this_installation()
    text = (templates_dir() / "github" / "hermit-step.yml").read_text()
    return (text.replace("@CHECK_INSTALL@\n", _check_step(source))
            .replace("@INSTALL@\n", _install_steps(source))
            .replace("@HOST@", host)
            .replace("@INSTALL_ORIGIN@", source.origin))
