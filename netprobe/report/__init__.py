"""Reports computed from the hourly rollups: `netprobe report peak` (peak.py computes, rows.py holds
its rows, render_* print). Other commands (the budget, diagnose) take `peak.peak_rows` and `rows.PeakRow`."""
