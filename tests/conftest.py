"""Fixtures for every test: an isolated HOME, private tmux servers, brokers (the double, real ones), a workspace.

No test sleeps to wait (poll with `wait_for`), none uses port 1883, none kills by name.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mam.util.poll import wait_for
from mam.workspace import Workspace
from tests.helpers import brokers, home_guard
from tests.helpers.mqtt_double import MqttDouble, running_double
from tests.helpers.nodes import end_nodes_under
from tests.helpers.tmux import PrivateTmux, kill_stray_default_server, private_tmux

REAL_HOME = Path(os.path.expanduser("~"))
FAKES_BIN = Path(__file__).parent / "fakes" / "bin"
ENV_PREFIXES = ("MQTT_", "MAM_", "HERDR_", "TMUX", "CLAUDE_", "CODEX_", "GROK_", "HERMES_", "OPENCODE_", "AGENT_PYTHON")


LONG_TIMEOUT_S = 120.0  # pyproject.toml's default timeout: a test that asks for more is a long one


# Fixtures that wait for tests/deploy's shared install.sh run (tests/deploy/test_install.py `installed`), which the
# deploy group's worker builds first (80-180 s): a test outside the group that asks for it is not put first, where
# its worker would sit on the install's lock (54 s of a 2026-12-06 run) instead of running other tests.
WAITS_FOR_SHARED_INSTALL = frozenset({"installed", "installed_workspace"})


def waits_for_shared_install(item: pytest.Item) -> bool:
    """A test outside the deploy group that asks for the install its group's worker builds."""
    return bool(WAITS_FOR_SHARED_INSTALL & set(getattr(item, "fixturenames", ()))) and not item.get_closest_marker(
        "xdist_group"
    )


def expected_long(item: pytest.Item) -> float:
    """How long a test may run when it asked for more than the default timeout (0 for the rest): its own
    `timeout` marker, at least 300 s for one marked `slow`; 0 for one outside an xdist group that waits for the
    shared install (WAITS_FOR_SHARED_INSTALL)."""
    if waits_for_shared_install(item):
        return 0.0
    marker = item.get_closest_marker("timeout")
    limit = float(marker.args[0]) if marker is not None and marker.args else 0.0
    if item.get_closest_marker("slow") is not None:
        limit = max(limit, 300.0)
    return limit if limit > LONG_TIMEOUT_S else 0.0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist, the long tests first (the real CLIs, the fault schedules, ...), longest allowed first; then the
    rest taken in turn from each folder (`taken_in_turn`).

    `--dist loadgroup` hands out the tests in collection order (a group, like tests/deploy's, before
    them all), so a 2-minute test collected last would run alone at the end while the other workers
    wait; started first, the short tests fill in around it. The sort is stable and the same on every
    worker (xdist requires one collection)."""
    if hasattr(config, "workerinput"):
        items.sort(key=lambda item: -expected_long(item))
        first = next((i for i, item in enumerate(items) if not expected_long(item)), len(items))
        items[first:] = taken_in_turn(items[first:])


def taken_in_turn(items: list[pytest.Item]) -> list[pytest.Item]:
    """The tests of each module together, the modules taken in turn from each folder of tests/.

    In collection order the folders' tests run one folder after another, and a folder's tests are alike: a
    run found the cores a third idle for a minute while most workers were in tests/remote/ and tests/e2e/'s
    deadline tests, which mostly wait. Taken in turn, those waits fall beside other folders' busy tests. A
    module stays whole: its module-scoped fixtures are set up once per worker."""
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    folders: dict[str, list[list[pytest.Item]]] = {}
    waiting: list[pytest.Item] = []  # for the shared install: in the middle, by when the deploy group built it
    for path, tests in modules.items():
        if any(waits_for_shared_install(item) for item in tests):
            waiting.extend(tests)
        else:
            folders.setdefault(path.rsplit("/", 1)[0], []).append(tests)
    queues = list(folders.values())
    out: list[pytest.Item] = []
    while any(queues):
        for queue in queues:
            if queue:
                out.extend(queue.pop(0))
    middle = len(out) // 2
    return out[:middle] + waiting + out[middle:]


@pytest.fixture(scope="session", autouse=True)
def _real_home_untouched() -> Iterator[None]:
    """Session-level guard: nothing may be written to the real user's agent folders."""
    before = home_guard.snapshot(REAL_HOME)
    yield
    changed = home_guard.diff(before, home_guard.snapshot(REAL_HOME))
    if changed:
        pytest.fail(f"tests wrote into the real HOME's agent folders: {changed[:10]}", pytrace=False)


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """HOME and XDG dirs in tmp_path, SHELL=/bin/sh, no inherited mam/MQTT/tmux settings. Afterwards no node of a
    workspace in tmp_path runs on (one with an enabled routine never ends by itself: it would idle through the rest
    of the run)."""
    for key in list(os.environ):
        if key.startswith(ENV_PREFIXES):
            monkeypatch.delenv(key, raising=False)
    home = tmp_path / "home"
    for sub in ("", ".config", ".local/share", ".local/state", ".cache"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local/share"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local/state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("SHELL", "/bin/sh")
    # Helper processes (launcher, heartbeater, demo agent) run with this interpreter.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    yield home
    end_nodes_under(tmp_path)


@pytest.fixture
def tmux_server() -> Iterator[PrivateTmux]:
    """A private tmux server name for one test; killed (and its socket removed) by its own handle."""
    t = private_tmux()
    yield t
    t.kill()


@pytest.fixture
def workspace(tmp_path: Path, tmux_server: PrivateTmux, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    """An empty workspace folder whose tmux server is this test's private one.

    Afterwards the server mam would have chosen by itself (`mam-<slug>`, used when a command ran
    without MAM_TMUX_SERVER) must not exist: if a test started one, it is killed and the test fails,
    so no run leaves a tmux server and its agents behind."""
    root = tmp_path / "ws"
    root.mkdir()
    monkeypatch.setenv("MAM_TMUX_SERVER", tmux_server.name)
    monkeypatch.setenv("MAM_WORKSPACE", str(root))
    ws = Workspace(root)
    yield ws
    stray = kill_stray_default_server(ws.root)
    if stray:
        pytest.fail(f"the test started tmux server {stray} outside its private one (MAM_TMUX_SERVER lost)")


@pytest.fixture
def fake_agents_on_path(monkeypatch: pytest.MonkeyPatch) -> Path:
    """Put the fake agent CLIs (claude, codex, ...) first on PATH."""
    monkeypatch.setenv("PATH", f"{FAKES_BIN}{os.pathsep}{os.environ['PATH']}")
    return FAKES_BIN


# -- brokers ------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def amqtt_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[brokers.RunningBroker]:
    b = brokers.start_amqtt(tmp_path_factory.mktemp("amqtt"))
    yield b
    b.stop()


@pytest.fixture(scope="session")
def mosquitto_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[brokers.RunningBroker]:
    if brokers.mosquitto_bin() is None:
        if brokers.mosquitto_required():
            pytest.fail("mosquitto is not installed and CI=true: install it (apt-get install -y mosquitto)")
        pytest.skip("mosquitto is not installed")
    b = brokers.start_mosquitto(tmp_path_factory.mktemp("mosquitto"))
    yield b
    b.stop()


@pytest.fixture(scope="session")
def double_broker() -> Iterator[MqttDouble]:
    """The in-memory MQTT broker (tests/helpers/mqtt_double.py), one per test process."""
    yield from running_double()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """`broker` is the in-memory double; a test marked `real_brokers` runs on amqtt and on Mosquitto instead."""
    if "broker" in metafunc.fixturenames:
        real = metafunc.definition.get_closest_marker("real_brokers") is not None
        metafunc.parametrize("broker", ["amqtt", "mosquitto"] if real else ["double"], indirect=True)


@pytest.fixture
def broker(request: pytest.FixtureRequest) -> brokers.RunningBroker | MqttDouble:
    """The broker of a job-path test: the in-memory double, or (marked `real_brokers`) amqtt and Mosquitto."""
    return request.getfixturevalue(f"{request.param}_broker")


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[object]:
    """A factory for brokers a test may kill and restart: own_broker('mosquitto')."""
    started: list[brokers.RunningBroker] = []

    def make(kind: str = "mosquitto") -> brokers.RunningBroker:
        if kind == "mosquitto" and brokers.mosquitto_bin() is None:
            if brokers.mosquitto_required():
                pytest.fail("mosquitto is not installed and CI=true")
            pytest.skip("mosquitto is not installed")
        folder = tmp_path / f"{kind}-{len(started)}"
        folder.mkdir()
        b = brokers.start_amqtt(folder) if kind == "amqtt" else brokers.start_mosquitto(folder)
        started.append(b)
        return b

    yield make
    for b in started:
        b.stop()


@pytest.fixture
def poll():
    """wait_for(check, timeout=..., message=...): poll with a deadline instead of sleeping."""
    return wait_for


# -- a secured Mosquitto: TLS, passwords, per-role ACL (tests/helpers/secure_broker.py) --------
@pytest.fixture(scope="session")
def secure_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One TLS + password + ACL Mosquitto (and a plain password + ACL listener) for the session."""
    from tests.helpers import secure_broker as sb

    missing = sb.missing_tools()
    if missing:
        if brokers.mosquitto_required():
            pytest.fail(f"{', '.join(missing)} not installed and CI=true (apt-get install -y mosquitto openssl)")
        pytest.skip(f"{', '.join(missing)} not installed")
    b = sb.start_secure_broker(tmp_path_factory.mktemp("secure-mosquitto"))
    yield b
    b.stop()
