"""The collector's read-only dashboard (DESIGN §11)."""
