"""gpupool.v1: the API's messages and service stubs, generated from api/gpupool/v1/*.proto.

Nothing else lives here: setup.py's build step runs protoc into this package when the SDK is
built, so `gpupool.v1.jobs_pb2` (messages, with .pyi type stubs) and `gpupool.v1.jobs_pb2_grpc`
(stubs) always match the .proto files of the tree the SDK was built from.
"""
