"""The interop tests' shared fixtures (tests/support/interop_cases.py): `path` (both ways torch registers an
operation), `x64` and `x32` (JAX's float width)."""

from support.interop_cases import path, x32, x64  # noqa: F401
