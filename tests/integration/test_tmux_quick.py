from __future__ import annotations

import sys

from mam.panes.tmux import TmuxBackend, socket_path
from mam.settings import load_settings


def test_pane_runs_argv_with_exact_env(workspace, tmux_server, tmp_path, poll):
    settings = load_settings(env_file=None)
    backend = TmuxBackend(tmux_server.name, settings=settings, ws=workspace)
    assert not backend.server_running()
    out = tmp_path / "env.txt"
    script = (
        f"import os,sys; open({str(out)!r},'w')"
        ".write(os.environ.get('ONLY','-')+'|'+os.getcwd()+'|'+str('HOME' in os.environ)); sys.stdin.read()"
    )
    info = backend.create_pane(
        name="a",
        argv=[sys.executable, "-c", script],
        cwd=str(tmp_path),
        env={"ONLY": "x y;$(z)", "PATH": "/usr/bin:/bin"},
    )
    assert info.pane_id.startswith("%")
    poll(out.exists, timeout=10)
    poll(lambda: out.read_text().count("|") == 2, timeout=5)
    assert out.read_text() == f"x y;$(z)|{tmp_path}|False"
    assert backend.pane(info.pane_id) is not None
    backend.kill_server()
    assert not socket_path(tmux_server.name).exists()
