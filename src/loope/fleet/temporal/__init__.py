"""Fleets on Temporal: one workflow per loop, one activity per iteration, run by `loope worker`."""
