"""Prefect flows over the DVC stage graph: `full-pipeline` and `finetune`."""

import os

# Before prefect is imported: no usage telemetry from the local server these flows may start.
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
