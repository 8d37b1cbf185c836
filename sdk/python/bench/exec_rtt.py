#!/usr/bin/env python3
"""Exec round trips through the SDK, for `make bench-sdk`.

    AIRLOCK_HOST=... AIRLOCK_TOKEN=... python3 sdk/python/bench/exec_rtt.py SANDBOX_ID N

Runs 20 warm-up execs of ["true"] in the sandbox, then N timed ones, one at a time on one
Client (its connection kept alive, as a real client's is), and prints one JSON line:
{"ms": [d1, d2, ...]}, each round trip in milliseconds by the monotonic clock.
"""

from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # the tree's SDK

import airlock  # noqa: E402

WARMUP = 20


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    sandbox_id, n = sys.argv[1], int(sys.argv[2])
    with airlock.Client() as client:
        for _ in range(WARMUP):
            client.sandboxes.exec(sandbox_id, ["true"])
        ms = []
        for _ in range(n):
            start = time.perf_counter()
            result = client.sandboxes.exec(sandbox_id, ["true"])
            ms.append((time.perf_counter() - start) * 1000)
            if result.exit_code != 0:
                print(f"exec failed: {result}", file=sys.stderr)
                return 1
    print(json.dumps({"ms": [round(x, 4) for x in ms]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
