//! Parsing the times operators type: `2026-11-29T10:00:00Z`, with optional seconds and
//! fractions of a second and a `Z` or `±HH:MM` offset (no offset means UTC), as Kafka's tools
//! accept them. The calendar is `jiff`'s: a date that does not exist (`2026-02-31`) is refused.

use jiff::civil::DateTime;
use jiff::tz::TimeZone;
use jiff::Timestamp;

/// Milliseconds since the Unix epoch for an ISO-8601 date and time.
pub fn parse_datetime(text: &str) -> Result<i64, String> {
    let bad = |why: jiff::Error| {
        format!("{text:?} is not a date and time like 2026-11-29T10:00:00Z: {why}")
    };
    let Some((_, clock)) = text.split_once(['T', 't']) else {
        return Err(format!("{text:?} has no time, like 2026-11-29T10:00:00Z"));
    };
    let at = if clock.ends_with(['Z', 'z']) || clock.contains(['+', '-']) {
        text.parse::<Timestamp>().map_err(bad)?
    } else {
        let civil: DateTime = text.parse().map_err(bad)?;
        civil.to_zoned(TimeZone::UTC).map_err(bad)?.timestamp()
    };
    Ok(at.as_millisecond())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_kafkas_tools_accept() {
        // Values from `date -u -d ... +%s%3N`.
        assert_eq!(parse_datetime("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(
            parse_datetime("2026-11-29T10:00:00Z"),
            Ok(1_795_946_400_000)
        );
        assert_eq!(parse_datetime("2026-11-29T10:00Z"), Ok(1_795_946_400_000));
        assert_eq!(
            parse_datetime("2026-11-29T10:00:00.250Z"),
            Ok(1_795_946_400_250)
        );
        assert_eq!(
            parse_datetime("2026-11-29T11:30:00+01:30"),
            Ok(1_795_946_400_000)
        );
        assert_eq!(
            parse_datetime("2026-11-29T08:00:00-02:00"),
            Ok(1_795_946_400_000)
        );
        assert_eq!(parse_datetime("2024-02-29T00:00:00"), Ok(1_709_164_800_000));
        assert_eq!(parse_datetime("1969-12-31T23:59:59.999Z"), Ok(-1));
        for bad in [
            "",
            "yesterday",
            "2026-13-01T00:00:00Z",
            "2026-11-29",
            "2026-11-29T25:00:00Z",
            "2026-02-31T00:00:00Z",
            "2026-02-29T00:00:00",
        ] {
            assert!(parse_datetime(bad).is_err(), "{bad:?}");
        }
    }
}
