"""Text algorithms, pure: extraction, normalisation, language ID, PII, units (`transform`), near-
duplicate machinery (`dedup`), quality classifiers (`quality`), synthetic-data prompts and checks
(`datagen`), tokenizers and token encoding (`tokens`). Nothing here knows a pipeline or a run folder."""
