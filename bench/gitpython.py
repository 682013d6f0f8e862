"""Benchmark: GitPython against gitio's own plumbing, for the operations git-hermit does most.

Where gitio uses GitPython and where it keeps its plumbing (issue 26, item 5: plumbing stays only
where GitPython is more than 1.5x slower on a hot path): each figure is printed with GitPython's
time, the plumbing's, and the ratio. Cases: importing the library (paid only by the commands that
init, read config or push/fetch: it is imported lazily), repository discovery (every command),
reading a config value (gitio now: GitPython's parser; before: one ``git config``), ``git init``,
reading 1,000 blobs through a persistent ``cat-file --batch`` (GitPython's GitCmdObjectDB vs
gitio.read_objects), and writing 1,000 blobs (GitPython's LooseObjectDB vs one ``fast-import``).
Usage: python bench/gitpython.py
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNS = 5


def isolated_env(home: Path) -> None:
    os.environ.update({"HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": str(home / ".gitconfig"),
                       "GIT_AUTHOR_NAME": "B", "GIT_AUTHOR_EMAIL": "b@e", "GIT_COMMITTER_NAME": "B",
                       "GIT_COMMITTER_EMAIL": "b@e"})


def median_s(fn, runs: int = RUNS) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def import_time(module: str) -> float:
    def once() -> None:
        subprocess.run([sys.executable, "-c", f"import {module}"], check=True)
    base = median_s(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True), runs=9)
    return max(median_s(once, runs=9) - base, 0.0)


def report(label: str, gitpython: float, gitio: float) -> None:
    ratio = gitpython / gitio if gitio > 0 else float("inf")
    print(f"{label:<38} GitPython {gitpython * 1000:8.2f} ms   gitio {gitio * 1000:8.2f} ms   ratio {ratio:5.2f}x")


def main() -> None:
    import git
    from git_hermit.gitio import Repo
    print(f"import (module only, over a bare start)  GitPython {import_time('git') * 1000:.1f} ms   "
          f"gitio {import_time('git_hermit.gitio') * 1000:.1f} ms")
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        isolated_env(tmp_path)
        path = tmp_path / "repo"
        subprocess.run(["git", "init", "-q", str(path)], check=True)
        (path / "sub").mkdir()
        contents = [f"blob {i}\n".encode() * 20 for i in range(1000)]
        blobs = tmp_path / "blobs"
        blobs.mkdir()
        for i, data in enumerate(contents):
            (blobs / str(i)).write_bytes(data)
        # into the object database itself (gitio's write_blobs quarantines them until a ref publishes)
        shas = subprocess.run(["git", "hash-object", "-w", "--stdin-paths"], cwd=path, check=True, text=True,
                              capture_output=True, input="".join(f"{blobs / str(i)}\n" for i in range(1000))
                              ).stdout.split()
        ours = Repo.discover(path)
        subprocess.run(["git", "remote", "add", "origin", str(tmp_path / "remote.git")], cwd=path, check=True)

        # What a command pays: gitio is imported by every command anyway; with GitPython discovering,
        # each (`log`, completion, a hook) would import git too
        def fresh(code: str) -> None:
            subprocess.run([sys.executable, "-c", code, str(path / "sub")], check=True)
        report("discover, in a fresh command process",
               median_s(lambda: fresh("import sys, git_hermit.gitio, git; "
                                      "git.Repo(sys.argv[1], search_parent_directories=True)"), runs=9),
               median_s(lambda: fresh("import sys, git_hermit.gitio as g; g.Repo.discover(sys.argv[1])"), runs=9))
        report("discover from a subdirectory (warm)", median_s(lambda: git.Repo(path / "sub", search_parent_directories=True)),
               median_s(lambda: Repo.discover(path / "sub")))

        def git_config() -> None:      # what gitio did before: one `git config` process
            subprocess.run(["git", "config", "--get", "remote.origin.url"], cwd=path, capture_output=True, check=True)
        report("read remote.origin.url (config)", median_s(lambda: ours.config_get("remote.origin.url"), runs=21),
               median_s(git_config, runs=21))

        def gitpython_init() -> None:
            git.Repo.init(tmp_path / f"init-{time.perf_counter_ns()}", mkdir=True).close()

        def git_init() -> None:
            subprocess.run(["git", "init", "-q", str(tmp_path / f"init-{time.perf_counter_ns()}")], check=True)
        report("git init", median_s(gitpython_init), median_s(git_init))

        theirs = git.Repo(path)
        binshas = [bytes.fromhex(s) for s in shas]
        report("read 1,000 blobs (persistent cat-file)",
               median_s(lambda: [theirs.odb.stream(b).read() for b in binshas]),
               median_s(lambda: ours.read_objects(shas)))

        def gitpython_write() -> None:
            from io import BytesIO
            from gitdb.base import IStream
            for i, data in enumerate(contents):
                theirs.odb.store(IStream("blob", len(data), BytesIO(data + str(time.perf_counter_ns()).encode())))

        def gitio_write() -> None:
            ours.write_blobs([c + str(time.perf_counter_ns()).encode() for c in contents])
        report("write 1,000 new blobs", median_s(gitpython_write, runs=3), median_s(gitio_write, runs=3))
        theirs.close()
        ours.close()


if __name__ == "__main__":
    main()
