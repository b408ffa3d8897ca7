"""Time grading a class: N submissions of assignment 1 (a mix of full, partial and blank notebooks).

    OMP_NUM_THREADS=1 .venv/bin/python scripts/bench_grading.py [--students 100] [--jobs 2] [--serial 20]

builds a1 (``python -m rcteach assign``, once, into ``--build``), writes the class in nbgrader's layout
(``submitted/student-NNN/a1_spectral_gap/a1_spectral_gap.ipynb``: a third each the solutions, the
solutions without questions 2 and 3, and the blank student notebook), then times
``python -m rcteach grade submitted/ -j JOBS`` and, on the first ``--serial`` students, ``-j 1``
with ``--replay`` (the same asks), and checks that their rows of ``scores.csv`` agree.  Prints, per
run: wall seconds, CPU seconds of the grading process and everything it started (the sandboxes
included: their supervisor reaps them, so their time reaches the grader as its children's), of
which the sandboxes report the part inside them, CPU per submission, and the 1-minute load average
before and after (on a shared machine, read CPU seconds).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import pathlib
import resource
import subprocess
import sys
import time

import nbformat

from rcteach.tools import grading

NAME = "a1_spectral_gap"


def _build(folder: pathlib.Path) -> dict:
    student, autograder = folder / NAME / "student" / f"{NAME}.ipynb", folder / NAME / "autograder"
    if not (student.is_file() and (autograder / grading.KEY).is_file()):
        grading.assign(grading.ASSIGNMENTS_DIR / NAME / f"{NAME}.ipynb", folder, run_tests=False)
    return {"student": student, "autograder": autograder}


def _class(built: dict, root: pathlib.Path, students: int) -> None:
    full = nbformat.read(built["autograder"] / f"{NAME}.ipynb", as_version=4)
    blank = nbformat.read(built["student"], as_version=4)
    partial = nbformat.read(built["autograder"] / f"{NAME}.ipynb", as_version=4)
    stubs = {c.source.split("(")[0]: c.source for c in blank.cells
             if c.source.startswith(("def swapped_spectrum", "def my_centre"))}
    for cell in partial.cells:
        for start, stub in stubs.items():
            if cell.source.startswith(start):
                cell.source = stub
    for i in range(students):
        path = root / f"student-{i:03d}" / NAME / f"{NAME}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write((full, partial, blank)[i % 3], path)


def _run(argv: list[str], out: pathlib.Path) -> dict:
    load = os.getloadavg()[0]
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run([sys.executable, "-m", "rcteach", "grade", *argv, "-o", str(out)], check=True,
                   stdout=subprocess.DEVNULL, env={**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    reported = [json.loads(p.read_text()).get("cpu_seconds_reported") for p in (out / "results").glob("*.json")]
    return {"wall": wall, "grader_cpu": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
            "sandbox_cpu": sum(r for r in reported if r), "n": len(reported), "load_before": load,
            "load_after": os.getloadavg()[0]}


def _rows(out: pathlib.Path) -> dict:
    with open(out / "scores.csv", newline="") as f:
        return {r["student"]: r for r in csv.DictReader(f)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--serial", type=int, default=20, help="students also graded with -j 1 (0: none)")
    parser.add_argument("--build", default="_build/bench-grading")
    args = parser.parse_args(argv)
    build = pathlib.Path(args.build)
    built = _build(build / "assignments")
    root = build / "submitted"
    _class(built, root, args.students)
    runs = {}
    common = ["-a", str(built["autograder"]), "--timeout", "600"]
    parallel = build / f"results-j{args.jobs}"
    runs[f"-j {args.jobs}"] = _run([str(root), *common, "-j", str(args.jobs)], parallel)
    if args.serial:
        serial = build / "results-j1"
        serial.mkdir(parents=True, exist_ok=True)
        (serial / "scores.csv").write_text((parallel / "scores.csv").read_text())  # the seeds, for --replay
        names = sorted(p.name for p in root.iterdir())[:args.serial]
        runs["-j 1"] = _run([*(str(root / n) for n in names), *common, "-j", "1", "--replay"], serial)
        same = [_rows(serial)[n] == _rows(parallel)[n] for n in names]
        print(f"scores of the {len(names)} students graded both ways agree: {all(same)}")
    scores = [float(r["score"]) for r in _rows(parallel).values()]
    print(f"{args.students} submissions, scores {sorted(set(scores))}")
    for mode, r in runs.items():
        print(f"grade {mode}: {r['n']} submissions in {r['wall']:.0f} s wall ({r['wall'] / r['n']:.1f} s each); CPU: "
              f"{r['grader_cpu']:.0f} s in all, {r['sandbox_cpu']:.0f} s of it inside the sandboxes = "
              f"{r['grader_cpu'] / r['n']:.1f} s per submission; "
              f"load average {r['load_before']:.1f} -> {r['load_after']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
