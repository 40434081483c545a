"""A seeded random fault schedule: which job goes where, what the agent does, and what gets
SIGKILLed at which moment. The same seed always gives the same schedule."""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

VICTIMS = ("none", "wrapper", "agent", "heartbeater", "monitor", "runner", "broker", "node")
BEHAVIOURS = ("ok", "ok", "ok", "slow", "slow", "error", "silent_after_start", "never_start")
# What a person does to a local job meanwhile (issue 27): pause it (each mode) and resume it, or hold the
# whole workspace and release it. Drawn from a generator of its own, so the kills of a seed stay as they were.
ACTIONS = ("none", "none", "none", "safe", "quick", "hard", "hold")


@dataclass(frozen=True)
class Step:
    index: int
    job_id: str
    remote: bool
    session: str
    behaviour: str
    victim: str
    kill_after: float  # seconds after the wrapper started
    restart: bool  # bring the victim back right away (else at the end of the wave)
    action: str = "none"  # ACTIONS: a pause in that mode, or `hold` (mam pause --all)
    action_at: float = 0.0  # seconds after the wrapper started
    resume_after: float = 0.0  # seconds paused (or held) before `mam job resume` (`mam resume --all`)

    def describe(self) -> str:
        where = f"remote:rf/{self.session}" if self.remote else f"tmux:{self.session}"
        return (
            f"#{self.index} {self.job_id} -> {where} behaviour={self.behaviour} "
            f"kill={self.victim}@{self.kill_after:.2f}s restart={self.restart}"
            + (f" {self.action}@{self.action_at:.2f}s+{self.resume_after:.2f}s" if self.action != "none" else "")
        )


def make_schedule(seed: int, jobs: int, local: list[str], remote: list[str]) -> list[Step]:
    rng = random.Random(seed)
    acts = random.Random(seed * 7919 + 1)
    steps = []
    for i in range(jobs):
        is_remote = rng.random() < 0.25
        victim = rng.choice(VICTIMS)
        if victim == "runner" and not is_remote:
            victim = rng.choice(("none", "wrapper", "agent"))
        steps.append(
            Step(
                index=i,
                job_id=f"job-f{seed}-{i:04d}",
                remote=is_remote,
                session=rng.choice(remote if is_remote else local),
                behaviour=rng.choice(BEHAVIOURS),
                victim=victim,
                kill_after=round(rng.uniform(0.05, 2.0), 2),
                restart=rng.random() < 0.6,
            )
        )
    for i, step in enumerate(steps):
        action = acts.choice(ACTIONS)
        if action != "none" and not step.remote:  # a remote job is paused on its runner's host, not here
            steps[i] = replace(
                step,
                action=action,
                action_at=round(acts.uniform(0.1, 2.0), 2),
                resume_after=round(acts.uniform(0.5, 2.5), 2),
            )
    return steps


def waves(steps: list[Step], width: int) -> list[list[Step]]:
    """Pack steps into waves of at most `width`: never two jobs on one session in a wave, and at most
    one kill of shared infrastructure (broker, monitor, runner, node) and one hold per wave. Deterministic for a
    schedule."""
    infra = ("broker", "monitor", "runner", "node")
    left = list(steps)
    out: list[list[Step]] = []
    while left:
        wave: list[Step] = []
        for step in list(left):
            if len(wave) >= width:
                break
            if any((s.remote, s.session) == (step.remote, step.session) for s in wave):
                continue
            if step.victim in infra and any(s.victim in infra for s in wave):
                continue
            if step.action == "hold" and any(s.action == "hold" for s in wave):
                continue
            wave.append(step)
            left.remove(step)
        out.append(wave)
    return out
