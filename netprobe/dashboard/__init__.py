"""The collector's read-only dashboard (docs/dashboard.md): server-rendered HTML with inline CSS and SVG, no
external assets, no JavaScript, behind viewer credentials (HTTP Basic, secrets stored hashed)."""
