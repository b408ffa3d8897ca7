"""Unit tests for rcteach.device: default device, dtype defaults, generators."""

import pytest
import torch

from rcteach import default_device, gaussian_tokens, random_attention
from rcteach.device import DEVICE_ENV, make_generator, resolve


def test_env_name():
    assert DEVICE_ENV == "RCTEACH_DEVICE"


def test_default_device_without_env(monkeypatch):
    monkeypatch.delenv(DEVICE_ENV, raising=False)
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert default_device() == torch.device(expected)


def test_default_device_blank_env_is_ignored(monkeypatch):
    monkeypatch.setenv(DEVICE_ENV, "   ")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert default_device() == torch.device(expected)


@pytest.mark.parametrize("name, expected", [("cpu", "cpu"), (" cpu ", "cpu"), ("meta", "meta")])
def test_default_device_from_env(monkeypatch, name, expected):
    monkeypatch.setenv(DEVICE_ENV, name)
    assert default_device() == torch.device(expected)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
@pytest.mark.parametrize("name", ["cuda", "cuda:1"])
def test_cuda_without_cuda_is_a_clear_error(monkeypatch, name):
    monkeypatch.setenv(DEVICE_ENV, name)
    with pytest.raises(ValueError, match=f"{DEVICE_ENV}=.*CUDA is not available"):
        gaussian_tokens(4, 4, seed=0)
    monkeypatch.delenv(DEVICE_ENV)
    with pytest.raises(ValueError, match="device=.*CUDA is not available"):
        random_attention(4, device=name)


def test_invalid_env_raises_value_error_naming_the_variable(monkeypatch):
    monkeypatch.setenv(DEVICE_ENV, "not-a-device")
    with pytest.raises(ValueError, match=DEVICE_ENV):
        default_device()
    with pytest.raises(ValueError, match=DEVICE_ENV):
        resolve()
    with pytest.raises(ValueError, match=DEVICE_ENV):
        gaussian_tokens(4, 4, seed=0)


def test_env_is_used_by_random_functions(cpu_env):
    X = gaussian_tokens(4, 3, seed=0)
    A = random_attention(4, seed=0)
    for t in (X, A):
        assert t.device == torch.device("cpu")
        assert t.dtype == torch.float64


def test_resolve_defaults_on_cpu(cpu_env):
    assert resolve() == (torch.device("cpu"), torch.float64)
    assert resolve("cpu") == (torch.device("cpu"), torch.float64)
    assert resolve(torch.device("cpu")) == (torch.device("cpu"), torch.float64)


def test_resolve_default_dtype_off_cpu_is_float32():
    # The meta device needs no hardware: it shows the "float32 elsewhere" rule.
    assert resolve("meta") == (torch.device("meta"), torch.float32)
    assert resolve("meta", torch.float64) == (torch.device("meta"), torch.float64)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_resolve_explicit_dtype(dtype):
    assert resolve("cpu", dtype) == (torch.device("cpu"), dtype)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int64, torch.complex128, "float64"])
def test_resolve_rejects_other_dtypes(dtype):
    with pytest.raises(TypeError, match="dtype"):
        resolve("cpu", dtype)


def test_resolve_rejects_bad_devices():
    with pytest.raises(ValueError, match="device"):
        resolve("nonsense")
    with pytest.raises(TypeError, match="device"):
        resolve(1.5)


def test_make_generator_seed_is_reproducible():
    a = torch.randn(5, generator=make_generator(seed=3, device="cpu"), dtype=torch.float64)
    b = torch.randn(5, generator=make_generator(seed=3, device="cpu"), dtype=torch.float64)
    c = torch.randn(5, generator=make_generator(seed=4, device="cpu"), dtype=torch.float64)
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


def test_make_generator_matches_manual_seed():
    gen = make_generator(seed=11, device="cpu")
    assert gen.initial_seed() == 11
    assert gen.device == torch.device("cpu")


def test_make_generator_returns_given_generator():
    gen = torch.Generator().manual_seed(0)
    assert make_generator(generator=gen) is gen


def test_make_generator_without_seed_is_nondeterministic():
    a = torch.randn(8, generator=make_generator(device="cpu"))
    b = torch.randn(8, generator=make_generator(device="cpu"))
    assert not torch.equal(a, b)


def test_make_generator_errors():
    with pytest.raises(ValueError, match="seed or generator"):
        make_generator(seed=0, generator=torch.Generator())
    with pytest.raises(TypeError, match="generator"):
        make_generator(generator=42)
    with pytest.raises(ValueError, match="seed"):
        make_generator(seed=-1, device="cpu")
    with pytest.raises(TypeError, match="seed"):
        make_generator(seed=1.5, device="cpu")
    with pytest.raises(TypeError, match="seed"):
        make_generator(seed=True, device="cpu")


@pytest.mark.gpu
def test_cuda_defaults():
    assert resolve("cuda") == (torch.device("cuda"), torch.float32)
    gen = make_generator(seed=0, device="cuda")
    assert gen.device.type == "cuda"
    X = gaussian_tokens(4, 3, seed=0, device="cuda")
    assert X.device.type == "cuda" and X.dtype == torch.float32


@pytest.mark.gpu
def test_env_selects_cuda(monkeypatch):
    monkeypatch.setenv(DEVICE_ENV, "cuda")
    A = random_attention(8, seed=0)
    assert A.device.type == "cuda" and A.dtype == torch.float32
    assert torch.equal(A, random_attention(8, seed=0))
