"""Org mode: roles with a chain of command, and tasks the node wakes on their role's session (docs/org.md).

rules.py: what holds a `todo` task (pure); brief.py: a task's brief; manage.py: what the CLI and MCP call
(checks, writes, views); scheduler.py: the scheduler that wakes tasks and settles their jobs' ends
(dispositions, breakers); node.py: the node's thread, and whether a task keeps the node.
"""
