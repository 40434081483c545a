"""The picture in the README: `mam top` during `mam demo`, saved as SVG by Textual, then PNG.

Usage: python bench/top_screenshot.py [--out docs/top] [--size 150x24]

It runs `mam demo` (its own temporary workspace, embedded broker and private tmux server), reads
where the demo put them from its first line, and runs `mam top`'s app headless against that
workspace until the demo's review loop has a verdict and a job running; then it saves the screen as `<out>.svg` and
converts it to `<out>.png` with cairosvg when it is installed (`pip install cairosvg`; it needs
the system's libcairo). The demo removes
everything it started when it ends.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from _support import REPO, clean_environ, venv_python

MAM = str(Path(venv_python()).parent / "mam")
FIRST = re.compile(r"workspace (\S+); embedded broker on [\d.]+:\d+; tmux server (\S+)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "top")
    parser.add_argument("--size", default="150x24")
    args = parser.parse_args(argv)
    cols, rows = (int(x) for x in args.size.split("x"))
    demo = subprocess.Popen([MAM, "demo"], env=clean_environ(), stdout=subprocess.PIPE, text=True)
    try:
        assert demo.stdout is not None
        match = None
        while match is None:
            line = demo.stdout.readline()
            if not line:
                raise RuntimeError("mam demo ended before naming its workspace")
            match = FIRST.search(line)
        ws_root, tmux_server = match.group(1).rstrip(";"), match.group(2)
        os.environ.update({"MAM_WORKSPACE": ws_root, "MAM_TMUX_SERVER": tmux_server, "MAM_NO_AUTOSTART": "1"})
        svg = shoot(Path(ws_root), cols, rows, args.out.with_suffix(".svg"))
    finally:
        demo.wait(timeout=300)
    print(f"wrote {svg}")
    try:
        import cairosvg  # type: ignore[import-not-found]
    except ImportError:
        print("no PNG: cairosvg is not installed (pip install cairosvg)")
        return 0
    png = args.out.with_suffix(".png")
    cairosvg.svg2png(url=str(svg), write_to=str(png), output_width=cols * 10)
    print(f"wrote {png}")
    return 0


def shoot(root: Path, cols: int, rows: int, svg: Path) -> Path:
    from mam.settings import load_settings
    from mam.view.top import TopApp
    from mam.workspace import Workspace

    ws = Workspace(root)
    app = TopApp(ws, load_settings(env_file=None))

    async def run() -> None:
        async with app.run_test(size=(cols, rows)) as pilot:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                await pilot.pause(0.1)
                snap = app.snap
                if snap is not None and snap.loops and app.broker == "up" and snap.loops[-1].verdicts:
                    if any(j.state == "running" for j in snap.jobs):
                        break
            app.save_screenshot(filename=svg.name, path=str(svg.parent))

    asyncio.run(run())
    return svg


if __name__ == "__main__":
    sys.exit(main())
