"""What the traced-path commands share (`netprobe probe mtr` and `rmtr`, the way back): mtr's hop
table and the GeoIP databases' options."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from netprobe.probes.mtr.runtime import MtrResult
from netprobe.probes.render import ms, pct
from netprobe.textout import TextTable

if TYPE_CHECKING:
    from netprobe.net.geoip import GeoIP

_MTR_FIGURES = ("Last", "Avg", "Best", "Wrst", "StDev", "Javg")


def mtr_table(r: MtrResult, title: str | None = None) -> TextTable:
    """mtr's own columns; rate-limited hops dimmed (their loss is the router's, not the path's)."""
    if title is None:
        title = f"mtr {r.mode}{f' port {r.port}' if r.port else ''} to {r.host} ({r.address or '—'})"
    t = TextTable(title=title, caption=_route_caption(r))
    for name in ("hop", "host", "ASN", "Loss%", "Snt", "Last", "Avg", "Best", "Wrst", "StDev", "Javg"):
        t.add_column(name, justify="left" if name in ("host", "ASN") else "right")
    for hop in r.hops:
        d = hop.to_dict()
        host = " ".join(hop.addresses) or "???"
        if hop.icmp_errors:     # answered with an ICMP error (!H host unreachable…), as traceroute marks it
            host += "".join(f" !{code}" + (f"×{n}" if n > 1 else "") for code, n in hop.icmp_errors.items())
        asn = " ".join(x for x in (d["ASN"], hop.org or "", hop.country or "") if x)
        loss = pct(hop.loss_pct) + (" rl" if hop.rate_limited else "")
        cells = [str(hop.count), host, asn, loss, str(hop.sent),
                 *(ms(d[k]) if hop.answered else "—" for k in _MTR_FIGURES)]
        t.add_row(*cells, style="dim" if hop.rate_limited or not hop.answered else None)
    return t


def _route_caption(r: MtrResult) -> str:
    route = r.route
    if route is None:
        return ""
    # plain text: a TextTable's caption has one style (dim italic), not rich's spans of bold and red
    text = f"line {route.label}  path loss {pct(r.loss_pct)}%  hash {route.hash}"
    if route.mismatch:
        text += f"  declared {route.declared_line}"
    if any(h.rate_limited for h in r.hops):
        text += "  (rl: loss at that hop only — ICMP rate limiting, not path loss)"
    return text


asn_db_opt = click.option("--asn-db", "asn_db", metavar="FILE.mmdb", help="GeoLite2-ASN database.")
city_db_opt = click.option("--city-db", "city_db", metavar="FILE.mmdb",
                           help="GeoLite2-City or -Country database.")


def open_geoip(asn_db: str | None, city_db: str | None) -> GeoIP | None:
    """--asn-db / --city-db (mtr, rmtr): the databases, their warnings on stderr."""
    from netprobe.net.geoip import GeoIP  # maxminddb only when a database is given

    geoip = GeoIP(Path(asn_db) if asn_db else None, Path(city_db) if city_db else None) \
        if asn_db or city_db else None
    for warning in geoip.warnings if geoip is not None else []:
        sys.stderr.write(f"warning: {warning}\n")
    return geoip
