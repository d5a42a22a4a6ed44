"""Pools of live episodes for trainers: EpisodePool (threads, in this process) and RayEpisodePool (Ray actors).

What RL trainers and the integrations import: the pools, `faults` (which errors are ours) and `messages`
(errors without host paths). May import the env (through Gymnasium, and `envs.host_memory` for the
memory share) and errors.
"""
