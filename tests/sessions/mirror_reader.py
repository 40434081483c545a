"""Read `.mam/agent-sessions.yaml` as fast as possible until a stop file appears; print a JSON summary.

Run as its own low-priority process (`python mirror_reader.py MIRROR STOPFILE`) so that it
never takes CPU from the writers it watches, yet reads whenever a core is free. A read that
does not parse into a complete mirror (version, generation, a list of session mappings) is a
failure: that is what a half-written file would look like. Generations must never go back.
"""

from __future__ import annotations

import json
import os
import sys

import yaml


def check(doc: object) -> str:
    """'' if `doc` is a complete mirror, else what is wrong with it."""
    if not isinstance(doc, dict) or set(doc) != {"version", "generation", "sessions"}:
        return f"not a complete mirror document: {str(doc)[:200]!r}"
    if doc["version"] != 1 or not isinstance(doc["generation"], int) or not isinstance(doc["sessions"], list):
        return f"bad header: version {doc['version']!r}, generation {doc['generation']!r}"
    for row in doc["sessions"]:
        if not isinstance(row, dict) or "name" not in row or "updated_at" not in row:
            return f"incomplete session entry: {str(row)[:200]!r}"
    return ""


def main(mirror: str, stop: str) -> int:
    os.nice(19)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    reads = missing = 0
    failures: list[str] = []
    generations: list[int] = []
    while not os.path.exists(stop):
        try:
            with open(mirror, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            missing += 1  # not written yet: nothing to parse
            continue
        reads += 1
        try:
            doc = yaml.load(data, Loader=loader)
            problem = check(doc)
        except yaml.YAMLError as e:
            problem = f"YAML error: {e}"
        if problem:
            failures.append(f"{problem} ({len(data)} bytes)")
            continue
        generation = doc["generation"]
        if generations and generation < generations[-1]:
            failures.append(f"generation went back from {generations[-1]} to {generation}")
        if not generations or generation != generations[-1]:
            generations.append(generation)
    print(
        json.dumps(
            {
                "reads": reads,
                "missing": missing,
                "failures": failures[:20],
                "failure_count": len(failures),
                "generations_seen": len(generations),
                "last_generation": generations[-1] if generations else None,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
