"""AsyncClient: the asyncio client of gpupoold's gRPC API (grpc.aio), method for method the same
as gpupool.Client, with the same settings, requests (gpupool.specs) and exceptions.

    async with gpupool.aio.AsyncClient() as c:
        job = await c.submit_job(spec)
        async for event in c.watch_job(job.id):
            print(event.message)

Make it inside a running event loop (grpc.aio binds its channel to the loop it was made in).
Streams are async generators: leaving one early cancels its call when the generator is closed;
`contextlib.aclosing(c.watch_job(...))` closes it at once rather than when collected.

Thread safety: use it from its event loop's thread only.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, AsyncIterator, Callable, List, Optional

import grpc
import grpc.aio

from gpupool import specs
from gpupool._channel import call_metadata, open_aio_channel
from gpupool.errors import ApiError, from_rpc_error
from gpupool.settings import load_settings
from gpupool.v1 import (billing_pb2, billing_pb2_grpc, jobs_pb2, jobs_pb2_grpc, services_pb2,
                        services_pb2_grpc, usage_pb2, usage_pb2_grpc)


class AsyncClient:
    def __init__(self, server: Optional[str] = None, *, token: Optional[str] = None,
                 ca: Optional[str] = None, timeout: Optional[float] = 30.0,
                 config_path: Optional[str] = None) -> None:
        """As gpupool.Client: arguments left None come from the environment, then the login
        file."""
        self.settings = load_settings(server, token=token, ca=ca, config_path=config_path)
        self.timeout = timeout
        self.metadata = call_metadata(self.settings)
        self.channel: grpc.aio.Channel = open_aio_channel(self.settings)
        self._jobs = jobs_pb2_grpc.JobServiceStub(self.channel)
        self._services = services_pb2_grpc.ServiceServiceStub(self.channel)
        self._usage = usage_pb2_grpc.UsageServiceStub(self.channel)
        self._billing = billing_pb2_grpc.BillingServiceStub(self.channel)

    async def close(self) -> None:
        await self.channel.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---- calls: the one place grpc errors become ApiError ----

    def _error(self, e: grpc.RpcError) -> ApiError:
        return from_rpc_error(e, self.settings.server, self.settings.tls)

    async def _call(self, method: Callable[..., Any], request: Any) -> Any:
        try:
            return await method(request, metadata=self.metadata, timeout=self.timeout)
        except grpc.RpcError as e:
            raise self._error(e) from e

    async def _stream(self, method: Callable[..., Any], request: Any,
                      timeout: Optional[float]) -> AsyncIterator[Any]:
        call = method(request, metadata=self.metadata, timeout=timeout)
        try:
            async for item in call:
                yield item
        except grpc.RpcError as e:
            raise self._error(e) from e
        finally:
            call.cancel()

    # ---- jobs ----

    async def submit_job(self, spec: jobs_pb2.JobSpec, *,
                         idempotency_key: str = "") -> jobs_pb2.Job:
        req = jobs_pb2.SubmitJobRequest(spec=spec, idempotency_key=idempotency_key)
        return (await self._call(self._jobs.SubmitJob, req)).job

    async def get_job(self, job_id: str) -> jobs_pb2.Job:
        return await self._call(self._jobs.GetJob, jobs_pb2.GetJobRequest(job_id=job_id))

    async def list_jobs(self, *, tenant: str = "", pool: str = "",
                        state: jobs_pb2.JobState = jobs_pb2.JOB_STATE_UNSPECIFIED,
                        page_size: int = 0) -> AsyncIterator[jobs_pb2.Job]:
        req = jobs_pb2.ListJobsRequest(tenant=tenant, pool=pool, state=state, page_size=page_size)
        while True:
            resp = await self._call(self._jobs.ListJobs, req)
            for job in resp.jobs:
                yield job
            if not resp.next_page_token:
                return
            req.page_token = resp.next_page_token

    async def cancel_job(self, job_id: str, reason: str = "") -> jobs_pb2.Job:
        return await self._call(self._jobs.CancelJob,
                                jobs_pb2.CancelJobRequest(job_id=job_id, reason=reason))

    def watch_job(self, job_id: str, *,
                  timeout: Optional[float] = None) -> AsyncIterator[jobs_pb2.JobEvent]:
        return self._stream(self._jobs.WatchJob, jobs_pb2.WatchJobRequest(job_id=job_id), timeout)

    async def wait_job(self, job_id: str, *, timeout: Optional[float] = None) -> jobs_pb2.Job:
        last: Optional[jobs_pb2.Job] = None
        async for event in self.watch_job(job_id, timeout=timeout):
            last = event.job
        if last is not None and specs.is_terminal(last):
            return last
        return await self.get_job(job_id)

    def task_logs(self, task_id: str, *, offset: int = 0, follow: bool = False,
                  timeout: Optional[float] = None) -> AsyncIterator[jobs_pb2.TaskLogChunk]:
        req = jobs_pb2.GetTaskLogsRequest(task_id=task_id, offset=offset, follow=follow)
        return self._stream(self._jobs.GetTaskLogs, req, timeout)

    async def read_task_logs(self, task_id: str, *, follow: bool = False,
                             timeout: Optional[float] = None) -> bytes:
        return b"".join([c.data async for c in self.task_logs(task_id, follow=follow,
                                                               timeout=timeout)])

    # ---- services ----

    async def create_service(self, service: services_pb2.Service) -> services_pb2.Service:
        return await self._call(self._services.CreateService,
                                services_pb2.CreateServiceRequest(service=service))

    async def get_service(self, tenant: str, name: str) -> services_pb2.Service:
        return await self._call(self._services.GetService,
                                services_pb2.GetServiceRequest(tenant=tenant, name=name))

    async def list_services(self, tenant: str = "") -> List[services_pb2.Service]:
        resp = await self._call(self._services.ListServices,
                                services_pb2.ListServicesRequest(tenant=tenant))
        return list(resp.services)

    async def update_service(self, service: services_pb2.Service) -> services_pb2.Service:
        return await self._call(self._services.UpdateService,
                                services_pb2.UpdateServiceRequest(service=service))

    async def rollback_service(self, tenant: str, name: str) -> services_pb2.Service:
        return await self._call(self._services.RollbackService,
                                services_pb2.RollbackServiceRequest(tenant=tenant, name=name))

    async def delete_service(self, tenant: str, name: str) -> None:
        await self._call(self._services.DeleteService,
                         services_pb2.DeleteServiceRequest(tenant=tenant, name=name))

    # ---- usage and billing ----

    async def get_usage(self, *, tenant: str = "", pool: str = "", model: str = "",
                        priority_class: str = "", period: str = "", start: specs.Time = None,
                        end: specs.Time = None, tenant_depth: int = 0,
                        split_preempted: bool = False) -> usage_pb2.GetUsageResponse:
        req = specs.usage_request(tenant=tenant, pool=pool, model=model,
                                  priority_class=priority_class, period=period, start=start,
                                  end=end, tenant_depth=tenant_depth,
                                  split_preempted=split_preempted)
        return await self._call(self._usage.GetUsage, req)

    async def list_invoices(self, *, tenant: str = "", period: str = "",
                            start: Optional[datetime] = None,
                            end: Optional[datetime] = None) -> List[billing_pb2.Invoice]:
        req = specs.invoices_request(tenant=tenant, period=period, start=start, end=end)
        return list((await self._call(self._billing.ListInvoices, req)).invoices)

    async def export_invoices(self, *, tenant: str = "", period: str = "",
                              start: Optional[datetime] = None,
                              end: Optional[datetime] = None) -> billing_pb2.ExportResponse:
        req = specs.invoices_request(tenant=tenant, period=period, start=start, end=end)
        return await self._call(self._billing.ExportInvoices, req)

    async def get_usage_feed(self, *, tenant: str = "", period: str = "",
                             start: Optional[datetime] = None,
                             end: Optional[datetime] = None) -> List[billing_pb2.UsageFeedItem]:
        req = specs.usage_feed_request(tenant=tenant, period=period, start=start, end=end)
        return list((await self._call(self._billing.GetUsageFeed, req)).items)
