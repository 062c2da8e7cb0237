"""Files and formats: paths through fsspec, readers per input format, writers, child processes."""
