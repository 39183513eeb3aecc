"""loope: run AI coding agents in loops until a verifier you trust agrees."""

__version__ = "0.1.0"
