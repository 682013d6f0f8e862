"""Redaction speed and false positives: `redact()` over a large trajectory (every stored
rollout artefact passes through it; trajectories reach 100 MB), and the findings on ordinary
text (sample Codex trajectories, git SHAs, UUIDs, digests), which must be none.

    python bench/redaction.py [--mb 100] [--trajectories ../shared/data/trajectories]
"""

from __future__ import annotations

import argparse
import hashlib
import time
import uuid
from pathlib import Path

from git_hermit.redact import findings, redact


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--trajectories", type=Path,
                        default=Path(__file__).resolve().parents[2] / "shared" / "data" / "trajectories")
    args = parser.parse_args()
    samples = [p.read_text() for p in sorted(args.trajectories.glob("*.jsonl"))]
    ids = "\n".join(f"commit {hashlib.sha1(str(i).encode()).hexdigest()} {uuid.uuid4()} "
                    f"{hashlib.sha256(str(i).encode()).hexdigest()}" for i in range(2000))
    corpus = "\n".join(samples) if samples else ids
    found = findings(corpus) + findings(ids)
    print(f"false positives: {len(found)} in {len(corpus) / 1e3:.0f} KB of trajectories and 2,000 "
          f"SHA/UUID/digest lines {found[:5]}")
    big = corpus * max(1, (args.mb * 1024 * 1024) // len(corpus))
    started = time.perf_counter()
    redact(big)
    elapsed = time.perf_counter() - started
    print(f"redact() over {len(big) / 1e6:.0f} MB: {elapsed:.1f} s = {len(big) / 1e6 / elapsed:.1f} MB/s")
    return 0 if not found else 1


if __name__ == "__main__":
    raise SystemExit(main())
