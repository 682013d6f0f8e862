"""`git hermit log` on a synthetic 10,000-step run (target ≤ 1 s): bench/log_1000.py with --steps 10000.

    python bench/log_10000.py [--repeat 5]
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import log_1000  # noqa: E402

if __name__ == "__main__":
    os.environ.setdefault("GIT_CONFIG_NOSYSTEM", "1")
    sys.argv[1:1] = ["--steps", "10000", "--target", "1", "--repeat", "5"]
    log_1000.main()
