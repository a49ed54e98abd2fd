"""A real Prometheus (Debian's `prometheus`) scraping given targets every second."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from tests.support.servers import free_port, server

SCRAPE = """global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
"""


def scrape_config(jobs: Mapping[str, Sequence[str]], labels: Mapping[str, Mapping[str, str]]) -> str:
    """prometheus.yml scraping each job's HOST:PORT targets at /metrics every second, its series
    given the job's `labels` (the agent's id, as the deployment page's scrape config does)."""
    out = [SCRAPE]
    for job, targets in jobs.items():
        listed = ", ".join(f'"{t}"' for t in targets)
        out.append(f"  - job_name: {job}\n    static_configs:\n      - targets: [{listed}]\n")
        if labels.get(job):
            out.append("        labels:\n")
            out.extend(f'          {k}: "{v}"\n' for k, v in labels[job].items())
    return "".join(out)


@contextlib.contextmanager
def prometheus(data: Path, jobs: Mapping[str, Sequence[str]],
               labels: Mapping[str, Mapping[str, str]] | None = None) -> Iterator[str]:
    """Prometheus on a free loopback port, its TSDB in `data`; yields its URL once ready."""
    data.mkdir(parents=True, exist_ok=True)
    config = data / "prometheus.yml"
    config.write_text(scrape_config(jobs, labels or {}))
    port = free_port()
    argv = ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={data / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"]
    with server(argv, port, data / "prometheus.log") as url:
        yield url
