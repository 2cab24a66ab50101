"""``slicecount demo --duration 20`` as a user runs it: the datasource it starts answers with
live data while it runs, and every process it started is gone after it ends. And the demo's
start-up failures: a missing dependency, a service that does not come up."""

from __future__ import annotations

import http.server
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from importlib.util import find_spec
from pathlib import Path

import httpx2 as httpx
import pytest
from click.testing import CliRunner

from slicecount.cli import main
from slicecount.demo.services import Service
from slicecount.demo.stack import Demo
from slicecount.embedded import free_port
from slicecount.errors import StartupError
from slicecount.examples.traffic import Traffic
from tests.held import holding


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by its parent) is gone for our purpose
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


def test_a_missing_dependency_is_named_before_anything_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        "slicecount.demo.stack.find_spec",
        lambda name: None if name == "gunicorn" else find_spec(name),
    )
    with pytest.raises(StartupError, match=r"needs gunicorn: pip install 'slicecount\[demo\]'"):
        Demo()
    result = CliRunner().invoke(main, ["demo", "--duration", "1"])
    assert result.exit_code == 1
    assert "error: slicecount demo needs gunicorn" in result.output
    assert "starting" not in result.output


def test_a_service_that_does_not_start_says_why(tmp_path: Path) -> None:
    command = [sys.executable, "-c", "print('no such app'); raise SystemExit(3)"]
    service = Service("broken", command, dict(os.environ), tmp_path)
    with pytest.raises(StartupError, match=r"broken did not start on port \d+:\nno such app"):
        service.wait_http(free_port())
    service.stop()


@pytest.mark.slow
def test_the_demo_command_in_a_process_gives_back_its_signal_handlers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``slicecount demo`` run in a process of its caller's (a test, an embedding) puts back the
    SIGINT, SIGTERM and SIGHUP handlers it found: one left in place swallowed a later Ctrl-C."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))  # its state file out of others' way
    signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    before = {s: signal.getsignal(s) for s in signals}
    result = CliRunner().invoke(main, ["demo", "--duration", "1", "--port", str(free_port())])
    assert result.exit_code == 0, result.output
    assert "traffic running for 1 s" in result.output
    assert {s: signal.getsignal(s) for s in signals} == before


@pytest.mark.slow
def test_demo_runs_the_stack_and_leaves_nothing_behind(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path)}  # its state file out of others' way
    process = subprocess.Popen(
        [sys.executable, "-m", "slicecount.cli", "demo", "--duration", "20", "--port", str(port),
         "--rate", "60"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    assert process.stdout is not None
    lines: list[str] = []
    pids: list[int] = []
    while not pids:
        line = process.stdout.readline()
        assert line, "demo exited early:\n" + "".join(lines)
        lines.append(line)
        if line.startswith("pids"):
            pids = [int(p) for p in line.split()[1:]]
    assert any(f"http://127.0.0.1:{port}/" in line for line in lines)
    base = f"http://127.0.0.1:{port}"

    def series(target: str) -> list[dict[str, object]]:
        now = datetime.now(timezone.utc)
        body = {
            "range": {"from": (now - timedelta(minutes=5)).isoformat(), "to": now.isoformat()},
            "intervalMs": 1000, "maxDataPoints": 500,
            "targets": [{"refId": "A", "target": target}],
        }  # fmt: skip
        response = httpx.post(f"{base}/query", json=body, timeout=10)
        assert response.status_code == 200, response.text
        frames: list[dict[str, object]] = response.json()
        return frames

    wanted = {
        "requests": "sum by (status) (rate(http.requests))",
        "p95": "histogram_quantile(0.95, sum by (route) (http.request.duration))",
        "queries": "sum(rate(db.queries))",
    }
    seen: dict[str, bool] = {}
    deadline = time.monotonic() + 18
    while time.monotonic() < deadline and len(seen) < len(wanted):
        for key, target in wanted.items():
            frames = series(target)
            if any(any(v for v, _ in f["datapoints"]) for f in frames):  # type: ignore[attr-defined]
                seen[key] = True
        time.sleep(1)
    assert set(seen) == set(wanted)

    rest, _ = process.communicate(timeout=90)
    output = "".join(lines) + rest
    assert process.returncode == 0, output
    assert re.search(r"last 15s: +\d+\.\d req/s", output)
    assert "stopped: every service exited" in output
    assert [pid for pid in pids if alive(pid)] == []


@pytest.mark.slow
def test_ctrl_c_stops_in_order_and_what_it_says_of_the_counts_is_true(tmp_path: Path) -> None:
    """What a terminal does: SIGINT to the demo's whole process group. The demo's services
    run in sessions of their own, so Redis outlives the apps' last flush."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLICECOUNT_")}
    env["XDG_RUNTIME_DIR"] = str(tmp_path)  # the state file where this test alone looks
    process = subprocess.Popen(
        [sys.executable, "-m", "slicecount.cli", "demo", "--port", str(port), "--rate", "60"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
        start_new_session=True,
    )  # fmt: skip
    assert process.stdout is not None
    lines: list[str] = []
    while not lines or not lines[-1].startswith("traffic running"):
        line = process.stdout.readline()
        assert line, "demo exited early:\n" + "".join(lines)
        lines.append(line)
    field = {line.split()[0]: line.split()[1] for line in lines if len(line.split()) > 1}
    logs = Path(field["logs"])
    pids = [int(p) for p in next(x for x in lines if x.startswith("pids")).split()[1:]]
    time.sleep(15)  # traffic, and the apps flushing every second
    # `slicecount show` with no URL given finds the demo's Redis (its state file)
    shown = subprocess.run(
        [sys.executable, "-m", "slicecount.cli", "show", "http.requests", "--precision",
         "86400", "--since", "2d", "--json"], capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert field["redis"] in shown.stderr
    during = sum(series["total"] for series in json.loads(shown.stdout)["series"])
    assert during > 0

    os.killpg(process.pid, signal.SIGINT)
    rest, _ = process.communicate(timeout=30)
    output = "".join(lines) + rest
    assert process.returncode == 0, output
    flushed = re.search(
        r"counts flushed \((\d+) requests answered, (\d+) counted in redis"
        r"(?:, (\d+) failed at the client)?\)",
        rest,
    )
    assert flushed, output
    answered, counted, failed = int(flushed[1]), int(flushed[2]), int(flushed[3] or 0)
    # "counts flushed" is exact: every request the apps answered is counted, and nothing that
    # was counted while the demo ran is gone; only a request that failed at the client (the
    # app may have answered it after the client gave up) may be counted beyond them
    assert answered <= counted <= answered + failed, output
    assert counted >= during
    lost = [line for log in logs.glob("*.log") for line in log.read_text().splitlines()
            if "could not write" in line]  # fmt: skip
    assert lost == []
    assert {log.name for log in logs.glob("*.log")} >= {"flask.log", "starlette.log"}
    assert [pid for pid in pids if alive(pid)] == []
    assert list((tmp_path / "slicecount").iterdir()) == []  # the state file withdrawn


@pytest.mark.slow
def test_a_ctrl_c_during_the_run_leaves_no_answer_uncounted() -> None:
    """A Ctrl-C interrupts run()'s join of the traffic thread, which marks that thread done
    though it still runs (CPython issue 90882): stop() must still count every answer on its
    way before it compares them with Redis."""
    assert threading.current_thread() is threading.main_thread()  # where SIGINT is handled
    demo = Demo(port=free_port())
    stop = threading.Event()
    main_thread = threading.main_thread().ident
    assert main_thread is not None
    try:
        with holding(release=stop) as held:  # answers once the traffic is stopped
            demo.traffic = Traffic(
                [(held.url, lambda rng: ("GET", "/"))], rate=1000.0, threads=3, stop_event=stop
            )
            # the terminal's Ctrl-C, once requests are in flight
            held.on_arrival = lambda: signal.pthread_kill(main_thread, signal.SIGINT)
            # a terminal's Python: SIGINT raises KeyboardInterrupt (whatever ran before in this
            # worker); no summary line (this demo never started its store) however slow the
            # first request is to arrive on a loaded machine
            previous = signal.signal(signal.SIGINT, signal.default_int_handler)
            try:
                with pytest.raises(KeyboardInterrupt):
                    demo.run(60, echo=lambda line: None, every=60)
            finally:
                signal.signal(signal.SIGINT, previous)
            stopped = demo.stop()
    finally:
        shutil.rmtree(demo.logs, ignore_errors=True)
    assert stopped.answered == len(held.answered) >= 1
    assert stopped.failed == 0


class Answering(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"someone else's server")

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.slow
def test_a_port_in_use_is_named_and_never_taken_for_the_demos(tmp_path: Path) -> None:
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answering) as other:
        threading.Thread(target=other.serve_forever, daemon=True).start()
        port = other.server_address[1]
        result = CliRunner().invoke(main, ["demo", "--port", str(port)])
        other.shutdown()
    assert result.exit_code == 1
    assert f"error: port {port} on 127.0.0.1 is in use" in result.output
    assert "--port" in result.output
    assert f"http://127.0.0.1:{port}/" not in result.output
    assert "starting" not in result.output


@pytest.mark.slow
def test_a_service_that_loses_counts_is_reported_from_its_recorders_own_words(
    tmp_path: Path,
) -> None:
    """What the demo scans its apps' logs for is what a Recorder logs when it gives up."""
    dead = f"redis://127.0.0.1:{free_port()}/0"
    code = (
        "import logging; logging.basicConfig(format='%(message)s');"
        "from slicecount import Recorder, Store;"
        f"r = Recorder(Store.from_url({dead!r})); r.add('orders', 3); r.close(0.2)"
    )
    service = Service("app", [sys.executable, "-c", code], dict(os.environ), tmp_path)
    assert service.wait() is None  # it exited cleanly, yet lost its counts:
    losses = service.losses()
    assert losses, service.log.read_text()
    assert all(line.startswith("app: slicecount could not write") for line in losses), losses


def test_a_service_that_will_not_stop_is_killed_when_hurried(tmp_path: Path) -> None:
    code = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
        "print('up', flush=True); time.sleep(60)"
    )
    service = Service("stubborn", [sys.executable, "-c", code], dict(os.environ), tmp_path)
    while "up" not in service.log.read_text():
        time.sleep(0.05)
    hurry = threading.Event()
    hurry.set()
    assert service.stop(hurry) == "stubborn was killed when asked to: counts it held may be lost"
    assert not alive(service.process.pid)
    failing = Service("failing", [sys.executable, "-c", "raise SystemExit(3)"], {}, tmp_path)
    assert failing.wait() == f"failing exited with status 3 (see {failing.log})"
