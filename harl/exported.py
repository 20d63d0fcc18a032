"""Names an export folder is read by: shared by ``harl export`` (the writer) and
``harl.load_policy`` (the reader), kept in the lowest layer so neither imports the other for it."""

MANIFEST = "policy.json"
"""The manifest beside the exported actors: spaces, inputs, outputs, the run's pipeline."""
