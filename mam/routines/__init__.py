"""Routines: scheduled and triggered delegations that the node fires (docs/routines.md).

A routine is a job template (target, brief, --max-tokens, --timeout) and its triggers: a schedule
(`--every`, `--cron --tz`), `mam routine run`, a signed webhook. schedule.py: when ticks fall;
decide.py: what becomes of a tick (catch-up, concurrency); fire.py: the scheduler that records and
delegates ticks; webhook.py: the node's loopback endpoint; manage.py: what the CLI and MCP call;
hold.py: the workspace's hold; node.py: the node's thread.
"""
