#!/usr/bin/env python3
"""PyTorch under a gpupool slice (run by interposer_checks.py with libgpupool-cuda preloaded and
PYTORCH_CUDA_ALLOC_CONF chosen by the caller): the slice as PyTorch sees it, a CUDA graph
captured and replayed, a matrix product, then tensors of 256 MiB until the allocator refuses.
Prints one line "RESULT {json}"; "ok" says whether the slice held.
    torch_probe.py GRANT_BYTES
"""
import json
import sys
import time

import torch

MIB = 1 << 20


def main():
    grant = int(sys.argv[1])
    res = {"torch": torch.__version__, "ok": False}
    free, total = torch.cuda.mem_get_info()
    res["mem_get_info_total_mib"] = total // MIB
    res["total_is_grant"] = total == grant

    # A graph captured on a side stream and replayed (graph launches go through the hooks).
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

    a = torch.randn(4096, 4096, device="cuda")
    torch.cuda.synchronize()
    t0 = time.time()
    for _ in range(20):
        b = a @ a
    torch.cuda.synchronize()
    res["matmul_4096_x20_s"] = round(time.time() - t0, 3)
    del a, b, x, y, g

    held = []
    try:
        while len(held) < 4096:
            held.append(torch.empty(256 * MIB, dtype=torch.uint8, device="cuda"))
        res["refused"] = False
    except RuntimeError as e:  # torch.OutOfMemoryError
        res["refused"] = True
        res["refusal"] = str(e).splitlines()[0][:160]
    res["held_mib"] = len(held) * 256
    res["reserved_mib"] = torch.cuda.memory_reserved() // MIB
    del held
    torch.cuda.empty_cache()
    res["ok"] = bool(res["total_is_grant"] and res["graph_replay_ok"] and res["refused"] and
                     res["held_mib"] * MIB <= grant)
    print("RESULT " + json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
