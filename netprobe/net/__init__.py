"""Network plumbing every probe shares: name resolution, address syntax, kernel receive stamps, pacing,
GeoIP and the China-carrier line classification."""
