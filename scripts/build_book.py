"""Build the book as ``jupyter-book build`` does, executing the chapters in parallel processes.

    python scripts/build_book.py [--jobs N] PATH [jupyter-book build options]

Jupyter Book 1's command line has no ``-j``, but its Sphinx runner takes ``jobs``: Sphinx then reads
(and so executes) the chapters in up to N forked processes and merges what they found; pages are
written in parallel too.  Sphinx would hand each process a fixed chunk of about len(chapters) / N
chapters; the chapters differ fourfold in cost, so here each chapter is a chunk of its own and the
next one starts as soon as a process is free (a work queue).  Every chapter kernel keeps one BLAS
thread (``OMP_NUM_THREADS=1``).  ``book/_ext/parallel_read.py`` declares the two extensions Jupyter
Book loads that do not declare themselves safe for parallel reading.

``--jobs`` defaults to ``RCTEACH_BOOK_JOBS``, else the number of CPUs (at least 2).
"""

import argparse
import functools
import os
import sys


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], add_help=False)
    default_jobs = os.environ.get("RCTEACH_BOOK_JOBS") or max(2, os.cpu_count() or 1)
    parser.add_argument("--jobs", type=int, default=int(default_jobs))
    args, rest = parser.parse_known_args(argv)
    if args.jobs < 1:
        raise SystemExit(f"--jobs must be a positive integer, got {args.jobs}")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")
    import jupyter_book.cli.main
    import jupyter_book.sphinx
    import sphinx.builders

    sphinx.builders.make_chunks = _one_chapter_per_chunk

    # jupyter_book.cli.main imports build_sphinx from jupyter_book.sphinx when it builds
    jupyter_book.sphinx.build_sphinx = functools.partial(jupyter_book.sphinx.build_sphinx, jobs=args.jobs)
    try:
        jupyter_book.cli.main.main(["build", *rest], standalone_mode=False)
    except Exception as error:
        _print_worker_traceback(error)
        raise


def _one_chapter_per_chunk(docnames, nproc, maxbatch=10):
    """In place of Sphinx's ``make_chunks``: every document a chunk of its own."""
    return [[docname] for docname in docnames]


def _print_worker_traceback(error: BaseException) -> None:
    """A chapter that fails in a reading process reaches the main process as a SphinxParallelError that
    prints only the chapter's name; its traceback (the failing cell and its error) is in its
    ``traceback`` attribute: print it, as a serial build would."""
    from sphinx.errors import SphinxParallelError

    while error is not None:
        if isinstance(error, SphinxParallelError):
            print(error.traceback, file=sys.stderr)
            return
        error = error.__cause__ or error.__context__


if __name__ == "__main__":
    main(sys.argv[1:])
