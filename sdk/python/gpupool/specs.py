"""Request messages built from keyword arguments, shared by Client and AsyncClient so the two
send byte-for-byte the same requests. Everything is plain data; nothing here talks to a server.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Mapping, Optional, Sequence, Union

from gpupool.v1 import billing_pb2, jobs_pb2, types_pb2, usage_pb2

Time = Union[str, datetime, None]

TERMINAL_JOB_STATES = frozenset({
    jobs_pb2.JOB_STATE_SUCCEEDED,
    jobs_pb2.JOB_STATE_FAILED,
    jobs_pb2.JOB_STATE_CANCELLED,
})


def is_terminal(job: jobs_pb2.Job) -> bool:
    """Whether the job has ended (it will not change again)."""
    return job.state in TERMINAL_JOB_STATES


def job_spec(*, tenant: str, pool: str, resources: types_pb2.ResourceRequest,
             command: Sequence[str] = (), image: str = "",
             task_count: int = 1, priority_class: str = "", gang: bool = False,
             preemptible: bool = False, max_runtime: Optional[timedelta] = None,
             max_retries: int = 0, env: Optional[Mapping[str, str]] = None,
             secret_env: Optional[Mapping[str, str]] = None,
             labels: Optional[Mapping[str, str]] = None) -> jobs_pb2.JobSpec:
    """A JobSpec for the common fields; build jobs_pb2.JobSpec yourself for the rest (volumes,
    ports, entrypoint…) and pass it to submit_spec. `tenant` is a path ("acme/research/alice")
    within the caller's own; `command` may be empty only with an image."""
    spec = jobs_pb2.JobSpec(tenant=tenant, pool=pool, priority_class=priority_class,
                            task_count=task_count, gang=gang, preemptible=preemptible,
                            max_retries=max_retries, labels=dict(labels or {}))
    if max_runtime is not None:
        spec.max_runtime.FromTimedelta(max_runtime)
    t = spec.template
    t.command.extend(command)
    t.image = image
    t.env.update(env or {})
    t.secret_env.update(secret_env or {})
    t.resources.CopyFrom(resources)
    return spec


def _rfc3339(t: Time) -> str:
    if t is None:
        return ""
    if isinstance(t, str):
        return t
    if t.tzinfo is None:
        raise ValueError(f"{t!r}: give a timezone-aware datetime (the API's times are UTC)")
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def usage_request(*, tenant: str = "", pool: str = "", model: str = "",
                  priority_class: str = "", period: str = "", start: Time = None,
                  end: Time = None, tenant_depth: int = 0,
                  split_preempted: bool = False) -> usage_pb2.GetUsageRequest:
    """GetUsageRequest; `start`/`end` are its `from`/`to` (a Python keyword): RFC 3339 strings or
    aware datetimes, intervals starting in [start, end)."""
    req = usage_pb2.GetUsageRequest(tenant=tenant, pool=pool, model=model,
                                    priority_class=priority_class, period=period,
                                    tenant_depth=tenant_depth, split_preempted=split_preempted)
    setattr(req, "from", _rfc3339(start))
    req.to = _rfc3339(end)
    return req


def _period_fields(req: Union[billing_pb2.ListInvoicesRequest, billing_pb2.GetUsageFeedRequest],
                   start: Optional[datetime], end: Optional[datetime]) -> None:
    for field, value in (("start_time", start), ("end_time", end)):
        if value is None:
            continue
        if value.tzinfo is None:
            raise ValueError(f"{field}: give a timezone-aware datetime")
        getattr(req, field).FromDatetime(value.astimezone(timezone.utc))


def invoices_request(*, tenant: str = "", period: str = "", start: Optional[datetime] = None,
                     end: Optional[datetime] = None) -> billing_pb2.ListInvoicesRequest:
    """ListInvoicesRequest: `period` "2026-11" (a month) or "2026-11-05" (a day), or start/end;
    none of them = the current month."""
    req = billing_pb2.ListInvoicesRequest(tenant=tenant, period=period)
    _period_fields(req, start, end)
    return req


def usage_feed_request(*, tenant: str = "", period: str = "", start: Optional[datetime] = None,
                       end: Optional[datetime] = None) -> billing_pb2.GetUsageFeedRequest:
    req = billing_pb2.GetUsageFeedRequest(tenant=tenant, period=period)
    _period_fields(req, start, end)
    return req
