"""Background roles of noisyloop (trainer, jobs, sweeper), run beside the API."""

ModelRef = tuple[str, str]
"""``(tenant, model)``: the key of every per-model map the workers keep."""
