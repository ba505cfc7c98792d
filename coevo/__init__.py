"""The ``coevo`` command line: a thin layer over games, roles, marl, populations and analysis."""
