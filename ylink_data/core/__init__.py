"""Core: what every layer may use. Errors, credential redaction, the document schema, time limits,
child processes that work on untrusted input (`deadline`, `pipes`), YAML loading, package paths."""
