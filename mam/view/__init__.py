"""Looking at a workspace live: `mam tail` (a line per job transition, event and loop step) and `mam top`.

Looking never starts anything: no broker, server, pane or session is started, and no registry is
created where there is none.
"""
