"""Small MaxMind-format databases for tests, written with mmdb_writer in the layout MaxMind ships them."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from mmdb_writer import MmdbU32, MMDBWriter
from netaddr import IPSet

# IPv4 and IPv6 networks in one tree, as MaxMind ships them (ipv4_compatible maps ::a.b.c.d).
ASN_NETWORKS: dict[str, tuple[int, str]] = {
    "59.43.0.0/16": (4809, "China Telecom CN2"),
    "202.97.0.0/16": (4134, "CHINANET-BACKBONE"),
    "218.105.0.0/16": (9929, "China Unicom Industrial Internet Backbone"),
    "223.120.16.0/23": (58807, "China Mobile CMIN2"),
    "240e::/20": (4134, "CHINANET-BACKBONE"),
}
CITY_NETWORKS: dict[str, tuple[str, str | None]] = {
    "59.43.0.0/16": ("CN", "Shanghai"),
    "202.97.0.0/16": ("CN", "Beijing"),
    "240e::/20": ("CN", None),
}


def _writer(database_type: str) -> MMDBWriter:
    return MMDBWriter(ip_version=6, ipv4_compatible=True, database_type=database_type, languages=["en"],
                      description=f"netprobe test {database_type}")


def write_asn_db(path: Path, networks: Mapping[str, tuple[int, str]] = ASN_NETWORKS,
                 database_type: str = "GeoLite2-ASN") -> Path:
    writer = _writer(database_type)
    for cidr, (asn, org) in networks.items():
        # netprobe.net.geoip reads exactly these two keys; the number is a uint32 in MaxMind's files.
        writer.insert_network(IPSet([cidr]), {"autonomous_system_number": MmdbU32(asn),
                                              "autonomous_system_organization": org})
    writer.to_db_file(str(path))
    return path


def write_city_db(path: Path, networks: Mapping[str, tuple[str, str | None]] = CITY_NETWORKS,
                  database_type: str = "GeoLite2-City") -> Path:
    writer = _writer(database_type)
    for cidr, (country, city) in networks.items():
        record: dict[str, object] = {"country": {"iso_code": country, "names": {"en": country}}}
        if city is not None and "City" in database_type:
            record["city"] = {"names": {"en": city}}
        writer.insert_network(IPSet([cidr]), record)
    writer.to_db_file(str(path))
    return path


def write_records(path: Path, records: Mapping[str, object], database_type: str) -> Path:
    """A database holding `records` as given, of whatever types: the reader's checks, not the layout."""
    writer = _writer(database_type)
    for cidr, record in records.items():
        writer.insert_network(IPSet([cidr]), record)
    writer.to_db_file(str(path))
    return path
