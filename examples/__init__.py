"""Whole problems solved with gradkern's gradients (`gradkern.examples`, the
folder examples/ of the repository). Each module is a script with a
`main(argv) -> int`: `python -m gradkern demo --list` lists them (name and
the first line of the module's docstring) and `python -m gradkern demo NAME
[--quick] [--out DIR]` runs one; `python examples/NAME.py` runs it too.
See examples/README.md for the convention every example keeps."""
