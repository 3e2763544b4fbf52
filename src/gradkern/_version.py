"""The version, on the ground floor: anything may import it."""

__version__ = "0.1.0"
