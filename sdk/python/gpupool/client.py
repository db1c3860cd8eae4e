"""Client: the blocking client of gpupoold's gRPC API (gpupool.aio has the asyncio twin).

    with gpupool.Client() as c:                 # gpupoolctl's login file, environment, defaults
        job = c.submit_job(gpupool.job_spec(tenant="acme/ml/alice", pool="gpu",
                                            command=["python", "train.py"],
                                            resources=gpupool.whole_gpus(1)))
        for event in c.watch_job(job.id):       # until the job ends
            print(event.message)
        print(c.read_task_logs(job.id + ".0").decode())

Results are the API's protobuf messages (gpupool.v1.*_pb2, typed by their .pyi stubs); failures
raise gpupool.errors.ApiError subclasses. Unary calls have a deadline (`timeout`, 30 s as in
gpupoolctl); streams have none unless one is given to them. A stream left early (break, or the
generator closed) cancels its call. `channel` and `metadata` are there for the API's other
services: `PoolServiceStub(c.channel).ListPools(req, metadata=c.metadata)`.

Thread safety: a Client may be shared by threads (gRPC channels and stubs are thread-safe).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable, Iterator, List, Optional

import grpc

from gpupool import specs
from gpupool._channel import call_metadata, open_channel
from gpupool.errors import ApiError, from_rpc_error
from gpupool.settings import load_settings
from gpupool.v1 import (billing_pb2, billing_pb2_grpc, jobs_pb2, jobs_pb2_grpc, services_pb2,
                        services_pb2_grpc, usage_pb2, usage_pb2_grpc)


class Client:
    def __init__(self, server: Optional[str] = None, *, token: Optional[str] = None,
                 ca: Optional[str] = None, timeout: Optional[float] = 30.0,
                 config_path: Optional[str] = None) -> None:
        """Arguments left None come from the environment, then the login file (gpupool.settings).
        ca="" forces plaintext; token="" sends no credential."""
        self.settings = load_settings(server, token=token, ca=ca, config_path=config_path)
        self.timeout = timeout
        self.metadata = call_metadata(self.settings)
        self.channel: grpc.Channel = open_channel(self.settings)
        self._jobs = jobs_pb2_grpc.JobServiceStub(self.channel)
        self._services = services_pb2_grpc.ServiceServiceStub(self.channel)
        self._usage = usage_pb2_grpc.UsageServiceStub(self.channel)
        self._billing = billing_pb2_grpc.BillingServiceStub(self.channel)

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- calls: the one place grpc errors become ApiError ----

    def _error(self, e: grpc.RpcError) -> ApiError:
        return from_rpc_error(e, self.settings.server, self.settings.tls)

    def _call(self, method: Callable[..., Any], request: Any) -> Any:
        try:
            return method(request, metadata=self.metadata, timeout=self.timeout)
        except grpc.RpcError as e:
            raise self._error(e) from e

    def _stream(self, method: Callable[..., Any], request: Any,
                timeout: Optional[float]) -> Iterator[Any]:
        call = method(request, metadata=self.metadata, timeout=timeout)
        try:
            yield from call
        except grpc.RpcError as e:
            raise self._error(e) from e
        finally:
            call.cancel()

    # ---- jobs ----

    def submit_job(self, spec: jobs_pb2.JobSpec, *, idempotency_key: str = "") -> jobs_pb2.Job:
        """Submits a job (gpupool.job_spec builds one); returns it as stored. With
        `idempotency_key`, a retry returns the job the first attempt made."""
        req = jobs_pb2.SubmitJobRequest(spec=spec, idempotency_key=idempotency_key)
        return self._call(self._jobs.SubmitJob, req).job

    def get_job(self, job_id: str) -> jobs_pb2.Job:
        return self._call(self._jobs.GetJob, jobs_pb2.GetJobRequest(job_id=job_id))

    def list_jobs(self, *, tenant: str = "", pool: str = "",
                  state: jobs_pb2.JobState = jobs_pb2.JOB_STATE_UNSPECIFIED,
                  page_size: int = 0) -> Iterator[jobs_pb2.Job]:
        """Every matching job, fetching further pages as the iteration reaches them."""
        req = jobs_pb2.ListJobsRequest(tenant=tenant, pool=pool, state=state, page_size=page_size)
        while True:
            resp = self._call(self._jobs.ListJobs, req)
            yield from resp.jobs
            if not resp.next_page_token:
                return
            req.page_token = resp.next_page_token

    def cancel_job(self, job_id: str, reason: str = "") -> jobs_pb2.Job:
        """Cancels; the job is CANCELLING until its tasks stop, then CANCELLED."""
        return self._call(self._jobs.CancelJob,
                          jobs_pb2.CancelJobRequest(job_id=job_id, reason=reason))

    def watch_job(self, job_id: str, *,
                  timeout: Optional[float] = None) -> Iterator[jobs_pb2.JobEvent]:
        """The job's current state, then each change; ends after the event that ends the job."""
        return self._stream(self._jobs.WatchJob, jobs_pb2.WatchJobRequest(job_id=job_id), timeout)

    def wait_job(self, job_id: str, *, timeout: Optional[float] = None) -> jobs_pb2.Job:
        """Blocks until the job has ended; returns it as it ended."""
        last: Optional[jobs_pb2.Job] = None
        for event in self.watch_job(job_id, timeout=timeout):
            last = event.job
        if last is not None and specs.is_terminal(last):
            return last
        return self.get_job(job_id)

    def task_logs(self, task_id: str, *, offset: int = 0, follow: bool = False,
                  timeout: Optional[float] = None) -> Iterator[jobs_pb2.TaskLogChunk]:
        """The task's combined output from byte `offset`, in chunks; with `follow`, new output
        as it appears until the task ends (the last chunk has eof set)."""
        req = jobs_pb2.GetTaskLogsRequest(task_id=task_id, offset=offset, follow=follow)
        return self._stream(self._jobs.GetTaskLogs, req, timeout)

    def read_task_logs(self, task_id: str, *, follow: bool = False,
                       timeout: Optional[float] = None) -> bytes:
        """task_logs, joined: the output so far (or, with follow, all of it once it ends)."""
        return b"".join(c.data for c in self.task_logs(task_id, follow=follow, timeout=timeout))

    # ---- services ----

    def create_service(self, service: services_pb2.Service) -> services_pb2.Service:
        return self._call(self._services.CreateService,
                          services_pb2.CreateServiceRequest(service=service))

    def get_service(self, tenant: str, name: str) -> services_pb2.Service:
        return self._call(self._services.GetService,
                          services_pb2.GetServiceRequest(tenant=tenant, name=name))

    def list_services(self, tenant: str = "") -> List[services_pb2.Service]:
        """This tenant's and its subtree's; "" = every service the caller may see."""
        resp = self._call(self._services.ListServices,
                          services_pb2.ListServicesRequest(tenant=tenant))
        return list(resp.services)

    def update_service(self, service: services_pb2.Service) -> services_pb2.Service:
        """Replaces the settings of the service `service` names (tenant and name)."""
        return self._call(self._services.UpdateService,
                          services_pb2.UpdateServiceRequest(service=service))

    def rollback_service(self, tenant: str, name: str) -> services_pb2.Service:
        return self._call(self._services.RollbackService,
                          services_pb2.RollbackServiceRequest(tenant=tenant, name=name))

    def delete_service(self, tenant: str, name: str) -> None:
        self._call(self._services.DeleteService,
                   services_pb2.DeleteServiceRequest(tenant=tenant, name=name))

    # ---- usage and billing ----

    def get_usage(self, *, tenant: str = "", pool: str = "", model: str = "",
                  priority_class: str = "", period: str = "", start: specs.Time = None,
                  end: specs.Time = None, tenant_depth: int = 0,
                  split_preempted: bool = False) -> usage_pb2.GetUsageResponse:
        """The usage ledger's report, summed per `period` ("hour", "day" or "month") over
        intervals starting in [start, end); see gpupool.specs.usage_request."""
        req = specs.usage_request(tenant=tenant, pool=pool, model=model,
                                  priority_class=priority_class, period=period, start=start,
                                  end=end, tenant_depth=tenant_depth,
                                  split_preempted=split_preempted)
        return self._call(self._usage.GetUsage, req)

    def list_invoices(self, *, tenant: str = "", period: str = "",
                      start: Optional[datetime] = None,
                      end: Optional[datetime] = None) -> List[billing_pb2.Invoice]:
        """Invoices rated from usage: `period` "2026-11" or "2026-11-05", or start/end; none of
        them = the current month. `tenant` "" = the caller's subtree (an admin: every top-level
        tenant with usage)."""
        req = specs.invoices_request(tenant=tenant, period=period, start=start, end=end)
        return list(self._call(self._billing.ListInvoices, req).invoices)

    def export_invoices(self, *, tenant: str = "", period: str = "",
                        start: Optional[datetime] = None,
                        end: Optional[datetime] = None) -> billing_pb2.ExportResponse:
        """The same invoices as CSV (`body`), with a suggested `filename`."""
        req = specs.invoices_request(tenant=tenant, period=period, start=start, end=end)
        return self._call(self._billing.ExportInvoices, req)

    def get_usage_feed(self, *, tenant: str = "", period: str = "",
                       start: Optional[datetime] = None,
                       end: Optional[datetime] = None) -> List[billing_pb2.UsageFeedItem]:
        """The invoices' usage as items for a billing engine, one per account and product."""
        req = specs.usage_feed_request(tenant=tenant, period=period, start=start, end=end)
        return list(self._call(self._billing.GetUsageFeed, req).items)
