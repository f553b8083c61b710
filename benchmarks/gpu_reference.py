#!/usr/bin/env python3
"""Times, through PyTorch, the GEMMs and copies hetrl-profile measures on a CUDA device, so that
the profile's rates can be set beside another program's on the same GPU (scripts/gpu-check).

GEMM: tokens x width times width x width in bf16 (the profile's shapes), 2 * tokens * width^2
FLOP. Copy: a 1 GiB buffer copied on the device, counting the bytes read and written (as the
profile does). Each point: the median of 20 timings by CUDA events after 3 warm-ups, each timing
as many operations as last about 2 ms. Writes CSV to stdout.
"""
import statistics
import sys

import torch


def median_seconds(op, repeats=20):
    for _ in range(3):
        op()
    torch.cuda.synchronize()
    # Operations per timing: enough that one timing lasts about 2 ms.
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    op()
    end.record()
    end.synchronize()
    once = max(start.elapsed_time(end) / 1e3, 1e-7)
    per_timing = max(1, int(2e-3 / once))
    times = []
    for _ in range(repeats):
        start.record()
        for _ in range(per_timing):
            op()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / per_timing)
    return statistics.median(times)


def main():
    if not torch.cuda.is_available():
        print("gpu_reference: no CUDA device", file=sys.stderr)
        return 2
    device = torch.device("cuda")
    print(f"# {torch.cuda.get_device_name(device)}, torch {torch.__version__}, CUDA {torch.version.cuda}")
    print("op,tokens,width,bytes,seconds,tflops,gb_per_s")
    for width in (1024, 4096, 8192):
        weight = torch.randn(width, width, device=device, dtype=torch.bfloat16)
        for tokens in (1, 16, 256, 1024, 2048, 4096, 8192):
            x = torch.randn(tokens, width, device=device, dtype=torch.bfloat16)
            s = median_seconds(lambda: torch.matmul(x, weight))
            print(f"gemm,{tokens},{width},,{s:.9f},{2 * tokens * width * width / s / 1e12:.2f},")
    size = 1 << 30
    src = torch.empty(size, dtype=torch.uint8, device=device).random_()
    dst = torch.empty_like(src)
    s = median_seconds(lambda: dst.copy_(src))
    print(f"copy,,,{size},{s:.9f},,{2 * size / s / 1e9:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
