"""File bookkeeping for the deploy scripts: source hash, staging, skills, .gitignore, the install manifest.

Standard library only: it runs with whatever Python the scripts found, before mam is installed.
It never writes a file whose content would not change, so a second install touches nothing.
In the venv it changes one line: the first of .venv/bin/mam, after pip, to add -S (script_without_site).
The bash scripts own everything else (checks, the venv, pip, processes).

Usage (from the deploy scripts only):
  _deploy.py source-hash SRC
  _deploy.py stage SRC DEST                      copy the package files; print the source hash
  _deploy.py apply SRC WS --venv created|existing --source-hash H --env-from example|.env|kept
                                                 skills, .gitignore, the launcher, -S in .venv/bin/mam
  _deploy.py unapply SRC WS                      take out skills, .gitignore lines, an unchanged .mam.env
  _deploy.py get WS KEY                          print one manifest field ('' when absent)
  _deploy.py worktrees WS [--remove [--discard]] list the git worktrees under WS/.mam holding work
                                                 found nowhere else; --remove removes them (exit 1
                                                 if any holds such work, unless --discard)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

MANIFEST = Path(".mam") / "install-manifest.json"
LAUNCHER = Path(".mam") / "bin" / "mam"  # the one file the printed `export PATH` line puts on PATH
SKILLS = Path(".agents") / "skills"
ENV_FILE = ".mam.env"
EXAMPLE = ".mam.env.example"
GITIGNORE = ".gitignore"
GITIGNORE_MARKER = "# mam (added by deploy/install.sh; deploy/remove.sh takes these lines out)"
# Each line install adds, with the spellings that already mean the same to git.
GITIGNORE_LINES = {
    ".venv": {".venv", ".venv/", "/.venv", "/.venv/"},
    ".mam/": {".mam", ".mam/", "/.mam", "/.mam/"},
    ".mam.env": {".mam.env", "/.mam.env"},
}
PACKAGE_FILES = ("pyproject.toml", "setup.py", "setup.cfg", "MANIFEST.in")
PACKAGE_GLOBS = ("README*", "LICENSE*", "COPYING*")
PACKAGE_DIR = "mam"


def say(message: str) -> None:
    print(f"  {message}")


def warn(message: str) -> None:
    print(f"  warning: {message}", file=sys.stderr)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 16), b""):
            h.update(block)
    return h.hexdigest()


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def write_if_changed(path: Path, data: bytes, mode: int | None = None) -> bool:
    """Replace `path` atomically with `data` unless it already holds exactly that; True if written."""
    try:
        if path.read_bytes() == data:
            if mode is not None and (path.stat().st_mode & 0o777) != mode:
                path.chmod(mode)
            return False
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        if mode is not None:
            os.chmod(tmp, mode)
        elif path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        else:
            os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True


# -- the package source ----------------------------------------------------------------------------


def package_files(src: Path) -> list[Path]:
    """The files that make the installed package: its metadata files and mam/ (no caches)."""
    found = [src / name for name in PACKAGE_FILES if (src / name).is_file()]
    for pattern in PACKAGE_GLOBS:
        found += sorted(p for p in src.glob(pattern) if p.is_file())
    for folder, dirs, files in os.walk(src / PACKAGE_DIR):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.endswith(".egg-info"))
        found += [Path(folder) / f for f in sorted(files) if not f.endswith((".pyc", ".pyo"))]
    return found


def source_hash(src: Path) -> str:
    h = hashlib.sha256()
    for path in package_files(src):
        h.update(path.relative_to(src).as_posix().encode() + b"\0")
        h.update(sha256_file(path).encode() + b"\n")
    return h.hexdigest()


def stage(src: Path, dest: Path) -> str:
    """Copy the package files to `dest`, so pip builds there and leaves nothing in the clone."""
    for path in package_files(src):
        target = dest / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    return source_hash(src)


# -- the manifest ------------------------------------------------------------------------------------


def read_manifest(ws: Path) -> dict[str, Any]:
    try:
        data = json.loads((ws / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        raise SystemExit(f"cannot read {ws / MANIFEST}: {e}") from e
    return data if isinstance(data, dict) else {}


def write_manifest(ws: Path, manifest: dict[str, Any]) -> bool:
    data = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode("utf-8")
    (ws / MANIFEST).parent.mkdir(mode=0o700, exist_ok=True)
    return write_if_changed(ws / MANIFEST, data, mode=0o600)


# -- the launcher on PATH --------------------------------------------------------------------------------

LAUNCHER_TEXT = """#!/bin/sh
# mam, as the `export PATH` line deploy/install.sh prints puts it on PATH (this folder holds only this
# file, so no python3 or pip of mam's venv shadows yours). It runs the mam of the workspace it is used
# in: $MAM_WORKSPACE's when set, else that of the nearest folder at or above the current one holding
# .venv/bin/mam, else that of the workspace it was installed into (the last line).
# Written by deploy/install.sh; deploy/remove.sh takes it out.
if [ -n "${{MAM_WORKSPACE:-}}" ] && [ -x "$MAM_WORKSPACE/.venv/bin/mam" ]; then
    exec "$MAM_WORKSPACE/.venv/bin/mam" "$@"
fi
dir=$(pwd -P 2>/dev/null) || dir=/
while :; do
    if [ -x "$dir/.venv/bin/mam" ] && [ -d "$dir/.mam" ]; then
        exec "$dir/.venv/bin/mam" "$@"
    fi
    [ "$dir" = / ] && break
    dir=${{dir%/*}}
    [ -n "$dir" ] || dir=/
done
exec {mam} "$@"
"""


def write_launcher(ws: Path) -> dict[str, str]:
    """`.mam/bin/mam` (0755), written only when its text changes; its record for the manifest."""
    text = LAUNCHER_TEXT.format(mam=shlex.quote(str(ws / ".venv" / "bin" / "mam")))
    if write_if_changed(ws / LAUNCHER, text.encode("utf-8"), mode=0o755):
        say(f"wrote {LAUNCHER} (the folder the PATH line adds holds only mam)")
    return {"path": LAUNCHER.as_posix(), "sha256": sha256_text(text)}


def remove_launcher(ws: Path, record: dict[str, Any]) -> None:
    path = ws / LAUNCHER
    if not record or not path.is_file():
        return
    if sha256_file(path) != record.get("sha256"):
        warn(f"kept {LAUNCHER}: changed since mam wrote it")
        return
    path.unlink()
    try:
        path.parent.rmdir()
    except OSError:
        pass
    say(f"{LAUNCHER}: removed (take its `export PATH={path.parent}:...` line out of your shell's startup file)")


# -- the venv's mam script -------------------------------------------------------------------------------

SCRIPT = Path(".venv") / "bin" / "mam"
SHEBANG_MAX = 127  # bytes of a `#!` line every Linux kernel reads whole (older ones cut it at 127)


def _venv_has_no_system_site(python: str) -> bool:
    """True if `python` is a venv's interpreter whose pyvenv.cfg leaves the system's site-packages out."""
    try:
        text = (Path(python).parent.parent / "pyvenv.cfg").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    for line in text.splitlines():
        key, eq, value = line.partition("=")
        if eq and key.strip().lower() == "include-system-site-packages":
            return value.strip().lower() != "true"
    return True  # the key is absent: venv's default, no system site-packages


def script_without_site(ws: Path) -> dict[str, str]:
    """Make `.venv/bin/mam` start its Python with -S; its record for the manifest ({} if no script).

    pip writes the script's first line as `#!<the venv's python>` (no flags); only that line changes,
    and only when it is that simple, the venv has no system site-packages (mam/bin/mam then finds
    everything in the venv's own site-packages) and the line stays short enough for any kernel.
    """
    path = ws / SCRIPT
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    first, nl, rest = data.partition(b"\n")
    words = first[2:].split() if first.startswith(b"#!") else []
    python = words[0].decode("utf-8", "surrogateescape") if words else ""
    if not python or words[1:] not in ([], [b"-S"]) or not os.path.isabs(python):
        warn(f"left {SCRIPT} as pip wrote it: its first line is not `#!/path/to/python`")
        return {"path": SCRIPT.as_posix(), "first_line": first.decode("utf-8", "replace")}
    wanted = b"#!" + words[0]
    if not _venv_has_no_system_site(python):
        say(f"{SCRIPT}: starts Python without -S (-S suits only a venv's Python without the system's packages)")
    elif len(wanted) + len(b" -S") > SHEBANG_MAX:
        say(f"{SCRIPT}: starts Python without -S (its first line would pass {SHEBANG_MAX} bytes)")
    else:
        wanted += b" -S"
    if write_if_changed(path, wanted + nl + rest) and wanted.endswith(b" -S"):
        say(f"{SCRIPT}: starts Python with -S (it skips Python's `site` step at every start)")
    return {"path": SCRIPT.as_posix(), "first_line": wanted.decode("utf-8", "surrogateescape")}


# -- skills ------------------------------------------------------------------------------------------


def skill_tree(folder: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file in a skill folder (no caches)."""
    tree = {}
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith((".pyc", ".pyo")):
                continue
            path = Path(root) / name
            tree[path.relative_to(folder).as_posix()] = sha256_file(path)
    return tree


def prune_empty_dirs(top: Path) -> None:
    """Remove empty folders under `top`, bottom-up, and `top` itself when it ends up empty."""
    if not top.is_dir():
        return
    for root, dirs, _files in os.walk(top, topdown=False):
        for d in dirs:
            try:
                (Path(root) / d).rmdir()
            except OSError:
                pass
    try:
        top.rmdir()
    except OSError:
        pass


def remove_recorded_files(folder: Path, recorded: dict[str, str]) -> list[str]:
    """Delete the recorded files that are unchanged; return the ones kept because someone changed them."""
    kept = []
    for rel, digest in sorted(recorded.items()):
        path = folder / rel
        if not path.is_file():
            continue
        if sha256_file(path) == digest:
            path.unlink()
        else:
            kept.append(rel)
    return kept


def sync_skills(
    src: Path, ws: Path, old: dict[str, dict[str, str]], created_dirs: list[str]
) -> dict[str, dict[str, str]]:
    """Make `.agents/skills/<name>/` match the clone's skills; touch only files that differ."""
    src_root = src / "skills"
    names = (
        sorted(d.name for d in src_root.iterdir() if d.is_dir() and not d.name.startswith("."))
        if src_root.is_dir()
        else []
    )
    target_root = ws / SKILLS
    if not names:
        warn(f"no skills found in {src_root}; nothing copied to {SKILLS}")
    for folder in (SKILLS.parent, SKILLS):
        if names and not (ws / folder).exists():
            (ws / folder).mkdir(parents=True)
            if folder.as_posix() not in created_dirs:
                created_dirs.append(folder.as_posix())
    record: dict[str, dict[str, str]] = {}
    touched: list[str] = []  # one line for all of them: an install's output stays short
    files = 0
    for name in names:
        tree = skill_tree(src_root / name)
        changed = 0
        for rel, digest in tree.items():
            source, target = src_root / name / rel, target_root / name / rel
            mode = source.stat().st_mode & 0o777
            if target.is_file() and sha256_file(target) == digest:
                if (target.stat().st_mode & 0o777) != mode:
                    target.chmod(mode)
                continue
            write_if_changed(target, source.read_bytes(), mode=mode)
            changed += 1
        stale = {rel: d for rel, d in old.get(name, {}).items() if rel not in tree}
        for rel in remove_recorded_files(target_root / name, stale):
            warn(f"kept {SKILLS / name / rel}: changed since mam copied it")
        if stale:
            for parent in sorted(
                {(target_root / name / rel).parent for rel in stale}, key=lambda p: len(p.parts), reverse=True
            ):
                if parent != target_root / name:
                    prune_empty_dirs(parent)
        record[name] = tree
        if changed or stale:
            touched.append(name if not stale else f"{name} ({len(stale)} file(s) removed)")
            files += changed
    if touched:
        named = [t for t in touched if "(" in t]  # those that lost files are named however many changed
        said = ", ".join(touched) if len(touched) <= 3 else ", ".join([f"{len(touched)} skills", *named])
        say(f"{SKILLS}: {files} file(s) copied for {said}")
    for name in sorted(set(old) - set(names)):
        kept = remove_recorded_files(target_root / name, old[name])
        prune_empty_dirs(target_root / name)
        for rel in kept:
            warn(f"kept {SKILLS / name / rel}: changed since mam copied it")
        say(f"skill {name}: removed (no longer in {src_root})")
    return record


# -- .gitignore --------------------------------------------------------------------------------------


def gitignore_add(ws: Path, old: dict[str, Any]) -> dict[str, Any]:
    path = ws / GITIGNORE
    existed = path.exists()
    text = path.read_text(encoding="utf-8") if existed else ""
    present = {line.strip() for line in text.splitlines()}
    missing = [line for line, spellings in GITIGNORE_LINES.items() if not (present & spellings)]
    record: dict[str, Any] = {"created": False, "lines": [], "appended": "", **old}
    if not missing:
        return record
    if not existed:
        record["created"] = True
    block = ""
    if text and not text.endswith("\n"):
        block += "\n"
    if text.strip():
        block += "\n"
    block += "\n".join([GITIGNORE_MARKER, *missing]) + "\n"
    write_if_changed(path, (text + block).encode("utf-8"))
    record["lines"] = sorted(set(record.get("lines", [])) | set(missing))
    record["appended"] = block
    say(f"{GITIGNORE}: added {', '.join(missing)}")
    return record


def gitignore_remove(ws: Path, record: dict[str, Any]) -> None:
    path = ws / GITIGNORE
    if not record or not path.exists():
        return
    text = path.read_text(encoding="utf-8")
    appended = record.get("appended", "")
    if appended and text.endswith(appended):
        text = text[: -len(appended)]
    else:
        # Someone edited below our block: take out the last copy of each line we added, nothing else.
        lines = text.splitlines(keepends=True)
        for wanted in [GITIGNORE_MARKER, *record.get("lines", [])]:
            for i in range(len(lines) - 1, -1, -1):
                if lines[i].strip() == wanted:
                    del lines[i]
                    # The blank line install put before its block goes with the marker.
                    if (
                        wanted == GITIGNORE_MARKER
                        and i > 0
                        and not lines[i - 1].strip()
                        and appended.startswith(("\n\n", "\n#"))
                    ):
                        del lines[i - 1]
                    break
        text = "".join(lines)
    if record.get("created") and not text.strip():
        path.unlink()
        say(f"{GITIGNORE}: removed (install had created it)")
    else:
        write_if_changed(path, text.encode("utf-8"))
        say(f"{GITIGNORE}: took out the lines install added")


# -- commands ----------------------------------------------------------------------------------------


def cmd_apply(args: argparse.Namespace) -> None:
    src, ws = Path(args.src), Path(args.ws)
    old = read_manifest(ws)
    created_dirs = list(old.get("created_dirs", []))
    manifest = dict(old)
    manifest["format"] = 1
    manifest["source"] = str(src)
    manifest["source_hash"] = args.source_hash
    # The first install decides whether the venv is ours to delete later.
    manifest["venv"] = old.get("venv") or args.venv
    manifest["skills"] = sync_skills(src, ws, old.get("skills", {}), created_dirs)
    manifest["created_dirs"] = created_dirs
    manifest["gitignore"] = gitignore_add(ws, old.get("gitignore", {}))
    manifest["launcher"] = write_launcher(ws)
    manifest["script"] = script_without_site(ws)
    env = dict(old.get("env_file", {}))
    if args.env_from != "kept" or not env:
        env["from"] = args.env_from
    example = src / EXAMPLE
    if args.env_from == "example" and example.is_file():
        env["example_sha256"] = sha256_file(example)
    manifest["env_file"] = env
    if write_manifest(ws, manifest):
        say(f"recorded what was installed in {MANIFEST}")


def cmd_unapply(args: argparse.Namespace) -> None:
    src, ws = Path(args.src), Path(args.ws)
    manifest = read_manifest(ws)
    for name, tree in sorted(manifest.get("skills", {}).items()):
        folder = ws / SKILLS / name
        kept = remove_recorded_files(folder, tree)
        prune_empty_dirs(folder)
        for rel in kept:
            warn(f"kept {SKILLS / name / rel}: changed since mam copied it")
        others = (
            sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
            if folder.exists()
            else []
        )
        for rel in sorted(set(others) - set(kept)):
            say(f"kept {SKILLS / name / rel}: not a file mam copied")
        say(f"skill {name}: removed" if not folder.exists() else f"skill {name}: removed mam's files, kept the others")
    for rel in sorted(manifest.get("created_dirs", []), key=len, reverse=True):
        try:
            (ws / rel).rmdir()
        except OSError:
            pass
    env = ws / ENV_FILE
    if env.is_file():
        digest = sha256_file(env)
        examples = {manifest.get("env_file", {}).get("example_sha256")}
        if (src / EXAMPLE).is_file():
            examples.add(sha256_file(src / EXAMPLE))
        if digest in examples:
            env.unlink()
            say(f"{ENV_FILE}: removed (unchanged from the example)")
        else:
            say(f"{ENV_FILE}: kept (it holds your settings)")
    gitignore_remove(ws, manifest.get("gitignore", {}))
    remove_launcher(ws, manifest.get("launcher", {}))


def _git(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """git with argv only, outside any GIT_* variable of the caller (GIT_DIR would point elsewhere)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False)


def linked_worktrees(state: Path) -> list[Path]:
    """Every linked git worktree under `state` (a folder holding a `.git` file), outermost only."""
    found: list[Path] = []
    for folder, dirs, files in os.walk(state):
        if ".git" in files:
            found.append(Path(folder))
            dirs[:] = []
        else:
            dirs[:] = sorted(d for d in dirs if not os.path.islink(os.path.join(folder, d)))
    return sorted(found)


def unsaved_work(wt: Path) -> list[str]:
    """What removing worktree `wt` would lose: uncommitted or untracked files, commits on no other ref."""
    try:
        status = _git(["status", "--porcelain", "--untracked-files=all", "--ignore-submodules=none"], wt)
    except OSError:
        return ["git was not found to check it"]
    if status.returncode != 0:
        return [f"git cannot read it ({status.stderr.strip().splitlines()[-1:] or ['?']})"]
    found = []
    changes = [line for line in status.stdout.splitlines() if line.strip()]
    if changes:
        listing = ", ".join(c.strip() for c in changes[:5]) + (", ..." if len(changes) > 5 else "")
        found.append(f"{len(changes)} uncommitted change(s): {listing}")
    branch = _git(["symbolic-ref", "--quiet", "--short", "HEAD"], wt).stdout.strip()
    # Commits its base lacks: on HEAD and on no other branch, tag or remote branch.
    others = ([f"--exclude={branch}"] if branch else []) + ["--branches", "--tags", "--remotes"]
    count = _git(["rev-list", "--count", "HEAD", "--not", *others], wt)
    if count.returncode == 0 and count.stdout.strip() not in ("", "0"):
        where = f"on branch {branch} only" if branch else "on a detached HEAD only"
        found.append(f"{count.stdout.strip()} commit(s) {where}")
    return found


def _main_checkout(wt: Path) -> Path | None:
    listed = _git(["worktree", "list", "--porcelain"], wt)
    first = next((line for line in listed.stdout.splitlines() if line.startswith("worktree ")), "")
    return Path(first[len("worktree ") :]) if listed.returncode == 0 and first else None


def cmd_worktrees(args: argparse.Namespace) -> int:
    ws = Path(args.ws)
    state = ws / ".mam"
    trees = linked_worktrees(state) if state.is_dir() else []
    risky = {wt: unsaved_work(wt) for wt in trees}
    risky = {wt: why for wt, why in risky.items() if why}
    listing = [f"  {wt.relative_to(ws).as_posix()}: {'; '.join(why)}" for wt, why in risky.items()]
    if not args.remove:
        if listing:
            print("\n".join(listing))
        return 0
    if risky and not args.discard:
        print("\n".join(listing), file=sys.stderr)
        return 1
    for wt in trees:
        main = _main_checkout(wt)
        if main is None or main == wt:
            warn(f"{wt}: its repository cannot be found; deleted with .mam/ (see `git worktree prune`)")
            continue
        done = _git(["worktree", "remove", "--force", "--force", str(wt)], main)
        _git(["worktree", "prune"], main)
        if done.returncode != 0:
            warn(f"git could not remove the worktree {wt}: {done.stderr.strip()}")
            return 1
        said = " (its unsaved work discarded)" if wt in risky else ""
        say(f"worktree {wt.relative_to(ws).as_posix()}: removed from {main}{said}")
    return 0


def cmd_get(args: argparse.Namespace) -> None:
    value = read_manifest(Path(args.ws)).get(args.key, "")
    print(value if isinstance(value, str) else json.dumps(value))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="_deploy.py", description="File bookkeeping for mam's deploy scripts.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("source-hash")
    p.add_argument("src")
    p.set_defaults(func=lambda a: print(source_hash(Path(a.src))))
    p = sub.add_parser("stage")
    p.add_argument("src")
    p.add_argument("dest")
    p.set_defaults(func=lambda a: print(stage(Path(a.src), Path(a.dest))))
    p = sub.add_parser("apply")
    p.add_argument("src")
    p.add_argument("ws")
    p.add_argument("--venv", choices=["created", "existing"], required=True)
    p.add_argument("--source-hash", required=True)
    p.add_argument("--env-from", choices=["example", ".env", "kept"], required=True)
    p.set_defaults(func=cmd_apply)
    p = sub.add_parser("unapply")
    p.add_argument("src")
    p.add_argument("ws")
    p.set_defaults(func=cmd_unapply)
    p = sub.add_parser("get")
    p.add_argument("ws")
    p.add_argument("key")
    p.set_defaults(func=cmd_get)
    p = sub.add_parser("worktrees")
    p.add_argument("ws")
    p.add_argument("--remove", action="store_true")
    p.add_argument("--discard", action="store_true")
    p.set_defaults(func=cmd_worktrees)
    args = parser.parse_args(argv)
    return args.func(args) or 0


if __name__ == "__main__":
    sys.exit(main())
