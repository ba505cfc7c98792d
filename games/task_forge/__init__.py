"""Task forge: the four-role game of model-written tasks (proposer, executor, verifier, teacher).

Its parts, each a module: ``rules`` (the PettingZoo game, its phases and rewards' inputs),
``families`` (task generators with difficulty knobs, held-out sets, answer checks), ``sandbox``
(where model-written programs run: bubblewrap, or the rlimit fallback by opt-in), ``players``
(scripted players for every seat) and ``curricula`` (the proposer's curricula: ALP-GMM, SEC, a
staircase). Importing the package loads none of them; ``games.make("task_forge")`` loads the game.
"""
