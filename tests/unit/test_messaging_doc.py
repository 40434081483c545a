"""MESSAGING.md cannot drift from the code: its worked example, topics, reasons, sender rules and limits
are all checked here against what the code does, and so are the parts that moved out of it: the broker
files (docs/broker.md), the brief's footer, the delegation defaults and the job states, reasons and exit
codes (docs/delegation.md).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mam.bus import envelope
from mam.bus.envelope import Envelope, canonical, sign
from mam.bus.topics import Topics
from mam.jobs.brief import footer
from mam.jobs.model import SENDER_TYPES, JobState
from mam.outcomes import ENDINGS, STATE_EXIT, TAKEN_OVER_EXIT, Ignored, Reason, Rejected
from mam.remote.dispatch import Dispatch
from mam.remote.job_key import KEY_NONCE, job_key
from mam.settings import KEYS_BY_NAME

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "MESSAGING.md").read_text(encoding="utf-8")
BROKER_DOC = (ROOT / "docs" / "broker.md").read_text(encoding="utf-8")
DELEGATION_DOC = (ROOT / "docs" / "delegation.md").read_text(encoding="utf-8")


def block(marker: str, doc: str = DOC) -> str:
    """The fenced block right after `<!-- marker -->`, without the fence's final newline."""
    m = re.search(rf"<!-- {re.escape(marker)} -->\n```[a-z]*\n(.*?)\n```\n", doc, re.S)
    assert m, f"no block marked {marker!r}"
    return m.group(1)


def hexdump(data: bytes) -> str:
    return "\n".join(f"{i:04x}  " + " ".join(f"{b:02x}" for b in data[i : i + 16]) for i in range(0, len(data), 16))


def code(path: str) -> str:
    return (ROOT / path).read_text(encoding="utf-8")


# -- the worked example -------------------------------------------------------------------------
def test_worked_example_bytes_and_signature_match_the_code() -> None:
    key = block("example:key")
    text = block("example:canonical")
    data = text.encode("utf-8")
    fields = json.loads(text)
    env = Envelope.from_obj({**fields, "sig": ""})
    assert canonical(env.unsigned()) == data, "the example is not in canonical form"
    assert block("example:hexdump") == hexdump(data)
    assert f"one line of {len(data)} bytes" in DOC
    assert block("example:signature") == sign(key, data) == env.signed(key).sig
    wire = block("example:wire").encode("utf-8")
    assert wire == env.signed(key).encode()
    assert f"({len(wire)} bytes)" in DOC
    received = Envelope.decode(wire)
    assert received.verify(key)
    assert not received.verify(key[:-1] + ("1" if key.endswith("0") else "0"))


def test_worked_example_shows_what_it_says_it_shows() -> None:
    fields = json.loads(block("example:canonical"))
    assert fields["type"] == "completed" and fields["seq"] == 7 and fields["ts"] == 1767225600000
    assert set(fields["body"]) == {"message", "report", "report_path"}
    for word in ("✓", "ï", "é", "—", "\n", "\t", '"'):
        assert word in fields["body"]["message"] + fields["body"]["report"]
    assert len(block("example:key")) == 64


def test_the_job_key_example_is_what_both_hosts_derive() -> None:
    secret, job = "a-long-random-secret-shared-by-every-host", "job-5f2c0e9a7b3d4e61"
    assert f"`{secret}`, job `{job}`" in DOC
    key_nonce = block("example:key-nonce")
    assert KEY_NONCE.match(key_nonce)
    assert block("example:job-key") == job_key(secret, job, key_nonce)
    assert Dispatch(
        job_id=job,
        runner="r",
        session="s",
        text="t",
        key_nonce=key_nonce,
        nonce="n",
        ts=0,
        start_deadline_ms=1,
        heartbeat_ms=1,
        heartbeat_k=1,
        budget_ms=1,
        origin="o",
    ).token(secret) == block("example:job-key")


def test_the_footer_shown_is_the_one_briefs_get() -> None:
    assert block("example:footer", DELEGATION_DOC) == footer("job-5f2c0e9a7b3d4e61", "3f9a1c0b7d2e4f68", 30).strip("\n")


# -- broker files -------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "docs" / "broker").glob("*.tmpl")))
def test_every_broker_file_is_shown_verbatim(name: str) -> None:
    assert block(f"file:docs/broker/{name}", BROKER_DOC) == (ROOT / "docs" / "broker" / name).read_text().rstrip("\n")


# -- topics, senders, limits ----------------------------------------------------------------------
def test_every_topic_is_documented() -> None:
    t = Topics("PREFIX", "RUNNERSROOT")

    def shown(topic: str) -> str:
        named = topic.replace("RUNNERSROOT", "<runners prefix>").replace("PREFIX", "<prefix>").replace("JOB", "<job>")
        return f"`{named}`".replace("RUNNER", "<runner>")

    for topic in (
        t.events("JOB"),
        t.state("JOB"),
        t.presence("RUNNER"),
        t.dispatch("RUNNER", "JOB"),
        t.all_events(),
        t.all_states(),
        t.all_presence(),
        t.dispatch_all("RUNNER"),
        t.probe("RUNNER", "TAG"),
    ):
        assert shown(topic).replace("TAG", "<random>") in DOC, topic
    assert "`mam/<workspace slug>`" in DOC and "`MAM_TOPIC_PREFIX`" in DOC and "`body.topic_prefix`" in DOC


def test_sender_table_matches_the_model() -> None:
    for sender, types in SENDER_TYPES.items():
        m = re.search(rf"^\| `{sender}` \| (.*) \|$", DOC, re.M)
        assert m, f"no row for sender {sender}"
        assert set(re.findall(r"`(\w+)`", m.group(1))) == set(types), sender


def test_envelope_fields_and_kinds_are_documented() -> None:
    for name in envelope._FIELDS:
        assert re.search(rf"^\| `{name}` \| ", DOC, re.M), name
    for kind in envelope.KINDS:
        assert f"`{kind}`" in DOC


def test_limits_and_version_match_the_code() -> None:
    assert envelope.VERSION == 2 and "exactly `2`" in DOC
    assert f"{envelope.MAX_EVENT_BYTES} bytes (64 KiB)" in DOC and envelope.MAX_EVENT_BYTES == 64 * 1024
    assert f"{envelope.MAX_DISPATCH_BYTES} bytes (1 MiB)" in DOC and envelope.MAX_DISPATCH_BYTES == 1024 * 1024
    assert f"at most {envelope.MAX_DEPTH} levels" in DOC


# -- reasons, states, exit codes, defaults ------------------------------------------------------
def audit_kinds_in_code() -> set[str]:
    """Audit-log line kinds the intake writes: rec.audit(ws, job, "kind", ...) or ledger.note("kind", ...)."""
    return set(re.findall(r'(?:rec\.audit\([^,]+, [^,]+, |\.note\()\s*"(\w+)"', code("mam/jobs/intake.py")))


def test_every_reason_the_code_can_give_is_documented() -> None:
    """Every reason of the table of outcomes and every audit kind the intake writes is documented: what a
    receiver answers on the wire (Rejected) in MESSAGING.md, the rest there or in docs/delegation.md."""
    kinds = audit_kinds_in_code()
    assert {"rejected", "ignored", "seq_gap"} <= kinds  # the scan still finds what it was written for
    wire = {r.value for r in Rejected}
    missing = sorted(r for r in wire if f"`{r}`" not in DOC)
    assert not missing, f"receiver reasons missing from MESSAGING.md: {missing}"
    reasons = {r.value for r in ENDINGS if r is not Reason.NO_OUTCOME}  # no_outcome: a loop's, never a job's
    reasons |= {r.value for r in Ignored}
    missing = sorted(r for r in reasons | kinds if f"`{r}`" not in DOC + DELEGATION_DOC)
    assert not missing, f"reasons missing from MESSAGING.md and docs/delegation.md: {missing}"


def test_the_reason_table_is_the_table_of_outcomes() -> None:
    rows = dict(
        (m.group(1), (m.group(2), int(m.group(3))))
        for m in re.finditer(r"^\| `(\w+)` \| `(\w+)` \| (\d+) \| ", DELEGATION_DOC, re.M)
    )
    for reason, row in ENDINGS.items():
        if reason is Reason.NO_OUTCOME:
            assert reason.value not in rows
            continue
        assert rows.get(reason.value) == (row.state.value, row.exit_code), reason
    assert set(rows) <= {r.value for r in ENDINGS}, "MESSAGING.md lists a reason the table lacks"
    assert f"`mam job delegate` also exits {TAKEN_OVER_EXIT} when another attempt took the job over" in DELEGATION_DOC


def test_states_and_exit_codes_match_the_model() -> None:
    for state in JobState:
        assert re.search(rf"^\| `{state.value}` \| ", DELEGATION_DOC, re.M), state
    for state, exit_code in STATE_EXIT.items():
        row = rf"^\| `{state.value}` \| .* \| {exit_code}( \([36] when .*\))? \|$"
        assert re.search(row, DELEGATION_DOC, re.M), state


@pytest.mark.parametrize(
    "key",
    [
        "MAM_START_DEADLINE_S",
        "MAM_HEARTBEAT_S",
        "MAM_HEARTBEAT_K",
        "MAM_JOB_TIMEOUT_S",
        "MAM_DISPATCH_WAIT_S",
        "MAM_POLL_S",
    ],
)
def test_delegation_defaults_match_the_settings(key: str) -> None:
    m = re.search(rf"^\| [^|]+ \| `{key}`[^|]* \| ([^|]+) \|", DELEGATION_DOC, re.M)
    assert m, key
    assert float(m.group(1).strip()) == float(KEYS_BY_NAME[key].default)


@pytest.mark.parametrize(
    "key",
    [
        "MQTT_BROKER",
        "MQTT_PORT",
        "MQTT_TLS",
        "MQTT_TLS_CA",
        "MQTT_TLS_CERT",
        "MQTT_TLS_KEY",
        "MQTT_USERNAME",
        "MQTT_PASSWORD",
        "MAM_TOPIC_PREFIX",
        "MAM_DISPATCH_SECRET",
    ],
)
def test_every_broker_setting_named_exists(key: str) -> None:
    assert key in KEYS_BY_NAME and f"{key}=" in BROKER_DOC


# -- what the protocol document holds ---------------------------------------------------------------
def test_the_protocol_document_has_its_overview_diagram_and_version_policy() -> None:
    headings = re.findall(r"^## (.+)$", DOC, re.M)
    for name in ("Overview", "Version policy", "Receiving: checks and rejection reasons", "Worked example"):
        assert name in headings, name
    assert "```mermaid\nsequenceDiagram" in DOC
    for kind in envelope.KINDS:  # the overview table names every kind of message
        assert re.search(rf"^\| \w[\w ]* \| `{kind}`, ", DOC, re.M), kind
    assert "RFC 2119" in DOC and "Running a private broker" not in DOC
    # the wire protocol only: one host's internals (the wake channel, the job states) live in docs/delegation.md
    assert len(DOC.splitlines()) <= 500 and "events:<id>" not in DOC and "## Job states" not in DOC
    assert "## Which event arrives how" in DELEGATION_DOC and "## Job states and exit codes" in DELEGATION_DOC
