"""Many seeds of one pipeline trained as one population in one process (``--vectorize``).

``driver`` runs it; ``update`` is the batched on-policy update; ``check`` says what can be
batched and whether it fits.  What the families' batched collection uses lives in the layers
below, beside what it batches: ``harl.envs.population`` splits one shared vector env into the
members' slices, ``harl.nets.population`` batches the members' networks and Adam steps.
"""
