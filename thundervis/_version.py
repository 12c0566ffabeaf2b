"""The version of thundervis (its own module: the writer stamps it without importing the package)."""
__version__ = "0.1.0"
