"""Everything demo in one place: the demo agent and the `mam demo` tour.

    agent.py    the demo agent: a real interactive terminal program with no LLM, for demos and tests
    adapter.py  its adapter (agent name `demo` in mam.agents.ADAPTERS)
    tour.py     `mam demo`: sessions, jobs and a review loop in a temporary workspace
    loop.py     the tour's review-loop part

Panes run the agent as `python -m mam.agents.demo_agent` (that command line is what running panes
and the monitor know it by; mam/agents/demo_agent.py only starts `agent.main`). This module
imports nothing, so starting the demo agent stays quick.
"""

# The README's section that shows the demo agent's directives, each with an example (`mam demo` ends by
# naming it, and `mam doctor` does when it finds no agent CLI).
TRY_IT = (
    'try mam with the demo agent, no agent CLI needed: --agent demo (README.md, "Trying it without an agent CLI"; '
    "e.g. mam session create --agent demo --role developer --session demo-1)"
)
