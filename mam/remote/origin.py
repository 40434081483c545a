"""The origin side of a `remote:RUNNER/SESSION` job, as the parts mam.jobs' delegation takes
(`mam.jobs.delegate.RemoteOrigin`): the job's key, derived from MAM_DISPATCH_SECRET and a fresh key
nonce (only the nonce travels, in the dispatch), and the delivery that dispatches the brief to the runner.
"""

from __future__ import annotations

from mam.bus.mqtt import MqttClient
from mam.bus.topics import Topics
from mam.jobs.delivery import Delivery
from mam.jobs.target import Target
from mam.remote.dispatch import RemoteDelivery, check_remote_allowed
from mam.remote.job_key import job_key, new_key_nonce
from mam.settings import Settings
from mam.workspace import Workspace


class Origin:
    def job_key(self, settings: Settings, ws: Workspace, job_id: str, *, allow_insecure: bool) -> tuple[str, str]:
        secret = check_remote_allowed(settings, ws, allow_insecure=allow_insecure)
        key_nonce = new_key_nonce()
        return job_key(secret, job_id, key_nonce), key_nonce

    def delivery(
        self, target: Target, *, ws: Workspace, settings: Settings, client: MqttClient, topics: Topics, brief: str
    ) -> Delivery:
        return RemoteDelivery(target, ws=ws, settings=settings, client=client, topics=topics, brief=brief)


ORIGIN = Origin()
