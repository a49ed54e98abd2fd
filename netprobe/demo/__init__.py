"""`netprobe demo`: the lab, the agent through a compressed day, then report, budget and alerts."""
