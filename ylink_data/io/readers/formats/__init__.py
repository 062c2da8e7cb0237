"""One module per input format family, each registering its `Reader` (registry.py): the module
`load_readers` imports to learn every format. Parsers live beside this package (`../warc.py`,
`../pdf.py`...) and are imported when a split is read."""
