"""Agents that speak the Agent Client Protocol (ACP): ``acp:<command>`` and the named presets."""
