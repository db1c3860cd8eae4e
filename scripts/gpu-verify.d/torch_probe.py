#!/usr/bin/env python3
"""PyTorch under a gpupool slice (run by interposer_checks.py with libgpupool-cuda preloaded and
PYTORCH_CUDA_ALLOC_CONF chosen by the caller). Each step runs on even if one before it failed:
the slice as PyTorch sees it, a matrix product (cuBLAS), a CUDA graph captured and replayed, then
tensors of 256 MiB until the allocator refuses. Prints one line "RESULT {json}"; "ok" says
whether every step passed and the slice held.
    torch_probe.py GRANT_BYTES
"""
import json
import sys
import time
import traceback

import torch

MIB = 1 << 20


def first_error(e):
    lines = [l for l in str(e).splitlines() if l.strip()]
    return (type(e).__name__ + ": " + (lines[0] if lines else ""))[:200]


def main():
    grant = int(sys.argv[1])
    res = {"torch": torch.__version__}
    errors = {}

    def step(name, fn):
        try:
            fn()
        except Exception as e:  # every step reports; the next one still runs
            errors[name] = first_error(e)
            traceback.print_exc()

    def info():
        free, total = torch.cuda.mem_get_info()
        res["mem_get_info_total_mib"] = total // MIB
        res["total_is_grant"] = total == grant

    def matmul():
        a = torch.randn(4096, 4096, device="cuda")
        torch.cuda.synchronize()
        t0 = time.time()
        for _ in range(20):
            b = a @ a
        torch.cuda.synchronize()
        res["matmul_4096_x20_s"] = round(time.time() - t0, 3)
        del a, b

    def graph():
        x = torch.ones(1 << 20, device="cuda")
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            y = x * 2 + 1
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = x * 2 + 1
        for _ in range(10):
            g.replay()
        torch.cuda.synchronize()
        res["graph_replay_ok"] = bool((y == 3).all().item())

    def fill():
        held = []
        try:
            while len(held) < 4096:
                held.append(torch.empty(256 * MIB, dtype=torch.uint8, device="cuda"))
            res["refused"] = False
        except RuntimeError as e:  # torch.OutOfMemoryError
            res["refused"] = True
            res["refusal"] = first_error(e)
        res["held_mib"] = len(held) * 256
        res["reserved_mib"] = torch.cuda.memory_reserved() // MIB
        del held
        torch.cuda.empty_cache()

    for name, fn in (("info", info), ("matmul", matmul), ("graph", graph), ("fill", fill)):
        step(name, fn)
    res["errors"] = errors
    res["ok"] = bool(not errors and res.get("total_is_grant") and res.get("graph_replay_ok") and
                     res.get("refused") and res.get("held_mib", 0) * MIB <= grant)
    print("RESULT " + json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
