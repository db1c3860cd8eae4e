"""gpupool.errors without a server: every status code's class, its group, and the field an
INVALID_ARGUMENT message names."""

import unittest

import grpc

from gpupool import errors


class ErrorsTest(unittest.TestCase):
    def test_each_code_has_its_class_and_group(self) -> None:
        table = [
            (grpc.StatusCode.INVALID_ARGUMENT, errors.InvalidArgument, errors.Rejected),
            (grpc.StatusCode.FAILED_PRECONDITION, errors.FailedPrecondition, errors.Rejected),
            (grpc.StatusCode.OUT_OF_RANGE, errors.OutOfRange, errors.Rejected),
            (grpc.StatusCode.RESOURCE_EXHAUSTED, errors.ResourceExhausted, errors.Rejected),
            (grpc.StatusCode.PERMISSION_DENIED, errors.PermissionDenied, errors.Denied),
            (grpc.StatusCode.UNAUTHENTICATED, errors.Unauthenticated, errors.Denied),
            (grpc.StatusCode.UNAVAILABLE, errors.Unavailable, errors.Retryable),
            (grpc.StatusCode.DEADLINE_EXCEEDED, errors.DeadlineExceeded, errors.Retryable),
            (grpc.StatusCode.ABORTED, errors.Aborted, errors.Retryable),
            (grpc.StatusCode.NOT_FOUND, errors.NotFound, errors.ApiError),
            (grpc.StatusCode.ALREADY_EXISTS, errors.AlreadyExists, errors.ApiError),
            (grpc.StatusCode.INTERNAL, errors.Internal, errors.ApiError),
            (grpc.StatusCode.UNKNOWN, errors.Unknown, errors.ApiError),
        ]
        for code, cls, group in table:
            e = errors.error_for(code, "m")
            self.assertIs(type(e), cls, code)
            self.assertIsInstance(e, group)
            self.assertIsInstance(e, errors.GpupoolError)
            self.assertEqual((e.code, e.message, str(e)), (code, "m", f"{code.name}: m"))

    def test_the_field_an_invalid_argument_names(self) -> None:
        cases = {
            "spec.task_count: must be between 1 and 10000, got 0": "spec.task_count",
            "spec.template.volumes[2].mount_path: '/' is not allowed":
                "spec.template.volumes[2].mount_path",
            "period: 'x' is not one of hour, day, month": "period",
            "request: the message is not a valid gpupool.v1.SubmitJobRequest": "request",
            "pool 'gpu-a': not found": "",
            "": "",
        }
        for message, field in cases.items():
            e = errors.error_for(grpc.StatusCode.INVALID_ARGUMENT, message)
            self.assertEqual(e.field, field, message)

    def test_a_standby_names_the_leader(self) -> None:
        e = errors.error_for(grpc.StatusCode.UNAVAILABLE, "not the leader",
                             (("gpupool-leader", "10.0.0.2:7070"),))
        self.assertEqual(e.leader, "10.0.0.2:7070")
        self.assertEqual(errors.error_for(grpc.StatusCode.UNAVAILABLE, "x").leader, "")


if __name__ == "__main__":
    unittest.main()
