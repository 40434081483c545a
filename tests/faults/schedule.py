"""A seeded random fault schedule: which job goes where, what the agent does, and what gets
SIGKILLed at which moment. The same seed always gives the same schedule."""

from __future__ import annotations

import random
from dataclasses import dataclass

VICTIMS = ("none", "wrapper", "agent", "heartbeater", "monitor", "runner", "broker", "node")
BEHAVIOURS = ("ok", "ok", "ok", "slow", "slow", "error", "silent_after_start", "never_start")


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

    def describe(self) -> str:
        where = f"remote:rf/{self.session}" if self.remote else f"tmux:{self.session}"
        return (
            f"#{self.index} {self.job_id} -> {where} behaviour={self.behaviour} "
            f"kill={self.victim}@{self.kill_after:.2f}s restart={self.restart}"
        )


def make_schedule(seed: int, jobs: int, local: list[str], remote: list[str]) -> list[Step]:
    rng = random.Random(seed)
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
    return steps


def waves(steps: list[Step], width: int) -> list[list[Step]]:
    """Pack steps into waves of at most `width`: never two jobs on one session in a wave, and at most
    one kill of shared infrastructure (broker, monitor, runner, node) per wave. Deterministic for a schedule."""
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
            wave.append(step)
            left.remove(step)
        out.append(wave)
    return out
