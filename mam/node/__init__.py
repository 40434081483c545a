"""The node: one long-running `mam node` process per host and workspace.

It holds every open job's attempt that this host drives (local delegations, `mam job wait`, the
agents' `mam event`, and with `--name NAME` the remote jobs dispatched to this host), runs the
monitor's reconciliation, and adopts the open jobs of a node that died. Commands reach it through
`.mam/run/node.sock` (mam.node.client, the thin client; mam.node.wire, the frames), and it runs each
request in a thread of its own, as the ordinary click command, on behalf of the caller
(mam.util.caller: the caller's environment and folder as data; its standard streams as the
descriptors it sent). Why threads: the attempts share one process, one registry connection per
thread and the broker connections; a thread costs no interpreter start and no fork of a threaded
process; and nothing of a caller's process (loader variables, signal dispositions, umask) is
rebuilt, so no caller can make the node run code of its choosing. See docs/architecture.md, "The node".
"""
