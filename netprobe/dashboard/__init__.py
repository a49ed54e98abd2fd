"""The collector's read-only dashboard (docs/dashboard.md): server-rendered HTML with inline CSS and SVG, no
external assets, no JavaScript, behind viewer credentials (HTTP Basic, secrets stored hashed).

Modules: routes (aiohttp handlers under the prefix: auth, methods, the days parameter), layout (the page
shell, links, number formats), overview (regions × candidates at the last evening peak), agents (health),
target (one agent × target over a span)."""
