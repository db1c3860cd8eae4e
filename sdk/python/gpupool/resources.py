"""What one task needs (types.proto's ResourceRequest), one helper per shape.

Quantities are the API's exact integers: compute in milli-TFLOPS, memory in MiB (DESIGN:
capacity arithmetic is integer). `cpu_milli` and `memory_mib` are the host CPU (milli-cores)
and host memory a task needs beside its GPUs; 0 = none.

    whole_gpus(1)                                   # one whole GPU, any model
    whole_gpus(2, models=["H100-SXM"])
    fractional(milli_tflops=50_000, vram_mib=20 * 1024)   # 50 TFLOPS and 20 GiB of one device
    mig("1g.10gb")
    sku("small")                                    # a shape from the server's SKU table

The server checks every value and answers InvalidArgument naming the field
(`spec.template.resources.fractional.vram_mib: must be > 0, got 0`); nothing is checked here,
so the SDK never disagrees with the server.
"""

from __future__ import annotations

from typing import Iterable

from gpupool.v1 import types_pb2

ResourceRequest = types_pb2.ResourceRequest


def fractional(milli_tflops: int, vram_mib: int, *, cpu_milli: int = 0,
               memory_mib: int = 0) -> ResourceRequest:
    """A share of one device."""
    return ResourceRequest(
        fractional=types_pb2.FractionalRequest(milli_tflops=milli_tflops, vram_mib=vram_mib),
        cpu_milli=cpu_milli, memory_mib=memory_mib)


def whole_gpus(count: int, *, models: Iterable[str] = (), cpu_milli: int = 0,
               memory_mib: int = 0) -> ResourceRequest:
    """Whole devices on one node; `models` limits them to these catalog models."""
    return ResourceRequest(whole_gpus=types_pb2.WholeGpuRequest(count=count, models=list(models)),
                           cpu_milli=cpu_milli, memory_mib=memory_mib)


def mig(profile: str, *, cpu_milli: int = 0, memory_mib: int = 0) -> ResourceRequest:
    """One MIG instance of a profile such as "1g.10gb"."""
    return ResourceRequest(mig=types_pb2.MigRequest(profile=profile), cpu_milli=cpu_milli,
                           memory_mib=memory_mib)


def sku(name: str, *, cpu_milli: int = 0, memory_mib: int = 0) -> ResourceRequest:
    """A named request shape from the server's SKU table."""
    return ResourceRequest(sku=types_pb2.SkuRequest(name=name), cpu_milli=cpu_milli,
                           memory_mib=memory_mib)
