"""Secrets never leave: a unique secret planted in every place a user gives one (the store's
URL in the environment and in --db, in every form a DSN takes; the server's URL of ``bench
run``, as a password and as a query key; the API key as an option and in the environment; a
cloud SDK's credentials and endpoint), then every command that could touch it, failures and
``--dry-run`` included, run as a user runs them. The secret appears in no stdout, no stderr,
no file written (reports, results, the SQLite store's bytes) and no log.

The servers are real: a PostgreSQL URL on a port where nothing listens (refused at once), and a
loopback HTTP server that answers every request 401, echoing the credentials it was sent (as an
OpenAI-compatible server quoting the key it refuses)."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.dashboard.browser import free_port
from tests.e2e.test_cli import PLANNER

SECRET = f"Pl4nted{uuid.uuid4().hex[:12]}"  # a password, a key, a token: one string to find
KEY = f"sk-{SECRET}"  # an API key holding it


class _EchoCredentials(BaseHTTPRequestHandler):
    """Refuses every request with 401, quoting the Authorization it got (Basic decoded)."""

    def _refuse(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        sent = self.headers.get("Authorization", "")
        if sent.lower().startswith("basic "):
            sent += " = " + base64.b64decode(sent[6:]).decode("utf-8", "replace")
        body = json.dumps({"error": {"message": f"Incorrect API key provided: {sent}"}}).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = _refuse  # noqa: N815 - http.server's names
    do_POST = _refuse  # noqa: N815

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def echo_server() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EchoCredentials)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Case:
    """One command line and where its secret was planted."""

    name: str
    args: list[str]
    env: dict[str, str] = field(default_factory=dict)
    home: str = ""  # commands that share a store run in order, in one home
    result: subprocess.CompletedProcess[str] | None = None


def _env(home: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PLANNER_", "AWS_", "OPENAI_", "AZURE_", "GOOGLE_"))
    }
    env.update(
        PLANNER_HOME=str(home),
        COLUMNS="200",
        # Present in every command's environment: nothing may print or keep it.
        OPENAI_API_KEY=KEY,
        AWS_ACCESS_KEY_ID=f"AKIA{SECRET}",
        AWS_SECRET_ACCESS_KEY=SECRET,
        AWS_SESSION_TOKEN=SECRET,
        AWS_EC2_METADATA_DISABLED="true",
        AWS_MAX_ATTEMPTS="1",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_CONFIG_FILE=os.devnull,
        AWS_SHARED_CREDENTIALS_FILE=os.devnull,
    )
    env.update(extra)
    return env


def _run(case: Case, root: Path) -> None:
    home = root / (case.home or case.name)
    home.mkdir(parents=True, exist_ok=True)
    case.result = subprocess.run(
        [PLANNER, *case.args],
        capture_output=True,
        text=True,
        env=_env(home, case.env),
        cwd=home,
        timeout=120,
        check=False,
    )


def _cases(tmp_path: Path, echo_port: int) -> list[Case]:
    closed = free_port()  # nothing listens there
    pg = f"postgresql://planner:{SECRET}@127.0.0.1:1/fleet"
    dsns = {
        "userinfo": pg,
        "query": f"postgresql://127.0.0.1:1/fleet?user=planner&password={SECRET}",
        "at-in-password": f"postgresql://planner:p@{SECRET}@127.0.0.1:1/fleet",
        "bad-port": f"postgresql://planner:{SECRET}@127.0.0.1:notaport/fleet",
        "libpq": f"host=127.0.0.1 port=1 user=planner password={SECRET}",
        "no-driver": f"mysql://planner:{SECRET}@127.0.0.1:1/fleet",
    }
    log = tmp_path / "log.csv"
    log.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        + "".join(f"2023-11-16 00:00:{i:02d}.000,{100 + i},{10 + i}\n" for i in range(20))
    )
    env_db = {"PLANNER_DATABASE_URL": pg}
    once = ("--model", "m", "--requests", "1", "--warmup", "0", "--no-store")

    def bench(url: str, *args: str) -> list[str]:
        return ["bench", "run", "--url", url, *args]

    cases = [
        # The store's URL from the environment, through every command that opens the store.
        Case("env-dashboard-dry-run", ["dashboard", "--dry-run"], env_db),
        Case("env-dashboard-remote", ["dashboard", "--host", "0.0.0.0", "--dry-run"], env_db),
        Case("env-db-status", ["db", "status"], env_db),
        Case("env-db-upgrade", ["db", "upgrade"], env_db),
        Case("env-datasets-list", ["datasets", "list"], env_db),
        Case("env-ingest", ["ingest", str(log), "--name", "x"], env_db),
        Case("env-bench-runs-list", ["bench", "runs", "list"], env_db),
        Case("env-recommendations-list", ["recommendations", "list"], env_db),
        Case("env-prices-list", ["prices", "list"], env_db),
        Case("env-help", ["db", "status", "--help"], env_db),
        # --db, in every form a DSN takes, failing to connect or to be read.
        *(Case(f"db-{kind}", ["--db", url, "db", "status"]) for kind, url in dsns.items()),
        Case("db-datasets-list", ["--db", dsns["query"], "datasets", "list", "--json"]),
        Case("db-dashboard-dry-run", ["--db", dsns["query"], "dashboard", "--dry-run"]),
        Case("db-help", ["--db", pg, "datasets", "--help"]),
        # bench run: the server's URL and the API key.
        Case(
            "bench-url-password-unreachable",
            bench(f"http://user:{SECRET}@127.0.0.1:{closed}", *once, "--timeout", "5"),
        ),
        Case(
            "bench-url-at-in-password", bench(f"http://user:a/b@{SECRET}@127.0.0.1:{closed}", *once)
        ),
        Case("bench-url-api-key-query", bench(f"http://127.0.0.1:{closed}/?api_key={SECRET}")),
        Case(
            "bench-list-models-echo",  # no --model: GET /v1/models, refused with the key quoted
            bench(f"http://user:{SECRET}@127.0.0.1:{echo_port}", "--no-store", "--timeout", "5"),
        ),
        Case(
            "bench-api-key-option-echo",
            bench(f"http://127.0.0.1:{echo_port}", *once, "--api-key", KEY, "--json"),
            env={"OPENAI_API_KEY": ""},
        ),
        # A run refused with both secrets quoted, stored (SQLite) and written, then read back.
        Case(
            "bench-stored-run",
            bench(
                f"http://user:{SECRET}@127.0.0.1:{echo_port}/v1",
                *("--model", "m", "--requests", "2", "--warmup", "1", "--timeout", "5"),
                *("--name", "echoed", "--out", "run.json"),
            ),
            home="stored",
        ),
        Case("bench-runs-list", ["bench", "runs", "list", "--json"], home="stored"),
        Case("bench-runs-show", ["bench", "runs", "show", "echoed", "--json"], home="stored"),
        # A cloud SDK's credentials and an endpoint URL with a password (botocore names the
        # endpoint in its error); the failed refresh is recorded in the store.
        Case(
            "prices-refresh-aws",
            ["prices", "refresh", "--provider", "aws", "--region", "us-east-1"],
            env={"AWS_ENDPOINT_URL": f"http://user:{SECRET}@127.0.0.1:{closed}"},
            home="refresh",
        ),
        Case("prices-versions", ["prices", "versions", "--json"], home="refresh"),
    ]
    return cases


def _dashboard_start_up_line(home: Path) -> str:
    """What ``planner dashboard`` prints before Streamlit takes the process (then stopped)."""
    home.mkdir(parents=True, exist_ok=True)
    env = _env(home, {"PLANNER_DATABASE_URL": f"postgresql://planner:{SECRET}@127.0.0.1:1/x"})
    process = subprocess.Popen(
        [PLANNER, "dashboard", "--port", str(free_port())],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=home,
        start_new_session=True,
    )
    try:
        assert process.stderr is not None
        lines = [process.stderr.readline(), process.stderr.readline()]
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    return "".join(lines)


def test_no_secret_leaves_any_command(tmp_path: Path, echo_server: int) -> None:
    cases = _cases(tmp_path, echo_server)
    groups: dict[str, list[Case]] = {}
    for case in cases:
        groups.setdefault(case.home or case.name, []).append(case)

    def run_group(group: list[Case]) -> None:
        for case in group:  # in order: a later one reads what an earlier one stored
            _run(case, tmp_path / "homes")

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(run_group, groups.values()))
    start_up = _dashboard_start_up_line(tmp_path / "homes" / "dashboard-start")

    leaks = []
    for case in cases:
        assert case.result is not None
        for stream, text in (("stdout", case.result.stdout), ("stderr", case.result.stderr)):
            if SECRET in text:
                leaks.append(f"{case.name} {stream}: {text.strip()[:400]}")
        assert "Traceback" not in case.result.stderr, (case.name, case.result.stderr)
    if SECRET in start_up:
        leaks.append(f"dashboard start-up line: {start_up}")
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    for path in written:  # the stores' bytes (-wal too), results, logs: every file written
        if SECRET.encode() in path.read_bytes():
            leaks.append(f"file {path.relative_to(tmp_path)}")
    assert not leaks, "\n".join(leaks)

    # The commands did reach what they were to show or keep: masked, not skipped.
    by_name = {case.name: case.result for case in cases if case.result is not None}
    assert (
        "store: postgresql://planner:***@127.0.0.1:1/fleet"
        in by_name["env-dashboard-dry-run"].stdout
    )
    assert "(store: postgresql://planner:***@127.0.0.1:1/x)" in start_up
    assert (
        "cannot connect to http://user:***@127.0.0.1"
        in by_name["bench-url-password-unreachable"].stderr
    )
    assert "api_key=***" in by_name["bench-url-api-key-query"].stderr
    assert "Incorrect API key provided: Bearer ***" in by_name["bench-api-key-option-echo"].stderr
    stored = by_name["bench-runs-show"]
    assert stored.returncode == 0, stored.stderr
    assert "http://user:***@127.0.0.1" in stored.stdout
    assert (tmp_path / "homes" / "stored" / "run.json").is_file()
    assert (tmp_path / "homes" / "stored" / "planner.db").is_file()
    assert "user:***@" in by_name["prices-refresh-aws"].stderr
    assert len(cases) == 29  # and the dashboard's start-up line: 30 runs
