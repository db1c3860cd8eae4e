"""gpupool.aio.AsyncClient against a real gpupoold over TLS (run by run_sdk_tests.py): the same
settings, calls and exceptions as the blocking client, on grpc.aio."""

import asyncio
import contextlib
import unittest

import grpc

import gpupool
from gpupool.v1 import jobs_pb2, services_pb2
from sdk_fixture import POOL, SERVER, TENANT, WAIT_S, shell_job


class AsyncClientTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self) -> None:
        self.client = gpupool.AsyncClient()  # made in the test's event loop, as grpc.aio needs

    async def asyncTearDown(self) -> None:
        await self.client.close()

    async def test_submit_watch_logs_and_cancel(self) -> None:
        self.assertEqual(self.client.settings.server, SERVER)
        self.assertTrue(self.client.settings.tls)
        done = await self.client.submit_job(shell_job("echo async says hi"))
        running = await self.client.submit_job(shell_job("sleep 300"))

        states = [e.job.state async for e in self.client.watch_job(done.id, timeout=WAIT_S)]
        self.assertEqual(states[-1], jobs_pb2.JOB_STATE_SUCCEEDED)
        self.assertEqual(await self.client.read_task_logs(done.id + ".0"), b"async says hi\n")
        followed = [c async for c in self.client.task_logs(done.id + ".0", follow=True,
                                                             timeout=WAIT_S)]
        self.assertTrue(followed[-1].eof)

        async with contextlib.aclosing(self.client.watch_job(running.id, timeout=WAIT_S)) as w:
            async for event in w:
                if event.job.tasks and event.job.tasks[0].state == jobs_pb2.TASK_STATE_RUNNING:
                    break
            else:
                self.fail("the job never ran")
        await self.client.cancel_job(running.id, reason="async sdk test")
        final = await asyncio.wait_for(self.client.wait_job(running.id), WAIT_S)
        self.assertEqual(final.state, jobs_pb2.JOB_STATE_CANCELLED)

        ids = [j.id async for j in self.client.list_jobs(tenant=TENANT, page_size=1)]
        self.assertIn(done.id, ids)
        self.assertIn(running.id, ids)

    async def test_errors_are_typed(self) -> None:
        spec = gpupool.job_spec(tenant=TENANT, pool=POOL, command=["true"],
                                resources=gpupool.whole_gpus(0))
        with self.assertRaises(gpupool.InvalidArgument) as caught:
            await self.client.submit_job(spec)
        self.assertEqual(caught.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual(caught.exception.field, "spec.template.resources.whole_gpus.count")
        with self.assertRaises(gpupool.NotFound):
            await self.client.get_job("987654321")
        with self.assertRaises(gpupool.NotFound):
            async for _ in self.client.task_logs("987654321.0", timeout=WAIT_S):
                pass
        async with gpupool.AsyncClient(token="not-a-key") as bad:
            with self.assertRaises(gpupool.Unauthenticated):
                await bad.list_services()

    async def test_services_and_usage(self) -> None:
        service = services_pb2.Service(
            name="sdk-async", tenant=TENANT, pool=POOL, port=8000, min_replicas=0,
            max_replicas=1,
            template=jobs_pb2.TaskTemplate(command=["/bin/sh", "-c", "sleep 600"],
                                           resources=gpupool.whole_gpus(1),
                                           ports=[jobs_pb2.Port(port=8000)]))
        created = await self.client.create_service(service)
        self.assertEqual((await self.client.get_service(TENANT, "sdk-async")).id, created.id)
        self.assertIn("sdk-async", [s.name for s in await self.client.list_services(TENANT)])
        await self.client.delete_service(TENANT, "sdk-async")
        with self.assertRaises(gpupool.NotFound):
            await self.client.get_service(TENANT, "sdk-async")
        usage = await self.client.get_usage(tenant="acme", period="month")
        self.assertGreaterEqual(usage.totals.intervals, 0)
        invoices = await self.client.list_invoices(tenant="acme", period="2020-01")
        self.assertEqual([i.tenant for i in invoices], ["acme"])


if __name__ == "__main__":
    unittest.main()
