"""Write the shipped results of rcteach.shipped (rcteach/<name>.json): all, or those named.

Each is a run too costly for its chapter's CPU budget (chapter 10's robustness table, about 20 s;
chapter 12's twelve-layer stable ranks, about 12 s); the chapters read the files, and tests
recompute part of each and compare.

Run: OMP_NUM_THREADS=1 .venv/bin/python scripts/precompute.py [name ...]
"""

import json
import sys

from rcteach import shipped

for name, produce in shipped.producers().items():
    if len(sys.argv) == 1 or name in sys.argv[1:]:
        shipped.path(name).write_text(json.dumps(produce(), indent=1) + "\n", encoding="utf-8")
        print(f"wrote {shipped.path(name)}")
