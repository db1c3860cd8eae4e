"""What the SDK tests share: the cluster run_sdk_tests.py started, and the jobs they submit.

The tests reach gpupoold only through the SDK, configured by nothing but the login file that
`gpupoolctl login` wrote under $HOME (run_sdk_tests.py); GPUPOOL_TEST_* say where the daemon
is, so the tests can check what the SDK resolved.
"""

import os

import gpupool
from gpupool.v1 import jobs_pb2

SERVER = os.environ["GPUPOOL_TEST_SERVER"]
DATA_DIR = os.environ["GPUPOOL_TEST_DATA_DIR"]
TENANT = "acme/sdk/tester"
POOL = "gpu"
# Long enough for a job to be placed and run on the simulated node, short enough to fail fast.
WAIT_S = 60.0


def admin_token() -> str:
    with open(os.path.join(DATA_DIR, "admin.token"), encoding="utf-8") as f:
        return f.readline().strip()


def shell_job(script: str) -> jobs_pb2.JobSpec:
    """A one-task job running `/bin/sh -c script` on one whole GPU."""
    return gpupool.job_spec(tenant=TENANT, pool=POOL, command=["/bin/sh", "-c", script],
                            resources=gpupool.whole_gpus(1))
