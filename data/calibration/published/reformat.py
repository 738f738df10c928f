#!/usr/bin/env python3
"""Rewrites the published all-reduce bus bandwidths (data/published/nccl-allreduce-8gpu-published.csv)
in nccl-tests' log format, so that `dtsim fit --nccl-tests` can read them. Nothing is measured here:
time and algbw are derived from the published busbw (algbw = busbw / (2(n-1)/n), time = size / algbw),
the out-of-place columns and #wrong are N/A (the source published in-place figures only), and the
rank lines only say what the source says (8 GPUs of one node; no pids or bus ids).
Usage: python3 data/calibration/published/reformat.py   (from the repository root)"""
import csv

SRC = "data/published/nccl-allreduce-8gpu-published.csv"
SYSTEMS = {
    "azure-nd-h100-v5": ("NVIDIA H100 80GB HBM3", "all_reduce_perf-h100-nvls.log",
                         "Azure/AI-benchmarking-guide, Azure Results/ND_H100_v5_results.md (8x H100 80GB HBM3, NCCL 2.18.5, CUDA 12.6, NVLS forced)"),
    "azure-nd-a100-v4": ("NVIDIA A100-SXM4-80GB", "all_reduce_perf-a100.log",
                         "Azure/AI-benchmarking-guide, Azure_Results/ND_A100_v4_results.md (8x A100-SXM4-80GB, NCCL 2.18.5, CUDA 12.5, NCCL's default algorithm)"),
}

rows = [r for r in csv.DictReader(l for l in open(SRC) if not l.startswith("#"))]
for system, (gpu, out, source) in SYSTEMS.items():
    mine = [r for r in rows if r["system"] == system]
    n = int(mine[0]["gpus"])
    factor = 2 * (n - 1) / n
    with open("data/calibration/published/" + out, "w") as f:
        f.write("# REFORMATTED PUBLISHED FIGURES, not a run of nccl-tests: " + SRC + " rewritten in nccl-tests' log format\n")
        f.write("# by data/calibration/published/reformat.py. Source: " + source + ".\n")
        f.write("# busbw is as published; algbw = busbw / (2(n-1)/n) and time = size / algbw are derived from it (the published\n")
        f.write("# busbw has two decimals, so small-size times carry that rounding); count assumes nccl-tests' default type float;\n")
        f.write("# out-of-place figures and #wrong were not published (N/A); rank lines carry no pids or bus ids (N/A).\n")
        f.write("# Collective test starting: all_reduce_perf\n")
        f.write("#\n# Using devices\n")
        for rank in range(n):
            f.write("#  Rank %2d Group  0 Pid    N/A on %s device %2d [N/A] %s\n" % (rank, system, rank, gpu))
        f.write("#\n")
        f.write("#                                                              out-of-place                       in-place          \n")
        f.write("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n")
        f.write("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       \n")
        total = 0.0
        for r in mine:
            size = int(r["bytes"])
            busbw = float(r["busbw_GBps"])
            algbw = busbw / factor
            time_us = size / (algbw * 1e9) * 1e6
            total += busbw
            f.write("%12d  %12d  %8s  %6s  %6d  %7s %7s %7s %6s  %7.2f %7.2f %7.2f %6s\n"
                    % (size, size // 4, "float", "sum", -1, "N/A", "N/A", "N/A", "N/A", time_us, algbw, busbw, "N/A"))
        f.write("# Out of bounds values : N/A\n")
        f.write("# Avg bus bandwidth    : %.4f \n" % (total / len(mine)))
        f.write("#\n")
