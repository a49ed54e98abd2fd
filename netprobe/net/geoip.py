"""GeoIP enrichment of hop addresses: ASN and organisation, country, city, from MaxMind-format files.

A missing or unreadable database never stops a probe: that part of the enrichment is switched off and
one warning says which file and why. maxminddb's errors end at this module's boundary.

Read with maxminddb, MaxMind's own reader: geoip2 is only a model layer over it plus a web-service
client, and would pull requests, urllib3, charset-normalizer and certifi into the agent install.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal, TypeVar

import maxminddb

from netprobe.logs import log_event

log = logging.getLogger("netprobe.net.geoip")

CACHE_SIZE = 4096
Role = Literal["asn", "city"]
# Substrings of the database type (metadata) that fit each role, as geoip2 matched them: an ISP
# database has the ASN keys too, a Country one the country keys.
_TYPES: dict[Role, tuple[str, ...]] = {"asn": ("ASN", "ISP"), "city": ("City", "Country")}
_WANTED = {"asn": "an ASN database (GeoLite2-ASN)", "city": "a City or Country database (GeoLite2-City)"}
_WITHOUT = {"asn": "hop ASNs come from the [classification] prefixes only",
            "city": "hops get no country or city"}
_LOOKUP_ERRORS = (maxminddb.InvalidDatabaseError, ValueError, TypeError, OSError)
_T = TypeVar("_T", int, str)


@dataclass(frozen=True, slots=True)
class GeoInfo:
    """What GeoIP knows about one address; every field None when nothing is known."""

    asn: int | None = None
    org: str | None = None
    country: str | None = None  # ISO 3166-1 alpha-2, e.g. "CN"
    city: str | None = None  # English name

    def to_dict(self) -> dict[str, int | str | None]:
        return asdict(self)


UNKNOWN = GeoInfo()


def mmdb_problem(path: Path, role: Role | None = None) -> str | None:
    """Why `path` cannot serve as a MaxMind database (for `role`, when given), or None when it can."""
    try:
        reader = _open(Path(path), role)
    except _Unusable as exc:
        return str(exc)
    reader.close()
    return None


class GeoIP:
    """Lookups in a GeoLite2-ASN and a GeoLite2-City (or -Country) database; either may be absent."""

    def __init__(self, asn_db: Path | None = None, city_db: Path | None = None) -> None:
        self.warnings: list[str] = []
        self._asn = self._load(asn_db, "asn")
        self._city = self._load(city_db, "city")
        self._cached = functools.lru_cache(maxsize=CACHE_SIZE)(self._lookup)

    @property
    def enabled(self) -> bool:
        return self._asn is not None or self._city is not None

    def lookup(self, address: str) -> GeoInfo:
        """GeoInfo of `address`; all None for private, unknown or malformed addresses. Never raises."""
        return self._cached(address)

    def close(self) -> None:
        for part in (self._asn, self._city):
            if part is not None:
                part.close()
        self._asn = self._city = None
        self._cached.cache_clear()

    def __enter__(self) -> GeoIP:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _load(self, path: Path | None, role: Role) -> maxminddb.Reader | None:
        if path is None:
            return None
        try:
            return _open(Path(path), role)
        except _Unusable as exc:
            message = f"GeoIP {role} database {path}: {exc}; {_WITHOUT[role]}"
            self.warnings.append(message)
            log_event(log, "warning", message, file=str(path), reason=str(exc))
            return None

    def _lookup(self, address: str) -> GeoInfo:
        try:
            ip = ipaddress.ip_address(address.strip("[]"))
        except ValueError:
            return UNKNOWN  # "???", a name, an empty string
        # Private ranges are asked too: MaxMind's files have nothing there, but a site's own
        # database (a private backbone, the lab) may.
        key = str(ip)
        asn = org = country = city = None
        if self._asn is not None:
            record = _query(self._asn, key)
            asn = _field(record, int, "autonomous_system_number")
            org = _field(record, str, "autonomous_system_organization")
        if self._city is not None:
            record = _query(self._city, key)
            country = _field(record, str, "country", "iso_code")
            city = _field(record, str, "city", "names", "en")
        return GeoInfo(asn=asn, org=org, country=country, city=city)


class _Unusable(Exception):
    """The reason a database file cannot be used, worded for a person."""


def _open(path: Path, role: Role | None) -> maxminddb.Reader:
    """A reader of `path` whose database type fits `role`, or _Unusable."""
    if path.is_dir():
        raise _Unusable("is a directory, not a .mmdb file")
    try:
        reader = maxminddb.open_database(str(path))  # MODE_AUTO: the C extension when it is built
    except FileNotFoundError:
        raise _Unusable("file not found") from None
    except PermissionError:
        raise _Unusable("permission denied") from None
    except OSError as exc:
        raise _Unusable(f"cannot read: {exc.strerror or exc}") from None
    except (maxminddb.InvalidDatabaseError, ValueError):
        raise _Unusable("not a MaxMind DB (.mmdb) file") from None
    db_type = reader.metadata().database_type
    if role is None or any(needle in db_type for needle in _TYPES[role]):
        return reader
    reader.close()
    raise _Unusable(f"is a {db_type} database, not {_WANTED[role]}")


def _query(reader: maxminddb.Reader, address: str) -> object:
    try:
        return reader.get(address)  # None when the address is not in the database
    except _LOOKUP_ERRORS:
        return None  # a damaged database, or an IPv6 address asked of an IPv4-only one


def _field(record: object, kind: type[_T], *keys: str) -> _T | None:
    """record[keys[0]][keys[1]]... when each step is a dict and the value exactly a `kind`, else None.

    A record is whatever the file holds: a site's own database may have a string ASN or a list
    where a map belongs, and that must cost the field, not the probe. `type() is`, not isinstance:
    an mmdb boolean is a Python bool, which isinstance would take for an int.
    """
    for key in keys:
        if not isinstance(record, dict):
            return None
        record = record.get(key)
    return record if type(record) is kind else None
