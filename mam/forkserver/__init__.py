"""A warm interpreter per workspace for `mam job delegate`: the forkserver.

A fresh Python that imports click, paho, the store, the job model and the pane backends costs
`mam job delegate` about 100 ms of CPU before it does anything; the job itself costs less. The
forkserver (`python -m mam.forkserver.server`) imports all of that once and then forks one child
per delegation. The child *is* the delegation wrapper, as a fresh `mam job delegate` process was:
it takes the caller's argv, environment, working folder, umask and its stdin/stdout/stderr (passed
over the socket), runs the very same CLI code, owns the job under its own pid, and ends with the
CLI's exit code. The caller's process (mam.forkserver.client, a lean start of the `mam` console
script) only hands over and waits; it forwards SIGINT, SIGTERM and SIGHUP (those it does not
ignore) to the child, ends with
the child's exit code (or dies of the signal the child died of), and if it is killed the child is
killed too, so killing the command an orchestrator ran still kills its wrapper.

Where the forkserver cannot serve (none runs yet, `MAM_FORKSERVER=0`, another interpreter, mam
tree, loader or interpreter environment (`LD_*`, `PYTHON*`: client.loader_env) or confinement, a
relative PYTHONPATH entry, mam's code changed on disk since it started, a folder or socket that is not
plainly this user's, a closed stdin/stdout/stderr), the client runs the command in its own process
as before: the forkserver only changes how fast a wrapper starts, never what it does. The first
delegation of a workspace starts one in the background. It lives in `.mam/run/` (socket
`forkserver.sock`, 0600, peers checked by uid; lock `forkserver.lock`, holding its pid; log
`forkserver.log`) and exits once no delegation has run for `MAM_FORKSERVER_IDLE_S` seconds, or at
once when its socket or the workspace's tmux server is gone (then it lives on, without socket or
lock, only until its running children end).
"""
