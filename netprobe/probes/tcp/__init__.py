"""The tcp probe: its registry entry (spec), runtime, command and engine."""
