"""The tests against a real ``airlock serve`` (tests/live/), run as one suite around one
daemon: see harness.py for the environment it reads."""

from __future__ import annotations

import importlib
import os
import pkgutil
import unittest

import harness
import live


def load_tests(loader: unittest.TestLoader, tests: unittest.TestSuite, pattern: str) -> unittest.TestSuite:
    only = {m.strip() for m in os.environ.get("AIRLOCK_SDK_TESTS", "").split(",") if m.strip()}
    suite = harness.DaemonSuite()
    for mod in sorted(m.name for m in pkgutil.iter_modules(live.__path__)):
        if not only or mod in only:
            suite.addTests(loader.loadTestsFromModule(importlib.import_module(f"live.{mod}")))
    return suite
