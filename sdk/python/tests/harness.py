"""The test harness: a real ``airlock serve`` for the tests under live/, started once for all
of them (DaemonSuite), on loopback with its own data dir, and stopped at the end.

Environment (the contract of test/e2e/sdk_test.go):
  AIRLOCK_BIN                the daemon's binary (default: <repo>/bin/airlock)
  AIRLOCK_TEST_DATA_DIR      an empty dir for the daemon's data (default: a temporary one,
                             removed at the end)
  AIRLOCK_TEST_REQUIRE_ROOT  1: the live tests fail, instead of being skipped, when not root
  AIRLOCK_SDK_TESTS          run only these live modules (comma-separated, e.g. files,seed)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import unittest
from pathlib import Path
from typing import Any, Dict, List, Optional

SDK = Path(__file__).resolve().parents[1]
REPO = SDK.parents[1]
if str(SDK) not in sys.path:
    sys.path.insert(0, str(SDK))  # the SDK of this tree, installed or not

import airlock  # noqa: E402

#: The tenants whose keys the tests use; "limited" may have one sandbox at a time.
TENANTS = ("t1", "t2", "limited")

#: What the seed 000 test's agentId names (the lead's operator-defined agents).
AGENT_ID = "scanner"
AGENT_COMMAND = "echo scanning; sleep 3; echo scan done"


def config() -> Dict[str, Any]:
    """The daemon's configuration for the tests: process-level sandboxes by default (the seed
    test names container itself), the agent seed 000's snippet starts, and a tenant that may
    have one sandbox (for the 429 test)."""
    return {
        "defaults": {"isolation": "process"},
        "agents": {AGENT_ID: {"command": AGENT_COMMAND, "tenants": ["*"]}},
        "tenants": {"overrides": {"limited": {"maxSandboxes": 1}}},
    }


class Daemon:
    """One ``airlock serve`` process and the keys made for it."""

    def __init__(self) -> None:
        self.bin = os.environ.get("AIRLOCK_BIN") or str(REPO / "bin" / "airlock")
        given = os.environ.get("AIRLOCK_TEST_DATA_DIR")
        self._own_data = not given
        self.data_dir = given or tempfile.mkdtemp(prefix="airlock-sdk-py-data-")
        self._conf_dir = tempfile.mkdtemp(prefix="airlock-sdk-py-conf-")
        self.keys: Dict[str, str] = {}
        self.url = ""
        self._proc: Optional[subprocess.Popen] = None
        self._log: List[str] = []
        self._clients: List[airlock.Client] = []

    def log(self) -> str:
        """What the daemon wrote to stderr."""
        return "".join(self._log)

    def start(self) -> None:
        if not os.path.exists(self.bin):
            raise RuntimeError(f"no airlock binary at {self.bin}: run `make build` or set AIRLOCK_BIN")
        for tenant in TENANTS:
            self.keys[tenant] = self._key("--tenant", tenant)
        self.keys["admin"] = self._key("--admin")
        self._serve(config())

    def _key(self, *args: str) -> str:
        out = subprocess.run([self.bin, "keys", "create", *args, "--data-dir", self.data_dir],
                             check=True, capture_output=True, text=True, timeout=60)
        return out.stdout.strip()

    def _serve(self, cfg: Dict[str, Any]) -> None:
        path = os.path.join(self._conf_dir, "config.json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        self._log = []
        env = dict(os.environ, AIRLOCK_LOG="info")
        proc = subprocess.Popen([self.bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", self.data_dir,
                                 "--config", path], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, env=env, text=True)
        ready = threading.Event()

        def pump() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                self._log.append(line)
                m = re.search(r"url=(http://\S+)", line)
                if m and not self.url:
                    self.url = m.group(1)
                    ready.set()
            ready.set()

        self._pump = threading.Thread(target=pump, name="airlock-serve-stderr", daemon=True)
        self._pump.start()
        ready.wait(60)
        self._proc = proc
        if not self.url:
            self._reap(kill=True)
            raise RuntimeError(f"airlock serve did not start:\n{self.log()}")

    def _terminate_all(self) -> List[str]:
        """Terminates every sandbox the tests left, with every key."""
        problems = []
        for tenant, key in self.keys.items():
            try:
                with airlock.Client(key, self.url) as c:
                    for sb in c.sandboxes.list():
                        if sb.status != "terminated":
                            c.sandboxes.terminate(sb.id, missing_ok=True)
            except (airlock.AirlockError, OSError) as e:
                problems.append(f"terminating the sandboxes of {tenant}: {e}")
        return problems

    def _reap(self, kill: bool) -> Optional[int]:
        """Stops the daemon (SIGTERM, or SIGKILL); its exit status, or None when SIGTERM was
        not enough within 90 s."""
        proc, self._proc = self._proc, None
        if proc is None:
            return 0
        rc: Optional[int]
        if kill:
            proc.kill()
        else:
            proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(90)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            rc = None
        self._pump.join(10)
        if proc.stderr is not None:
            proc.stderr.close()
        return rc

    def client(self, tenant: str = "t1") -> airlock.Client:
        """A new client with a tenant's key (closed at stop)."""
        c = airlock.Client(self.keys[tenant], self.url)
        self._clients.append(c)
        return c

    def stop(self) -> List[str]:
        """Terminates every sandbox left, stops the daemon; returns what went wrong."""
        problems: List[str] = []
        if self._proc is not None:
            problems += self._terminate_all()
            for c in self._clients:
                c.close()
            rc = self._reap(kill=False)
            if rc is None:
                problems.append("airlock serve did not exit within 90 s of SIGTERM")
            elif rc != 0:
                problems.append(f"airlock serve exited with status {rc}")
        shutil.rmtree(self._conf_dir, ignore_errors=True)
        if self._own_data:
            shutil.rmtree(self.data_dir, ignore_errors=True)
        return problems


#: The daemon of this run, while DaemonSuite runs.
daemon: Optional[Daemon] = None


def current() -> Daemon:
    if daemon is None:
        raise unittest.SkipTest("no daemon: run the live tests through test_live.py")
    return daemon


def client(tenant: str = "t1") -> airlock.Client:
    """A Client of the test daemon with a tenant's key ("t1", "t2", "limited", "admin")."""
    return current().client(tenant)


def async_client(tenant: str = "t1") -> airlock.AsyncClient:
    """An AsyncClient of the test daemon (close it in the test)."""
    d = current()
    return airlock.AsyncClient(d.keys[tenant], d.url)


def sandbox(test: unittest.TestCase, c: Optional[airlock.Client] = None, **spec: Any) -> airlock.Sandbox:
    """A ready sandbox for one test, terminated when it ends."""
    c = c or client()
    sb = c.sandboxes.create(**spec)
    test.addCleanup(c.sandboxes.terminate, sb.id, missing_ok=True)
    return sb


class SandboxTest(unittest.TestCase):
    """Tests that share one sandbox (``self.sb``, made with ``spec``) and a client (``self.c``)."""

    spec: Dict[str, Any] = {}
    c: airlock.Client
    sb: airlock.Sandbox

    @classmethod
    def setUpClass(cls) -> None:
        cls.c = client()
        cls.sb = cls.c.sandboxes.create(**cls.spec)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.c.sandboxes.terminate(cls.sb.id, missing_ok=True)


def load_script(path: Path) -> Any:
    """A script of the SDK's tree (scripts/gen_models.py, _build/airlock_build.py) as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class StopCheck(unittest.TestCase):
    """The last test of the run: the daemon stops cleanly (exit 0 on SIGTERM)."""

    def test_daemon_stops_cleanly(self) -> None:
        global daemon
        d, daemon = daemon, None
        if d is None:
            self.skipTest("the daemon did not start")
        problems = d.stop()
        self.assertEqual(problems, [], "\n".join(problems) + "\n--- airlock serve's log ---\n" + d.log())


class DaemonSuite(unittest.TestSuite):
    """Runs its tests against one daemon, started before the first and stopped by the last
    (StopCheck); prints the daemon's log when a test failed."""

    def run(self, result: unittest.TestResult, debug: bool = False) -> unittest.TestResult:
        global daemon
        if os.geteuid() != 0:
            why = "the live tests need root (cgroups, namespaces)"
            if os.environ.get("AIRLOCK_TEST_REQUIRE_ROOT") == "1":
                result.addError(StopCheck("test_daemon_stops_cleanly"), _exc(RuntimeError(why)))
                return result
            return self._skip_all(result, why)
        d = Daemon()
        try:
            d.start()
        except Exception as e:  # noqa: BLE001: any failure to start fails the run
            result.addError(StopCheck("test_daemon_stops_cleanly"), _exc(e))
            d.stop()
            return result
        daemon = d
        self.addTest(StopCheck("test_daemon_stops_cleanly"))
        failures = len(result.failures) + len(result.errors)
        try:
            super().run(result, debug)
        finally:
            if daemon is not None:  # StopCheck did not run (failfast, ^C)
                daemon = None
                d.stop()
            if len(result.failures) + len(result.errors) > failures:
                sys.stderr.write("\n--- airlock serve's log ---\n" + d.log() + "--- end of the log ---\n")
        return result

    def _skip_all(self, result: unittest.TestResult, why: str) -> unittest.TestResult:
        for test in _flatten(self):
            result.startTest(test)
            result.addSkip(test, why)
            result.stopTest(test)
        return result


def _flatten(suite: unittest.TestSuite) -> List[unittest.TestCase]:
    out: List[unittest.TestCase] = []
    for t in suite:
        out.extend(_flatten(t) if isinstance(t, unittest.TestSuite) else [t])  # type: ignore[arg-type]
    return out


def _exc(e: BaseException) -> Any:
    return (type(e), e, e.__traceback__)
