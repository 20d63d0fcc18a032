"""Many seeds of one pipeline trained as one population in one process (``--vectorize``).

``driver`` runs it; ``envs`` splits one shared vector env into the members' slices;
``stack`` batches the members' networks and Adam steps; ``update`` is the batched
on-policy update; ``check`` says what can be batched and whether it fits.
"""
