use super::*;
use std::io::Write;

fn d(s: &str) -> NaiveDate {
    NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
}

fn utc(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

/// An instant given as Lagos wall-clock time `YYYY-MM-DD HH:MM:SS`.
fn lagos(s: &str) -> DateTime<Utc> {
    let naive = chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S").unwrap();
    Lagos
        .from_local_datetime(&naive)
        .single()
        .unwrap()
        .with_timezone(&Utc)
}

fn wd(s: &str) -> Weekday {
    s.parse::<Weekday>().unwrap()
}

#[test]
fn easter_known_years() {
    let table = [
        (2000, "2000-04-23"),
        (2019, "2019-04-21"),
        (2024, "2024-03-31"),
        (2025, "2025-04-20"),
        (2026, "2026-04-05"),
        (2027, "2027-03-28"),
        (2028, "2028-04-16"),
        (2038, "2038-04-25"),
        (2285, "2285-03-22"),
    ];
    for (year, expected) in table {
        let e = easter_sunday(year);
        assert_eq!(e, d(expected), "easter {year}");
        assert_eq!(e.weekday(), Weekday::Sun, "easter {year} is a Sunday");
    }
    // The brief's check: Good Friday 2026 is 3 April.
    assert_eq!(easter_sunday(2026) - Duration::days(2), d("2026-04-03"));
}

#[test]
fn builtin_list_is_exact() {
    let expected: BTreeSet<NaiveDate> = [
        // 2024
        "2024-01-01",
        "2024-03-29",
        "2024-04-01",
        "2024-04-09",
        "2024-04-10",
        "2024-04-11",
        "2024-05-01",
        "2024-06-12",
        "2024-06-17",
        "2024-06-18",
        "2024-09-16",
        "2024-10-01",
        "2024-12-25",
        "2024-12-26",
        // 2025
        "2025-01-01",
        "2025-03-31",
        "2025-04-01",
        "2025-04-18",
        "2025-04-21",
        "2025-05-01",
        "2025-06-06",
        "2025-06-09",
        "2025-06-12",
        "2025-09-05",
        "2025-10-01",
        "2025-12-25",
        "2025-12-26",
        // 2026: Boxing Day (Sat 26 Dec) -> Mon 28 Dec
        "2026-01-01",
        "2026-03-20",
        "2026-03-23",
        "2026-04-03",
        "2026-04-06",
        "2026-05-01",
        "2026-05-27",
        "2026-05-28",
        "2026-06-12",
        "2026-08-25",
        "2026-10-01",
        "2026-12-25",
        "2026-12-28",
        // 2027: Workers' Day (Sat) -> Mon 3 May, Democracy Day (Sat) ->
        // Mon 14 Jun, Christmas (Sat) / Boxing Day (Sun) -> Mon 27 / Tue 28
        "2027-01-01",
        "2027-03-09",
        "2027-03-10",
        "2027-03-26",
        "2027-03-29",
        "2027-05-03",
        "2027-05-17",
        "2027-05-18",
        "2027-06-14",
        "2027-08-16",
        "2027-10-01",
        "2027-12-27",
        "2027-12-28",
        // 2028: New Year (Sat) -> Mon 3 Jan, Independence Day (Sun) ->
        // Mon 2 Oct
        "2028-01-03",
        "2028-02-28",
        "2028-02-29",
        "2028-04-14",
        "2028-04-17",
        "2028-05-01",
        "2028-05-05",
        "2028-05-08",
        "2028-06-12",
        "2028-08-03",
        "2028-10-02",
        "2028-12-25",
        "2028-12-26",
    ]
    .iter()
    .map(|s| d(s))
    .collect();
    let cal = Calendar::nigeria();
    let extra: Vec<_> = cal.holidays().difference(&expected).collect();
    let missing: Vec<_> = expected.difference(cal.holidays()).collect();
    assert!(
        extra.is_empty() && missing.is_empty(),
        "extra {extra:?}, missing {missing:?}"
    );
    // Days off only: every built-in holiday is a weekday.
    for h in cal.holidays() {
        assert!(!is_weekend(*h), "{h} is a weekend day");
    }
    // The weekend holidays that needed a substitute really are weekend days.
    for (s, w) in [
        ("2026-12-26", "Sat"),
        ("2027-05-01", "Sat"),
        ("2027-06-12", "Sat"),
        ("2027-12-25", "Sat"),
        ("2027-12-26", "Sun"),
        ("2028-01-01", "Sat"),
        ("2028-10-01", "Sun"),
    ] {
        assert_eq!(d(s).weekday(), wd(w), "{s}");
    }
    // Dates the brief pins.
    assert_eq!(d("2025-12-25").weekday(), Weekday::Thu);
    assert_eq!(d("2026-01-01").weekday(), Weekday::Thu);
    assert!(cal.is_holiday(d("2026-04-03")));
}

#[test]
fn business_days() {
    let cal = Calendar::nigeria();
    // (date, weekday, business day?)
    let table = [
        ("2025-10-03", "Fri", true),
        ("2025-10-04", "Sat", false),
        ("2025-10-05", "Sun", false),
        ("2025-10-06", "Mon", true),
        ("2025-10-01", "Wed", false), // Independence Day
        ("2025-12-25", "Thu", false), // Christmas
        ("2025-12-26", "Fri", false), // Boxing Day
        ("2025-12-29", "Mon", true),
        ("2026-01-01", "Thu", false), // New Year
        ("2026-01-02", "Fri", true),
        ("2026-12-28", "Mon", false), // Boxing Day substitute
        ("2028-05-01", "Mon", false), // Workers' Day on a Monday
    ];
    for (s, w, expected) in table {
        assert_eq!(d(s).weekday(), wd(w), "{s}");
        assert_eq!(cal.is_business_day(d(s)), expected, "{s}");
    }
}

/// Naira T+1 by collection date (whole-day collections at midday Lagos).
#[test]
fn naira_t_plus_1() {
    let cal = Calendar::nigeria();
    // (collected, its weekday, released, its weekday, what it shows)
    let table = [
        // Friday, Saturday, Sunday -> Monday.
        ("2025-10-03", "Fri", "2025-10-06", "Mon", "weekend"),
        ("2025-10-04", "Sat", "2025-10-06", "Mon", "weekend"),
        ("2025-10-05", "Sun", "2025-10-06", "Mon", "weekend"),
        ("2025-10-06", "Mon", "2025-10-07", "Tue", "plain"),
        // Monday holiday -> Tuesday.
        (
            "2028-04-28",
            "Fri",
            "2028-05-02",
            "Tue",
            "Workers' Day Monday",
        ),
        (
            "2028-04-29",
            "Sat",
            "2028-05-02",
            "Tue",
            "Workers' Day Monday",
        ),
        (
            "2028-04-30",
            "Sun",
            "2028-05-02",
            "Tue",
            "Workers' Day Monday",
        ),
        (
            "2025-04-17",
            "Thu",
            "2025-04-22",
            "Tue",
            "Good Friday + Easter Monday",
        ),
        (
            "2025-04-18",
            "Fri",
            "2025-04-22",
            "Tue",
            "Good Friday + Easter Monday",
        ),
        ("2025-04-20", "Sun", "2025-04-22", "Tue", "Easter Sunday"),
        ("2024-03-28", "Thu", "2024-04-02", "Tue", "Easter 2024"),
        ("2026-04-02", "Thu", "2026-04-07", "Tue", "Easter 2026"),
        // Christmas / Boxing Day / New Year runs.
        ("2024-12-24", "Tue", "2024-12-27", "Fri", "Christmas 2024"),
        ("2024-12-25", "Wed", "2024-12-27", "Fri", "Christmas 2024"),
        ("2024-12-26", "Thu", "2024-12-27", "Fri", "Christmas 2024"),
        ("2024-12-31", "Tue", "2025-01-02", "Thu", "New Year 2025"),
        ("2025-01-01", "Wed", "2025-01-02", "Thu", "New Year 2025"),
        ("2025-12-24", "Wed", "2025-12-29", "Mon", "Christmas 2025"),
        ("2025-12-25", "Thu", "2025-12-29", "Mon", "Christmas 2025"),
        ("2025-12-26", "Fri", "2025-12-29", "Mon", "Christmas 2025"),
        ("2025-12-31", "Wed", "2026-01-02", "Fri", "New Year 2026"),
        ("2026-01-01", "Thu", "2026-01-02", "Fri", "New Year 2026"),
        (
            "2026-12-24",
            "Thu",
            "2026-12-29",
            "Tue",
            "Boxing Day substitute",
        ),
        (
            "2026-12-25",
            "Fri",
            "2026-12-29",
            "Tue",
            "Boxing Day substitute",
        ),
        (
            "2026-12-26",
            "Sat",
            "2026-12-29",
            "Tue",
            "Boxing Day substitute",
        ),
        (
            "2026-12-31",
            "Thu",
            "2027-01-04",
            "Mon",
            "New Year 2027 (Fri)",
        ),
        (
            "2027-01-01",
            "Fri",
            "2027-01-04",
            "Mon",
            "New Year 2027 (Fri)",
        ),
        (
            "2027-12-24",
            "Fri",
            "2027-12-29",
            "Wed",
            "Christmas Sat/Boxing Sun",
        ),
        (
            "2027-12-25",
            "Sat",
            "2027-12-29",
            "Wed",
            "Christmas Sat/Boxing Sun",
        ),
        (
            "2027-12-26",
            "Sun",
            "2027-12-29",
            "Wed",
            "Christmas Sat/Boxing Sun",
        ),
        (
            "2027-12-31",
            "Fri",
            "2028-01-04",
            "Tue",
            "New Year 2028 (Sat)",
        ),
        (
            "2028-01-01",
            "Sat",
            "2028-01-04",
            "Tue",
            "New Year 2028 (Sat)",
        ),
        // Eid sequences.
        ("2024-04-08", "Mon", "2024-04-12", "Fri", "Eid al-Fitr 2024"),
        ("2024-06-14", "Fri", "2024-06-19", "Wed", "Eid al-Adha 2024"),
        ("2024-09-13", "Fri", "2024-09-17", "Tue", "Mawlid 2024"),
        ("2025-03-28", "Fri", "2025-04-02", "Wed", "Eid al-Fitr 2025"),
        ("2025-03-30", "Sun", "2025-04-02", "Wed", "Eid al-Fitr 2025"),
        ("2025-06-05", "Thu", "2025-06-10", "Tue", "Eid al-Adha 2025"),
        (
            "2025-06-11",
            "Wed",
            "2025-06-13",
            "Fri",
            "Democracy Day 2025",
        ),
        ("2026-03-19", "Thu", "2026-03-24", "Tue", "Eid al-Fitr 2026"),
        ("2026-05-26", "Tue", "2026-05-29", "Fri", "Eid al-Adha 2026"),
        ("2028-02-25", "Fri", "2028-03-01", "Wed", "Eid al-Fitr 2028"),
    ];
    for (collected, cw, released, rw, what) in table {
        assert_eq!(d(collected).weekday(), wd(cw), "{collected} ({what})");
        assert_eq!(d(released).weekday(), wd(rw), "{released} ({what})");
        let at = lagos(&format!("{collected} 12:00:00"));
        assert_eq!(
            cal.release_date(at, NGN_DELAY_DAYS).unwrap(),
            d(released),
            "{collected} ({what})"
        );
        assert_eq!(
            cal.next_business_day(d(collected)),
            d(released),
            "{collected}"
        );
        assert_eq!(
            cal.release_instant(at, NGN_DELAY_DAYS).unwrap(),
            settlement_instant(d(released)),
            "{collected}"
        );
    }
}

#[test]
fn dollar_t_plus_7() {
    let cal = Calendar::nigeria();
    let table = [
        // No holiday: Mon 2 Feb 2026 -> Wed 11 Feb.
        ("2026-02-02", "Mon", "2026-02-11", "Wed"),
        // Christmas/New Year weeks: 23, 24, 29, 30, 31 Dec, 2 Jan, 5 Jan.
        ("2025-12-22", "Mon", "2026-01-05", "Mon"),
        // Eid al-Fitr 2025: 27, 28 Mar, 2, 3, 4, 7, 8 Apr.
        ("2025-03-26", "Wed", "2025-04-08", "Tue"),
        // Christmas Sat/Boxing Sun 2027 + New Year Sat 2028.
        ("2027-12-23", "Thu", "2028-01-06", "Thu"),
    ];
    for (collected, cw, released, rw) in table {
        assert_eq!(d(collected).weekday(), wd(cw), "{collected}");
        assert_eq!(d(released).weekday(), wd(rw), "{released}");
        let at = lagos(&format!("{collected} 15:30:00"));
        assert_eq!(
            cal.release_date(at, USD_DELAY_DAYS).unwrap(),
            d(released),
            "{collected}"
        );
        assert_eq!(
            cal.nth_business_day_after(d(collected), 7).unwrap(),
            d(released)
        );
    }
}

#[test]
fn nth_business_day_after_table() {
    let cal = Calendar::nigeria();
    let table = [
        ("2025-12-24", 0, "2025-12-24"),
        ("2025-12-24", 1, "2025-12-29"),
        ("2025-12-24", 2, "2025-12-30"),
        ("2025-12-24", 3, "2025-12-31"),
        ("2025-12-24", 4, "2026-01-02"),
        ("2025-12-24", 5, "2026-01-05"),
        ("2025-10-03", 1, "2025-10-06"),
        ("2025-10-03", 5, "2025-10-10"),
        ("2025-10-03", 6, "2025-10-13"),
    ];
    for (from, n, expected) in table {
        assert_eq!(
            cal.nth_business_day_after(d(from), n).unwrap(),
            d(expected),
            "{from} + {n}"
        );
    }
}

#[test]
fn next_business_day_properties_over_builtin_years() {
    let cal = Calendar::nigeria();
    let mut day = d("2024-01-01");
    while day <= d("2028-12-31") {
        let next = cal.next_business_day(day);
        assert!(next > day && cal.is_business_day(next), "{day}");
        let mut between = day + Duration::days(1);
        while between < next {
            assert!(!cal.is_business_day(between), "{day}: skipped {between}");
            between += Duration::days(1);
        }
        assert_eq!(cal.nth_business_day_after(day, 1).unwrap(), next);
        assert_eq!(
            cal.nth_business_day_after(day, 7).unwrap(),
            cal.nth_business_day_after(cal.nth_business_day_after(day, 3).unwrap(), 4)
                .unwrap()
        );
        day += Duration::days(1);
    }
}

#[test]
fn lagos_day_boundary() {
    let cal = Calendar::nigeria();
    // Lagos is UTC+1: 23:59 Lagos Thursday is 22:59Z Thursday; 00:00
    // Lagos Friday is still 23:00Z Thursday in UTC.
    assert_eq!(lagos("2025-10-02 23:59:59"), utc("2025-10-02T22:59:59Z"));
    assert_eq!(lagos("2025-10-03 00:00:00"), utc("2025-10-02T23:00:00Z"));
    let table = [
        // (instant, Lagos date, naira release)
        ("2025-10-02T22:59:59Z", "2025-10-02", "2025-10-03"), // Thu 23:59 Lagos
        ("2025-10-02T23:00:00Z", "2025-10-03", "2025-10-06"), // Fri 00:00 Lagos
        ("2025-10-03T22:59:59Z", "2025-10-03", "2025-10-06"), // Fri 23:59 Lagos
        ("2025-10-05T22:59:59Z", "2025-10-05", "2025-10-06"), // Sun 23:59 Lagos
        ("2025-10-05T23:00:00Z", "2025-10-06", "2025-10-07"), // Mon 00:00 Lagos
        ("2025-12-31T22:59:59Z", "2025-12-31", "2026-01-02"), // Wed 31 Dec 23:59
        ("2025-12-31T23:00:00Z", "2026-01-01", "2026-01-02"), // New Year 00:00
    ];
    assert_eq!(d("2025-10-02").weekday(), Weekday::Thu);
    for (t, date, released) in table {
        assert_eq!(lagos_date(utc(t)), d(date), "{t}");
        assert_eq!(
            cal.release_date(utc(t), NGN_DELAY_DAYS).unwrap(),
            d(released),
            "{t}"
        );
    }
}

#[test]
fn settlement_instant_is_0800_lagos() {
    let cal = Calendar::nigeria();
    assert_eq!(
        settlement_instant(d("2025-10-06")),
        utc("2025-10-06T07:00:00Z")
    );
    assert_eq!(
        cal.settlement_instant(d("2026-06-15")),
        utc("2026-06-15T07:00:00Z")
    );
    assert_eq!(
        cal.settlement_instant(d("2028-02-29")),
        utc("2028-02-29T07:00:00Z")
    );
    // A Friday naira payment: pending at Monday 07:59 Lagos, released 08:00.
    let release = cal
        .release_instant(lagos("2025-10-03 10:00:00"), NGN_DELAY_DAYS)
        .unwrap();
    assert_eq!(release, lagos("2025-10-06 08:00:00"));
    assert!(lagos("2025-10-06 07:59:59") < release);
}

#[test]
fn zero_delay_is_next_settlement_at_or_after() {
    let cal = Calendar::nigeria();
    let table = [
        ("2025-10-06 07:59:59", "2025-10-06"), // Mon before 08:00
        ("2025-10-06 08:00:00", "2025-10-06"), // Mon exactly 08:00
        ("2025-10-06 08:00:01", "2025-10-07"), // Mon after 08:00
        ("2025-10-04 07:00:00", "2025-10-06"), // Saturday
        ("2025-12-25 07:00:00", "2025-12-29"), // Christmas morning
    ];
    for (at, expected) in table {
        assert_eq!(cal.release_date(lagos(at), 0).unwrap(), d(expected), "{at}");
        assert_eq!(
            cal.next_settlement_instant(lagos(at)),
            lagos(&format!("{expected} 08:00:00")),
            "{at}"
        );
    }
}

#[test]
fn file_loader_good() {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    write!(
        f,
        "# custom holidays\n\n2025-10-06\n  2025-10-07  # trailing comment\n\n# done\n"
    )
    .unwrap();
    let cal = Calendar::from_file(f.path()).unwrap();
    let expected: BTreeSet<_> = [d("2025-10-06"), d("2025-10-07")].into_iter().collect();
    assert_eq!(cal.holidays(), &expected);
    // It replaces the built-in list: Christmas 2025 is an ordinary Thursday.
    assert!(cal.is_business_day(d("2025-12-25")));
    assert_eq!(cal.next_business_day(d("2025-10-03")), d("2025-10-08"));
    // An empty file: weekends only.
    let empty = tempfile::NamedTempFile::new().unwrap();
    assert!(Calendar::from_file(empty.path())
        .unwrap()
        .holidays()
        .is_empty());
}

#[test]
fn file_loader_bad_lines() {
    let table = [
        ("2025-10-06\n# ok\n2025-13-01\n", 3),
        ("2025-02-30\n", 1),
        ("\n\n2025-1-01\n", 3),
        ("2025-10-06\nnot a date\n", 2),
        ("2025/10/06\n", 1),
        ("2025-10-06 2025-10-07\n", 1),
    ];
    for (text, line) in table {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(text.as_bytes()).unwrap();
        let err = Calendar::from_file(f.path()).unwrap_err();
        assert!(err.contains(&format!("line {line}:")), "{text:?}: {err}");
        let parse_err = Calendar::parse(text).unwrap_err();
        assert!(
            parse_err.starts_with(&format!("line {line}:")),
            "{parse_err}"
        );
    }
    let err = Calendar::from_file("/nonexistent/kobo-holidays.txt").unwrap_err();
    assert!(err.contains("/nonexistent/kobo-holidays.txt"), "{err}");
}

#[test]
fn a_huge_delay_is_an_error_at_once_not_a_panic_or_an_endless_walk() {
    let cal = Calendar::nigeria();
    let at = lagos("2026-11-20 12:00:00");
    let start = std::time::Instant::now();
    for days in [u32::MAX, u32::MAX / 2, MAX_DELAY_DAYS + 1] {
        let e = cal.release_date(at, days).unwrap_err();
        assert_eq!(e.code, "settlement_delay_out_of_range");
        assert!(cal.release_instant(at, days).is_err());
        assert_eq!(cal.nth_business_day_after(d("2026-11-20"), days), None);
    }
    assert!(start.elapsed() < std::time::Duration::from_secs(1));
    // At the end of the calendar: None, not a panic.
    assert_eq!(cal.checked_next_business_day(NaiveDate::MAX), None);
    assert_eq!(cal.nth_business_day_after(NaiveDate::MAX, 1), None);
    assert!(cal.release_date(at, MAX_DELAY_DAYS).unwrap() > d("2126-01-01"));
}
