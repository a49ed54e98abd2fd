"""Configuration: TOML files to frozen, validated models (agent, collector, the sections they share)."""
