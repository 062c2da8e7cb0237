"""Megatron-LM's indexed dataset files: the `.bin`/`.idx` format (`indexed`), a run's pairs written
(`write`) and read back, checked against the manifest (`read`)."""
