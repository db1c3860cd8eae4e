"""gpupool: a typed Python client for gpupoold (docs/sdk.md).

    import gpupool
    with gpupool.Client() as c:      # the login file `gpupoolctl login` wrote, TLS to its CA
        job = c.submit_job(gpupool.job_spec(tenant="acme/ml/alice", pool="gpu",
                                            command=["nvidia-smi"],
                                            resources=gpupool.whole_gpus(1)))
        print(c.wait_job(job.id).state == gpupool.v1.jobs_pb2.JOB_STATE_SUCCEEDED)

Modules: client (Client, blocking), aio (AsyncClient, asyncio), errors (exceptions by gRPC code),
settings (login file and environment), resources and specs (request builders), and v1 (the
messages and stubs generated from api/gpupool/v1/*.proto when the package was built).
"""

from gpupool import aio, errors, v1
from gpupool.aio import AsyncClient
from gpupool.client import Client
from gpupool.errors import (AlreadyExists, ApiError, ConfigError, Denied, GpupoolError,
                            InvalidArgument, NotFound, PermissionDenied, Rejected, Retryable,
                            Unauthenticated, Unavailable)
from gpupool.resources import fractional, mig, sku, whole_gpus
from gpupool.settings import Settings, load_settings
from gpupool.specs import is_terminal, job_spec

__version__ = "0.1.0"

__all__ = [
    "AlreadyExists", "ApiError", "AsyncClient", "Client", "ConfigError", "Denied", "GpupoolError",
    "InvalidArgument", "NotFound", "PermissionDenied", "Rejected", "Retryable", "Settings",
    "Unauthenticated", "Unavailable", "aio", "errors", "fractional", "is_terminal", "job_spec",
    "load_settings", "mig", "sku", "v1", "whole_gpus",
]
