"""Reports computed from the hourly rollups: `netprobe report peak` (peak.py computes, render_* print).

`from netprobe.report.peak import peak_rows, PeakRow` for other commands (e.g. the budget)."""
