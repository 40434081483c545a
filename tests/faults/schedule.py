"""A seeded random fault schedule: which job goes where, what the agent does, and what gets
SIGKILLed at which moment. The same seed always gives the same schedule.

On a cluster (`cluster=True`, tests/faults/cluster.py) `broker` kills one of the three NATS nodes
(`broker_node`), and one more fault is drawn: `partition`, the remote host cut off for `cut_s` seconds,
then joined again: two times in three for longer than the jobs' liveness window (their origin ends
them by their deadlines meanwhile), else for less (a blip). With `takeover` (every blip, half the
others) the origin's node is also killed halfway through the cut, so the jobs it held are taken over
at a new epoch while their runner cannot hear it: after a blip, the events the runner stored meanwhile
reach an origin still following the job, at the older epoch. Half the jobs are remote there."""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

VICTIMS = ("none", "wrapper", "agent", "heartbeater", "monitor", "runner", "broker", "node")
CLUSTER_VICTIMS = (*VICTIMS, "partition")
INFRA = ("broker", "monitor", "runner", "node", "partition")  # shared by a wave's jobs: one such fault a wave
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
    broker_node: int = 0  # on a cluster: which NATS node `broker` kills (0-2)
    cut_s: float = 0.0  # on a cluster: how long `partition` keeps the remote host cut off
    takeover: bool = False  # on a cluster: `partition` also kills the origin's node halfway through the cut

    def describe(self) -> str:
        where = f"remote:rf/{self.session}" if self.remote else f"tmux:{self.session}"
        fault = self.victim
        if self.victim == "broker" and self.broker_node:
            fault = f"broker(n{self.broker_node + 1})"
        elif self.victim == "partition":
            fault = f"partition({self.cut_s:.1f}s{'+takeover' if self.takeover else ''})"
        return (
            f"#{self.index} {self.job_id} -> {where} behaviour={self.behaviour} "
            f"kill={fault}@{self.kill_after:.2f}s restart={self.restart}"
            + (f" {self.action}@{self.action_at:.2f}s+{self.resume_after:.2f}s" if self.action != "none" else "")
        )


def make_schedule(
    seed: int, jobs: int, local: list[str], remote: list[str], *, cluster: bool = False, window_s: float = 0.0
) -> list[Step]:
    """`cluster`: NATS node kills and partitions of the remote host longer than `window_s` (the liveness window)."""
    rng = random.Random(seed)
    acts = random.Random(seed * 7919 + 1)
    faults = random.Random(seed * 104729 + 3)  # the cluster's own draws, so the common ones stay as they were
    steps = []
    for i in range(jobs):
        is_remote = rng.random() < (0.5 if cluster else 0.25)
        victim = rng.choice(CLUSTER_VICTIMS if cluster else VICTIMS)
        if victim == "runner" and not is_remote:
            victim = rng.choice(("none", "wrapper", "agent"))
        step = Step(
            index=i,
            job_id=f"job-f{seed}-{i:04d}",
            remote=is_remote,
            session=rng.choice(remote if is_remote else local),
            behaviour=rng.choice(BEHAVIOURS),
            victim=victim,
            kill_after=round(rng.uniform(0.05, 2.0), 2),
            restart=rng.random() < 0.6,
        )
        if cluster:
            blip = faults.random() < 1 / 3  # cut off for less than the window, its jobs taken over meanwhile
            step = replace(
                step,
                broker_node=faults.randrange(3),
                cut_s=round(window_s * faults.uniform(0.3, 0.6) if blip else window_s + faults.uniform(1.0, 3.0), 2),
                takeover=blip or faults.random() < 0.5,
            )
        steps.append(step)
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
    one kill of shared infrastructure (broker, monitor, runner, node, partition) and one hold per wave.
    Deterministic for a schedule."""
    infra = INFRA
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
