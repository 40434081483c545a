"""Sessions: create, stop, resume, inspect agent sessions, and record the orchestrator's own pane."""
