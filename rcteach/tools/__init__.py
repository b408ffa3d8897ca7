"""Tools around the kit: the command line, benchmarks, student copies and course grading.

They use the concepts of :mod:`rcteach` and add none of their own:

* :mod:`rcteach.tools.cli`: ``python -m rcteach`` (check, bench, sweep, notebooks, student-copy, assign, grade);
* :mod:`rcteach.tools.bench`: rcteach against the bare torch kernels, and the authors' grid side by side;
  :mod:`rcteach.tools.bench_threads`: ``check`` with default threads against pinned;
* :mod:`rcteach.tools.notebooks`: the chapters shipped with the package, as clean notebooks;
* :mod:`rcteach.tools.student`: chapters without their solutions;
* :mod:`rcteach.tools.grading`: Otter Assign masters built, submissions graded in a sandbox.
"""
