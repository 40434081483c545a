"""Listening to the agent CLIs' own lifecycle hooks.

Each session's hook settings are written by mam.agents.hooks (into `.mam/sessions/<name>/`, never the
user's own config files); `translate` turns one CLI's hook call into an activity, `run` is what `mam hook`
does with it (bounded in time, never failing the agent), `session_state` keeps the session's
last activity and the conversation facts a hook told (id, transcript path).
"""
