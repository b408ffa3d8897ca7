"""The chapter collector's kernel start is tried again when a kernel dies at start (conftest.py)."""

import pytest

import conftest


def test_kernel_start_is_retried():
    calls = []

    def flaky(*args, **kwargs):
        calls.append(args)
        if len(calls) < conftest.KERNEL_START_ATTEMPTS:
            raise RuntimeError("Kernel died before replying to kernel_info")
        return "km", "kc"

    assert conftest._retrying(flaky)("python3") == ("km", "kc")
    assert calls == [("python3",)] * conftest.KERNEL_START_ATTEMPTS


def test_kernel_start_gives_up():
    calls = []

    def dead(*args, **kwargs):
        calls.append(1)
        raise RuntimeError("Kernel died before replying to kernel_info")

    with pytest.raises(RuntimeError, match="Kernel died"):
        conftest._retrying(dead)()
    assert len(calls) == conftest.KERNEL_START_ATTEMPTS
