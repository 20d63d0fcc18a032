"""Teams: several sets of agents in one world, each learning, frozen, scripted or in self-play.

Kept free of imports, like ``harl.rundir``: the registry imports ``harl.teams.scripted`` to
find the scripted kinds, and that must not pull in the team composition or its collector.
"""
