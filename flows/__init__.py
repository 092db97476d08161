"""Prefect flows over the DVC stage graph: `full-pipeline`, `finetune` and `predict`."""

import os

# Before prefect is imported: no usage telemetry from the local server these flows may start.
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
# A temporary server on a new PREFECT_HOME first creates its database, which takes longer than
# Prefect's default 20 s on a busy 2-core machine; the flow would then fail before any stage.
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
# A flow run whose Prefect server goes away: each API call is retried 3 times (after about 2, 4
# and 8 s), not 5 (over a minute, for each call), so that the run ends within seconds of its
# last stage, saying so (flows.cli), rather than minutes later.
os.environ.setdefault("PREFECT_CLIENT_MAX_RETRIES", "3")
