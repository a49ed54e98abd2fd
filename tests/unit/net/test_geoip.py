"""GeoIP enrichment through the real maxminddb reader, on small databases written in tmp_path."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from click.testing import CliRunner

from netprobe.cli import app
from netprobe.net.geoip import CACHE_SIZE, GeoInfo, GeoIP, mmdb_problem
from tests.support.mmdb import write_asn_db, write_city_db, write_records

ROOT = Path(__file__).resolve().parents[3]
NONE = GeoInfo(asn=None, org=None, country=None, city=None)


@pytest.fixture
def dbs(tmp_path: Path) -> tuple[Path, Path]:
    return write_asn_db(tmp_path / "asn.mmdb"), write_city_db(tmp_path / "city.mmdb")


def geo_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "netprobe.net.geoip" and r.levelno == logging.WARNING]


def test_lookup_combines_asn_and_city(dbs: tuple[Path, Path]) -> None:
    with GeoIP(*dbs) as geo:
        assert geo.warnings == [] and geo.enabled
        assert geo.lookup("59.43.1.2") == GeoInfo(asn=4809, org="China Telecom CN2", country="CN",
                                                  city="Shanghai")
        assert geo.lookup("202.97.40.1") == GeoInfo(4134, "CHINANET-BACKBONE", "CN", "Beijing")
        # In the ASN database only: the city part is simply unknown.
        assert geo.lookup("218.105.2.3") == GeoInfo(9929, "China Unicom Industrial Internet Backbone", None,
                                                    None)
        assert geo.lookup("223.120.17.255").asn == 58807
        assert geo.lookup("240e:1:2::3") == GeoInfo(4134, "CHINANET-BACKBONE", "CN", None)
        assert geo.lookup("[240e:1:2::3]").asn == 4134


@pytest.mark.parametrize("address", ["8.8.8.8", "10.1.2.3", "192.168.0.1", "100.64.0.1", "127.0.0.1",
                                     "fe80::1", "2001:db8::1", "???", "", "router.example.net", "59.43.1"])
def test_unknown_private_or_malformed_addresses_give_all_none(dbs: tuple[Path, Path], address: str) -> None:
    with GeoIP(*dbs) as geo:
        assert geo.lookup(address) == NONE


def test_country_database_serves_as_city_db(tmp_path: Path) -> None:
    country = write_city_db(tmp_path / "country.mmdb", database_type="GeoLite2-Country")
    with GeoIP(city_db=country) as geo:
        assert geo.warnings == []
        assert geo.lookup("59.43.1.2") == GeoInfo(None, None, "CN", None)


def test_lookups_are_cached_and_bounded(dbs: tuple[Path, Path]) -> None:
    with GeoIP(*dbs) as geo:
        first = geo.lookup("59.43.1.2")
        assert geo.lookup("59.43.1.2") is first
        geo.lookup("10.0.0.1")
        info = geo._cached.cache_info()
        assert (info.hits, info.misses, info.maxsize) == (1, 2, CACHE_SIZE)
        assert 1000 <= CACHE_SIZE <= 10000


def test_missing_database_warns_once_and_disables_that_part(tmp_path: Path, dbs: tuple[Path, Path],
                                                            caplog: pytest.LogCaptureFixture) -> None:
    missing = tmp_path / "GeoLite2-ASN.mmdb"
    with caplog.at_level(logging.WARNING, logger="netprobe.net.geoip"), GeoIP(missing, dbs[1]) as geo:
        for _ in range(3):
            assert geo.lookup("59.43.1.2") == GeoInfo(None, None, "CN", "Shanghai")
    records = geo_warnings(caplog)
    assert len(records) == 1
    assert str(missing) in records[0].getMessage() and "file not found" in records[0].getMessage()
    assert geo.warnings == [records[0].getMessage()]


@pytest.mark.parametrize("content", [b"", b"not a database\n" * 100], ids=["empty", "garbage"])
def test_unreadable_database_warns_and_never_raises(tmp_path: Path, content: bytes,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    bad = tmp_path / "bad.mmdb"
    bad.write_bytes(content)
    with caplog.at_level(logging.WARNING, logger="netprobe.net.geoip"):
        geo = GeoIP(asn_db=bad, city_db=bad)
    assert not geo.enabled
    assert geo.lookup("59.43.1.2") == NONE
    assert len(geo.warnings) == 2 and len(geo_warnings(caplog)) == 2  # one per configured file
    assert all(str(bad) in w and "not a MaxMind DB" in w for w in geo.warnings)
    geo.close()


def test_wrong_kind_of_database_is_refused_with_a_warning(dbs: tuple[Path, Path]) -> None:
    asn, city = dbs
    geo = GeoIP(asn_db=city, city_db=asn)
    assert not geo.enabled
    assert "is a GeoLite2-City database, not an ASN database" in geo.warnings[0]
    assert "is a GeoLite2-ASN database, not a City or Country database" in geo.warnings[1]
    assert geo.lookup("59.43.1.2") == NONE


@pytest.mark.parametrize(("asn_record", "city_record", "expected"), [
    ({"autonomous_system_number": "4809", "autonomous_system_organization": 4809},
     {"country": "CN", "city": ["Shanghai"]}, NONE),
    ({"autonomous_system_number": True, "autonomous_system_organization": ["CN2"]},
     {"country": {"iso_code": 156}, "city": {"names": "Shanghai"}}, NONE),
    ({"autonomous_system_number": 4809.0, "autonomous_system_organization": {"en": "CN2"}},
     {"country": {"iso_code": {"en": "CN"}}, "city": {"names": {"en": 1}}}, NONE),
    ("AS4809", ["CN", "Shanghai"], NONE),  # a record need not be a map at all
    # Only the field of the wrong type is lost.
    ({"autonomous_system_number": 4809, "autonomous_system_organization": b"CN2"},
     {"country": {"iso_code": "CN"}, "city": {"names": {"en": False}}}, GeoInfo(4809, None, "CN", None)),
], ids=["strings-for-numbers", "bool-list-number", "float-maps", "not-maps", "one-field-wrong"])
def test_fields_of_the_wrong_type_are_none_and_never_raise(tmp_path: Path, asn_record: object,
                                                            city_record: object, expected: GeoInfo) -> None:
    asn = write_records(tmp_path / "asn.mmdb", {"59.43.0.0/16": asn_record}, "GeoLite2-ASN")
    city = write_records(tmp_path / "city.mmdb", {"59.43.0.0/16": city_record}, "GeoLite2-City")
    with GeoIP(asn, city) as geo:
        assert geo.warnings == []
        assert geo.lookup("59.43.1.2") == expected


def test_no_databases_no_warnings() -> None:
    geo = GeoIP()
    assert geo.warnings == [] and not geo.enabled
    assert geo.lookup("59.43.1.2") == NONE


def test_close_is_idempotent_and_lookups_after_it_are_empty(dbs: tuple[Path, Path]) -> None:
    geo = GeoIP(*dbs)
    assert geo.lookup("59.43.1.2").asn == 4809
    geo.close()
    geo.close()
    assert geo.lookup("59.43.1.2") == NONE


def test_mmdb_problem(tmp_path: Path, dbs: tuple[Path, Path]) -> None:
    asn, city = dbs
    assert mmdb_problem(asn) is None and mmdb_problem(asn, "asn") is None
    assert mmdb_problem(city, "city") is None
    assert mmdb_problem(tmp_path / "nope.mmdb") == "file not found"
    assert mmdb_problem(tmp_path) == "is a directory, not a .mmdb file"
    (tmp_path / "junk").write_text("junk", encoding="utf-8")
    assert mmdb_problem(tmp_path / "junk", "asn") == "not a MaxMind DB (.mmdb) file"
    assert mmdb_problem(asn, "city") == "is a GeoLite2-ASN database, not a City or Country database " \
                                        "(GeoLite2-City)"


def test_to_dict() -> None:
    assert GeoInfo(4809, "CN2", "CN", None).to_dict() == {"asn": 4809, "org": "CN2", "country": "CN",
                                                         "city": None}


def _config(tmp_path: Path, asn_db: Path, city_db: Path) -> Path:
    example = (ROOT / "config.example.toml").read_text(encoding="utf-8")
    text = example.replace('asn_db = ""', f'asn_db = "{asn_db}"') \
        .replace('city_db = ""', f'city_db = "{city_db}"')
    assert text != example
    path = tmp_path / "agent.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_config_check_accepts_readable_databases(tmp_path: Path, dbs: tuple[Path, Path]) -> None:
    result = CliRunner().invoke(app, ["config", "check", str(_config(tmp_path, *dbs))])
    assert result.exit_code == 0, result.output
    assert "OK: 2 targets" in result.output


def test_config_check_names_missing_or_unusable_databases(tmp_path: Path, dbs: tuple[Path, Path]) -> None:
    missing = tmp_path / "missing.mmdb"
    path = _config(tmp_path, missing, dbs[0])  # an ASN database where a City one belongs
    result = CliRunner().invoke(app, ["config", "check", str(path)])
    assert result.exit_code == 2
    lines = result.output.splitlines()
    assert lines[0] == f"{path}: 2 problems"
    assert lines[1] == f"geoip.asn_db: {missing}: file not found"
    assert lines[2].startswith(f"geoip.city_db: {dbs[0]}: is a GeoLite2-ASN database, not a City")
