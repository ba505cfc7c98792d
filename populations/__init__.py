"""Populations of players: members and their snapshots, matchmaking, ratings, payoffs, meta-solvers,
leagues, PBT, tournaments and sweeps."""
