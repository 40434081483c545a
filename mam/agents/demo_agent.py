"""`python -m mam.agents.demo_agent`: the demo agent's command line in panes (the program is mam.demo.agent).

The name stays because panes are started with it and the monitor recognises a demo agent by it.
"""

import sys

from mam.demo.agent import main

if __name__ == "__main__":
    sys.exit(main())
