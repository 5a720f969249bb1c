//! Parsing the times operators type: `2026-11-29T10:00:00Z`, with optional fractions of a
//! second and a `Z` or `±HH:MM` offset (no offset means UTC), as Kafka's tools accept them.

/// Milliseconds since the Unix epoch for an ISO-8601 date and time.
pub fn parse_datetime(text: &str) -> Result<i64, String> {
    let bad = || format!("{text:?} is not a date and time like 2026-11-29T10:00:00Z");
    let (date, rest) = text.split_once('T').ok_or_else(bad)?;
    let mut d = date.splitn(3, '-');
    let year: i64 = d.next().and_then(|v| v.parse().ok()).ok_or_else(bad)?;
    let month: i64 = d.next().and_then(|v| v.parse().ok()).ok_or_else(bad)?;
    let day: i64 = d.next().and_then(|v| v.parse().ok()).ok_or_else(bad)?;
    let (clock, offset_minutes) = if let Some(clock) = rest.strip_suffix('Z') {
        (clock, 0)
    } else if let Some(at) = rest.rfind(['+', '-']).filter(|&at| at >= 8) {
        let (clock, offset) = rest.split_at(at);
        let sign = if offset.starts_with('-') { -1 } else { 1 };
        let (h, m) = offset[1..].split_once(':').ok_or_else(bad)?;
        let h: i64 = h.parse().map_err(|_| bad())?;
        let m: i64 = m.parse().map_err(|_| bad())?;
        (clock, sign * (h * 60 + m))
    } else {
        (rest, 0)
    };
    let (clock, fraction) = clock.split_once('.').unwrap_or((clock, ""));
    let mut c = clock.splitn(3, ':');
    let hour: i64 = c.next().and_then(|v| v.parse().ok()).ok_or_else(bad)?;
    let minute: i64 = c.next().and_then(|v| v.parse().ok()).ok_or_else(bad)?;
    let second: i64 = c
        .next()
        .map_or(Some(0), |v| v.parse().ok())
        .ok_or_else(bad)?;
    let millis: i64 = if fraction.is_empty() {
        0
    } else {
        let digits: String = fraction.chars().chain("000".chars()).take(3).collect();
        digits.parse().map_err(|_| bad())?
    };
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return Err(bad());
    }
    let days = days_from_civil(year, month, day);
    Ok(((days * 24 + hour) * 60 + minute - offset_minutes) * 60_000 + second * 1000 + millis)
}

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (Howard Hinnant's
/// algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
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
        for bad in [
            "",
            "yesterday",
            "2026-13-01T00:00:00Z",
            "2026-11-29",
            "2026-11-29T25:00:00Z",
        ] {
            assert!(parse_datetime(bad).is_err(), "{bad:?}");
        }
    }
}
