"""Fleets: many loops from one file, run as a local pool of ordinary runs."""
