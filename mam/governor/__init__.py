"""The governor: caps on running jobs (workspace-wide and per role) and token budgets (lifetime, per
UTC day, per session, per job), held by the wrappers themselves through the registry (no daemon).

`admission` decides (pure); `reservations` is the table; `budget` reads the caps and settles;
`gate` is one job's hold, driven by its wrapper; `status` is `mam budget`.
"""
