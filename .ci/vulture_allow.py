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
_.on_connect_fail  # a failed reconnect: MqttClient moves to the next broker of MQTT_BROKER's list
# paho's next reconnect reads these: MqttClient._next_broker sets them (paho's setters refuse while "connection lost")
_._host
_._port

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
approve_cmd  # mam/cli/loop.py (`mam loop approve`)
reject_cmd  # mam/cli/loop.py (`mam loop reject`)

# the MCP SDK registers tools by their decorator
job_delegate  # mam/mcp/server.py
job_wait

# module __getattr__ (PEP 562): mam.loop's lazy exports
__getattr__  # mam/loop/__init__.py

# dataclass fields read through dataclasses.asdict (JSON output)
forced  # mam/util/worktree.py Removed.forced, in `mam worktree remove --json`
worktree_removed  # mam/sessions/worktree.py Released, in `mam session remove --json`
branch_deleted  # mam/sessions/worktree.py Released, in `mam session remove --json`
started_ms  # mam/jobs/model.py Job.started_ms, in the job record
activity_ms  # mam/jobs/model.py Job.activity_ms (when the agent's hooks last spoke), in the job record

# used by tests only, kept as the library's way to check a job's log and the registry file
replay_job  # mam/jobs/audit_log.py (replay of an exported audit log: tests/unit, tests/faults)
_.integrity_check  # mam/store/db.py (tests/faults checks the registry after kill -9)

# the table of outcomes: each ending's description, for people reading the table
when  # mam/outcomes.py Ending.when

# Textual: class attributes, compose/mount hooks, action_* (named by BINDINGS) and on_* message handlers it calls
_.BINDINGS  # mam/view/top.py
_.DEFAULT_CSS
_.TITLE
_.CSS
_.compose
_.on_mount
_.on_unmount
_.on_resize
_.on_button_pressed
_.action_answer
_.action_filter
_.action_quit
_.action_interrupt
_.action_clear_filter
_.action_cancel_job
_.action_stop_session
_.action_toggle_hosts
_.on_input_changed
_.on_input_submitted
_.on_data_table_row_selected
_.on_loaded
_.on_broker_changed
_.on_job_moved
_.on_fleet_moved
_.on_notice

# read by tests, not by mam
_.wakes  # JobAttempt.wakes: tests/unit/test_idle_wakeups.py counts an idle wrapper's wake-ups

# the context manager protocol's arguments (vulture saw this name used only through libtmux.exc before)
exc  # MqttClient.__exit__(*exc), mam/bus/mqtt.py

# `mam board set`: a click command registered by its decorator (issue 31)
set_  # mam/cli/board.py
# the board's audit rows (the registry's record of every write), read by tests/e2e/test_board.py
audit  # mam/store/board.py
# the exit table names 129 (SIGHUP) beside 130 and 143; mam/util/interrupts exits 128 + the signal, as a shell does
HUNG_UP  # mam/outcomes.py

# read by the MCP SDK (inspect.signature, typing.get_type_hints) to make job_delegate's input schema
_.__signature__  # mam/mcp/server.py request_signature
_.__annotations__

# read by click through getattr (its text-stream compatibility check) on the node's caller streams
_.encoding  # mam/node/streams.py Stream

# read by uvicorn.Server's main loop: the node stops the page it serves (mam/web/serve.py Hosted.stop)
_.should_exit
# a SessionView field read through dataclasses.asdict (mam/web/state.py: the page offers allow / deny on it)
waiting_tool  # mam/view/model.py
# http.server calls these on the routines' webhook endpoint (mam/routines/webhook.py)
_.daemon_threads  # ThreadingHTTPServer: a handler thread never holds the node's exit
_.do_POST
_.log_message
_.handle_error  # socketserver: a request that failed (logged as one throttled line, never a traceback)
# logging.LogRecord fields a Formatter reads: mam/util/throttle.py clears them (a line, never a traceback)
_.exc_info
_.exc_text

# the attributes the C JSON scanner reads from its context (mam/node/wire.py _Rules)
_.strict
_.object_hook
_.object_pairs_hook
_.parse_float
_.parse_int
_.parse_constant

# `mam role ...` and `mam task ...`: click commands registered by their decorators (mam/cli/org.py, issue 42)
role_add
role_list
role_show
role_reset
role_remove
task_add
task_list
task_show
task_done
task_reopen
task_cancel
# a task run's field read through dataclasses.asdict (`mam task show --json`'s `wakes`)
task_state  # mam/store/org.py RunRow.task_state
