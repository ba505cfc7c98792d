"""Populations of players: tournaments now; members, matchmaking, ratings, leagues and PBT next."""
