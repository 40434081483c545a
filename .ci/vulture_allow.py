"""Names vulture reports as unused that are used, by a framework or through data: the dead-code allow-list.

Run by `.ci/run` and pre-commit as `vulture` (paths and confidence in pyproject.toml's [tool.vulture]).
Add a name here only with the reason it is live; dead code is deleted, not listed.
"""

# ruff: noqa
# mypy: ignore-errors

# sqlite3.Connection attributes, set for sqlite3 to read
_.row_factory  # mam/agents/convo.py, mam/doctor.py, mam/store/db.py
_.isolation_level  # mam/agents/convo.py

# amqtt loads the auth plugin by its entry in the broker config and calls its hook
WorkspaceAuthPlugin  # mam/broker/auth.py
_.authenticate  # mam/broker/auth.py

# paho-mqtt callbacks, assigned for paho to call
_.on_connect  # mam/bus/mqtt.py
_.on_disconnect
_.on_message
_.on_subscribe
_.on_unsubscribe

# topic patterns the broker ACLs and MESSAGING.md name (tests/unit/test_messaging_doc.py checks them)
_.all_states  # mam/bus/topics.py
_.all_presence

# click: Group overrides and commands registered by their decorators
_.list_commands  # mam/cli/__init__.py
_.get_command
_.format_commands
demo  # mam/cli/demo.py
completed  # mam/cli/event.py
list_  # mam/cli/job.py
log_  # mam/cli/job.py
mcp  # mam/cli/mcp.py
monitor  # mam/cli/monitor.py
create  # mam/cli/session.py

# the MCP SDK registers tools by their decorator
job_delegate  # mam/mcp/server.py
job_wait

# module __getattr__ (PEP 562): mam.loop's lazy exports
__getattr__  # mam/loop/__init__.py

# dataclass fields read through dataclasses.asdict (JSON output)
forced  # mam/loop/worktree.py Removed.forced, in `mam worktree remove --json`
started_ms  # mam/jobs/model.py Job.started_ms, in the job record
activity_ms  # mam/jobs/model.py Job.activity_ms (when the agent's hooks last spoke), in the job record

# -- pending: reported in mam/jobs and mam/store, which the job-store redesign (issue 13 items 1+2) rewrites.
# Remove each line with the code it names.
replay_job  # mam/jobs/audit_log.py (used by tests only)
STARTED_LINE  # mam/jobs/brief.py
mqtt_seen  # mam/jobs/intake.py
_.mqtt_seen
_.still_owner  # mam/jobs/ledger.py
OPEN  # mam/jobs/model.py
public  # mam/jobs/record.py
_.integrity_check  # mam/store/db.py (used by tests/faults only)
ALL  # mam/store/sessions.py SessionStatus.ALL
