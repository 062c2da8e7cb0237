"""Calling models: the `llm:` block (config), the client (client), the response cache (cache) and
the usage counters (usage) that every op asking an OpenAI-compatible server goes through (op)."""
