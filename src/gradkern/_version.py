"""The package version, on the ground floor: any module may import it without
importing the rest of gradkern (`gradkern/__init__.py` imports everything)."""

__version__ = "0.1.0"
