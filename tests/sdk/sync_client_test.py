"""gpupool.Client against a real gpupoold over TLS (run by run_sdk_tests.py): settings from the
CLI's login file, submit, watch, logs (whole and followed), cancel, list, services, usage and
invoices, and typed errors for bad input, unknown objects and bad credentials."""

import os
import unittest

import grpc

import gpupool
from gpupool.v1 import jobs_pb2, services_pb2, types_pb2, usage_pb2
from sdk_fixture import DATA_DIR, POOL, SERVER, TENANT, WAIT_S, admin_token, shell_job


class SyncClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.client = gpupool.Client()  # nothing given: the login file decides

    @classmethod
    def tearDownClass(cls) -> None:
        cls.client.close()

    def test_settings_are_those_gpupoolctl_login_saved(self) -> None:
        s = self.client.settings
        self.assertEqual(s.server, SERVER)
        self.assertEqual(s.ca, os.path.join(DATA_DIR, "tls", "ca.crt"))
        self.assertTrue(s.tls)
        self.assertEqual(s.token, admin_token())
        self.assertEqual(s.config_path, os.path.join(os.environ["HOME"], ".config/gpupool/config"))
        self.assertNotIn(s.token, repr(s), "the credential never prints")

    def test_submit_watch_to_completion_and_read_logs(self) -> None:
        job = self.client.submit_job(shell_job("echo hello from the sdk; echo bye"))
        self.assertTrue(job.id)
        self.assertEqual(job.spec.tenant, TENANT)
        events = list(self.client.watch_job(job.id, timeout=WAIT_S))
        self.assertGreaterEqual(len(events), 1)
        self.assertEqual(events[0].job.id, job.id)
        self.assertEqual(events[-1].job.state, jobs_pb2.JOB_STATE_SUCCEEDED, events[-1].message)
        self.assertTrue(gpupool.is_terminal(events[-1].job))
        self.assertEqual(self.client.read_task_logs(job.id + ".0"), b"hello from the sdk\nbye\n")
        self.assertEqual(self.client.get_job(job.id).tasks[0].state,
                         jobs_pb2.TASK_STATE_SUCCEEDED)

    def wait_running(self, job_id: str) -> None:
        for event in self.client.watch_job(job_id, timeout=WAIT_S):  # left early: call cancelled
            if event.job.tasks and event.job.tasks[0].state == jobs_pb2.TASK_STATE_RUNNING:
                return
        self.fail(f"job {job_id} never ran")

    def test_follow_logs_while_the_task_runs(self) -> None:
        job = self.client.submit_job(
            shell_job("for i in 1 2 3; do echo line $i; sleep 0.3; done"))
        # Followed from RUNNING on: a task still SCHEDULED is placed but not yet on its node, and
        # gpupoold then ends a followed stream with the node's NOT_FOUND instead of waiting.
        self.wait_running(job.id)
        chunks = list(self.client.task_logs(job.id + ".0", follow=True, timeout=WAIT_S))
        self.assertEqual(b"".join(c.data for c in chunks), b"line 1\nline 2\nline 3\n")
        self.assertTrue(chunks[-1].eof)
        # From an offset: the rest only.
        rest = b"".join(c.data for c in self.client.task_logs(job.id + ".0", offset=7))
        self.assertEqual(rest, b"line 2\nline 3\n")

    def test_cancel_a_running_job(self) -> None:
        job = self.client.submit_job(shell_job("sleep 300"))
        self.wait_running(job.id)
        cancelled = self.client.cancel_job(job.id, reason="sdk test")
        self.assertIn(cancelled.state,
                      (jobs_pb2.JOB_STATE_CANCELLING, jobs_pb2.JOB_STATE_CANCELLED))
        final = self.client.wait_job(job.id, timeout=WAIT_S)
        self.assertEqual(final.state, jobs_pb2.JOB_STATE_CANCELLED)

    def test_list_jobs_follows_pages(self) -> None:
        job = self.client.submit_job(shell_job("true"))
        self.client.wait_job(job.id, timeout=WAIT_S)
        whole = [j.id for j in self.client.list_jobs(tenant=TENANT)]
        paged = [j.id for j in self.client.list_jobs(tenant=TENANT, page_size=1)]
        self.assertIn(job.id, whole)
        self.assertEqual(paged, whole)
        done = [j.id for j in self.client.list_jobs(tenant=TENANT,
                                                    state=jobs_pb2.JOB_STATE_SUCCEEDED)]
        self.assertIn(job.id, done)

    def test_invalid_resources_are_invalid_argument_naming_the_field(self) -> None:
        spec = gpupool.job_spec(tenant=TENANT, pool=POOL, command=["true"],
                                resources=gpupool.fractional(milli_tflops=1000, vram_mib=0))
        with self.assertRaises(gpupool.InvalidArgument) as caught:
            self.client.submit_job(spec)
        e = caught.exception
        self.assertEqual(e.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual(e.field, "spec.template.resources.fractional.vram_mib")
        self.assertIn("must be > 0", e.message)
        self.assertIsInstance(e, gpupool.Rejected)
        self.assertIsInstance(e, gpupool.ApiError)

    def test_unknown_job_is_not_found(self) -> None:
        with self.assertRaises(gpupool.NotFound) as caught:
            self.client.get_job("987654321")
        self.assertEqual(caught.exception.code, grpc.StatusCode.NOT_FOUND)
        with self.assertRaises(gpupool.NotFound):
            list(self.client.watch_job("987654321", timeout=WAIT_S))  # a stream's error too

    def test_a_wrong_key_is_unauthenticated(self) -> None:
        bad_key = "gpk_000000000000_00"
        with gpupool.Client(token=bad_key) as bad:
            self.assertEqual(bad.settings.ca, self.client.settings.ca, "the rest still from file")
            with self.assertRaises(gpupool.Unauthenticated) as caught:
                bad.get_job("1")
        self.assertIsInstance(caught.exception, gpupool.Denied)
        self.assertEqual(caught.exception.code, grpc.StatusCode.UNAUTHENTICATED)
        self.assertNotIn(bad_key, caught.exception.message)

    def test_plaintext_to_the_tls_port_is_unavailable(self) -> None:
        with gpupool.Client(ca="", timeout=5) as plain:
            self.assertFalse(plain.settings.tls)
            with self.assertRaises(gpupool.Unavailable) as caught:
                plain.get_job("1")
        self.assertIsInstance(caught.exception, gpupool.Retryable)

    def test_service_lifecycle(self) -> None:
        template = jobs_pb2.TaskTemplate(command=["/bin/sh", "-c", "sleep 600"],
                                         resources=gpupool.whole_gpus(1),
                                         ports=[jobs_pb2.Port(port=8000)])
        wanted = services_pb2.Service(name="sdk-sync", tenant=TENANT, pool=POOL, template=template,
                                      port=8000, min_replicas=0, max_replicas=1)
        created = self.client.create_service(wanted)
        self.assertEqual(created.generation, 1)
        self.assertTrue(created.id)
        with self.assertRaises(gpupool.AlreadyExists):
            self.client.create_service(wanted)
        self.assertEqual(self.client.get_service(TENANT, "sdk-sync").id, created.id)
        self.assertIn("sdk-sync", [s.name for s in self.client.list_services(tenant=TENANT)])
        wanted.max_replicas = 2
        self.assertEqual(self.client.update_service(wanted).max_replicas, 2)
        self.client.delete_service(TENANT, "sdk-sync")
        with self.assertRaises(gpupool.NotFound):
            self.client.get_service(TENANT, "sdk-sync")

    def test_usage_and_invoices(self) -> None:
        usage = self.client.get_usage(tenant="acme", period="day")
        self.assertIsInstance(usage, usage_pb2.GetUsageResponse)
        # A month long before this cluster existed: one empty invoice for the tenant asked for.
        invoices = self.client.list_invoices(tenant="acme", period="2020-01")
        self.assertEqual([i.tenant for i in invoices], ["acme"])
        self.assertEqual(list(invoices[0].lines), [])
        csv = self.client.export_invoices(tenant="acme", period="2020-01")
        self.assertTrue(csv.content_type.startswith("text/csv"), csv.content_type)
        self.assertEqual(self.client.get_usage_feed(tenant="acme", period="2020-01"), [])
        with self.assertRaises(gpupool.InvalidArgument):
            self.client.get_usage(period="fortnight")

    def test_other_services_through_the_channel(self) -> None:
        # The API's other services: the generated stubs, with the client's channel and metadata.
        from gpupool.v1 import pools_pb2, pools_pb2_grpc
        pools = pools_pb2_grpc.PoolServiceStub(self.client.channel).ListPools(
            pools_pb2.ListPoolsRequest(), metadata=self.client.metadata, timeout=WAIT_S)
        self.assertIn(POOL, [p.name for p in pools.pools])
        self.assertIsInstance(gpupool.whole_gpus(1), types_pb2.ResourceRequest)


if __name__ == "__main__":
    unittest.main()
