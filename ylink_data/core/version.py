"""The package's version, in a module of its own so that run.json, reports and `ylink --version` read
it without importing the package's public API (which imports the engine)."""
__version__ = "0.1.0"
