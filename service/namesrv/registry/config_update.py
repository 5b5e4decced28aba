"""UPDATE_NAMESRV_CONFIG, fleet-wide: validated overrides stored in Redis, applied by every worker.

Only options that take effect without a restart (the ``[dynamic]`` ones in
``config/default.toml``) are stored; other known keys are reported as needing a restart, and
unknown keys are ignored, as Java's ``Configuration.update`` ignores them. Blacklisted keys
refuse the whole update with NO_PERMISSION.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import orjson

from namesrv.config import DYNAMIC_KEYS, FIELDS, ConfigError, with_overrides
from namesrv.domain.codes import HARD_CONFIG_BLACKLIST
from namesrv.domain.errors import BadRequest, PermissionDenied
from namesrv.registry.service import RegistryService
from namesrv.worker import WorkerState

log = logging.getLogger(__name__)


def blacklist(worker: WorkerState) -> set[str]:
    extra = {k.strip() for k in worker.base.configBlackList.split(";") if k.strip()}
    return set(HARD_CONFIG_BLACKLIST) | extra


async def apply_update(
    service: RegistryService, worker: WorkerState, changes: Mapping[str, str]
) -> dict[str, list[str]]:
    """Returns which keys were applied, which need a restart and which are unknown."""
    if any(key in blacklist(worker) for key in changes):
        raise PermissionDenied("Can not update config in black list.")
    dynamic = {k: v.strip() for k, v in changes.items() if k in DYNAMIC_KEYS}
    try:
        with_overrides(worker.base, dynamic, "UPDATE_NAMESRV_CONFIG")
    except ConfigError as exc:
        raise BadRequest(str(exc)) from None
    if dynamic:
        await service.store.update_config(dynamic, orjson.dumps(dynamic).decode())
        worker.apply_overrides(await service.store.config_overrides())
    outcome = {
        "applied": sorted(dynamic),
        "needsRestart": sorted(k for k in changes if k in FIELDS and k not in DYNAMIC_KEYS),
        "ignored": sorted(k for k in changes if k not in FIELDS),
    }
    # Java answers UPDATE_NAMESRV_CONFIG with a bare success, so the remoting reply cannot say
    # which keys took effect: the log (and HTTP PUT /v1/config's body) does.
    log.log(
        logging.WARNING if outcome["needsRestart"] or outcome["ignored"] else logging.INFO,
        "config update: applied %s; needs a restart (not applied) %s; unknown, ignored %s",
        ",".join(outcome["applied"]) or "-",
        ",".join(outcome["needsRestart"]) or "-",
        ",".join(outcome["ignored"]) or "-",
    )
    return outcome
