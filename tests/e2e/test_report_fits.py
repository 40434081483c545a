"""A result is never lost while `mam event` says it was sent (issue 12, item 6).

The attack (by accident): a 72 KB report of ANSI-coloured test output. Each ESC becomes six
bytes of JSON, so the signed event was over 64 KiB: `mam event` said "recorded ... published",
exit 0, the wrapper rejected the event as `oversize` and the job ended `deadline_timeout`.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers.jobs import create_demo, record
from tests.helpers.mamcli import mam, spawn_mam


def coloured_report(size: int) -> str:
    lines, total, n = [], 0, 0
    while total < size:
        line = f"\x1b[32mPASSED\x1b[0m tests/test_mod_{n}.py::test_case_{n} \x1b[2m[{n % 100:3d}%]\x1b[0m\n"
        lines.append(line)
        total += len(line.encode())
        n += 1
    return "".join(lines)


def test_a_72kb_coloured_report_completes_the_job_with_the_report_cut(wired, tmp_path: Path, poll) -> None:
    create_demo("w", behaviour="never_start")  # this test plays the agent's part by hand
    job = spawn_mam(
        "job",
        "delegate",
        "--target",
        "w",
        "--brief",
        "run the tests",
        "--job-id",
        "job-big",
        "--start-deadline",
        "30",
        "--heartbeat",
        "10",
        "--json",
    )
    try:
        poll(
            lambda: json.loads(mam("job", "status", "job-big", "--json").stdout or "{}").get("state") == "delivered",
            timeout=30,
        )
        nonce = record(wired, "job-big")["nonce"]
        assert mam("event", "started", "--job", "job-big", "--nonce", nonce).returncode == 0
        text = coloured_report(72_000)
        report = tmp_path / "report.txt"
        report.write_text(text, encoding="utf-8")
        sent = mam("event", "completed", "--job", "job-big", "--message", "tests ran", "--report", str(report))
        assert sent.returncode == 0, sent.stderr
        out, err = job.communicate(timeout=60)
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode == 0, err  # today: 2, deadline_timeout (the event was rejected as oversize)
    assert "cut to fit the 64 KiB event limit" in sent.stderr
    final = json.loads(out)
    assert final["state"] == "completed" and final["result"] == "tests ran"
    kept, marker = final["report"].rsplit("\n[mam: cut here", 1)
    assert marker == " to fit the 64 KiB event limit; the whole text is in the file at report_path]"
    assert text.startswith(kept) and len(kept) > 20_000
    log = json.loads(mam("job", "log", "job-big", "--json", check=True).stdout)
    assert not [line for line in log if line["kind"] == "rejected"]
