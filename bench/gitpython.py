"""Benchmark: GitPython against gitio's own plumbing, for the operations git-hermit does most.

Why gitio does not use GitPython (issue 14, item 7): each figure is printed with GitPython's
time, gitio's, and the ratio. Cases: importing the library (every command pays it, shell
completion too), repository discovery, reading 1,000 blobs through a persistent
``cat-file --batch`` (GitPython's GitCmdObjectDB vs gitio.read_objects), and writing 1,000
blobs (GitPython's LooseObjectDB vs one ``fast-import``). Usage: python bench/gitpython.py
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
    import git  # GitPython: only this benchmark imports it
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
        ours = Repo.discover(path)
        shas = ours.write_blobs(contents)

        report("discover from a subdirectory", median_s(lambda: git.Repo(path / "sub", search_parent_directories=True)),
               median_s(lambda: Repo.discover(path / "sub")))

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
