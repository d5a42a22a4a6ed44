"""Pools of live episodes for trainers: EpisodePool (threads, in this process) and RayEpisodePool (Ray actors).

What RL trainers and the integrations import. May import the env (through Gymnasium) and errors.
"""
