"""Latency of one explorer update at default settings (compute, draw, PNG): wall and CPU time.

Run: .venv/bin/python scripts/bench_widgets.py   (the issue asks for <= 200 ms on 2 cores)
"""
import os
import statistics
import time

import matplotlib

matplotlib.use("Agg")
from rcteach import widgets as w  # noqa: E402  (after the backend is chosen)

for name in ["spectrum", "width", "depth", "mask"]:
    e = getattr(w, name + "_explorer")()
    wall, cpu = [], []
    for _ in range(7):
        t, c = time.perf_counter(), time.process_time()
        e.update()
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    print(f"{name:9s} wall median {1000 * statistics.median(wall):5.0f} ms  min {1000 * min(wall):5.0f} ms  "
          f"cpu median {1000 * statistics.median(cpu):5.0f} ms")
print("load", os.getloadavg())
