//! The holiday data: Nigeria's built-in public holidays (Islamic dates as
//! observed, fixed dates with their weekend substitutes, Easter) and the
//! `--holidays FILE` format that replaces them. The rules that use them
//! (business days, release dates) are in the parent module.

use super::*;

/// First and last year covered by the built-in holiday list.
pub const BUILTIN_FIRST_YEAR: i32 = 2024;
pub const BUILTIN_LAST_YEAR: i32 = 2028;

/// Islamic holidays as observed (days off), listed explicitly because they
/// follow the moon: the Federal Government announces them shortly before.
///
/// 2024 and 2025 are the dates the Federal Government declared. 2026-2028 are
/// the expected dates from the Islamic (Umm al-Qura) calendar, with the same
/// rule the Government applies: the festival day and the day after for each
/// Eid, one day for Mawlid, and any of those falling on a weekend moved to
/// the next working day(s). They can be corrected with `--holidays FILE`
/// once announced.
const ISLAMIC_HOLIDAYS: &[(i32, u32, u32, &str)] = &[
    // 2024
    // Eid al-Fitr 1445 (Wed 10 Apr): Tue 9 and Wed 10 declared in advance,
    // Thu 11 declared as an additional day once the moon was sighted late.
    (2024, 4, 9, "Eid al-Fitr"),
    (2024, 4, 10, "Eid al-Fitr"),
    (2024, 4, 11, "Eid al-Fitr (additional day)"),
    // Eid al-Adha 1445 (Sun 16 Jun): Mon 17 and Tue 18 declared.
    (2024, 6, 17, "Eid al-Adha"),
    (2024, 6, 18, "Eid al-Adha"),
    // Mawlid / Eid-el-Maulud 1446 (Sun 15 Sep): Mon 16 declared.
    (2024, 9, 16, "Mawlid"),
    // 2025
    // Eid al-Fitr 1446 (Sun 30 Mar): Mon 31 Mar and Tue 1 Apr declared.
    (2025, 3, 31, "Eid al-Fitr"),
    (2025, 4, 1, "Eid al-Fitr"),
    // Eid al-Adha 1446 (Fri 6 Jun): Fri 6 and Mon 9 declared.
    (2025, 6, 6, "Eid al-Adha"),
    (2025, 6, 9, "Eid al-Adha"),
    // Mawlid 1447: Fri 5 Sep declared.
    (2025, 9, 5, "Mawlid"),
    // 2026 (expected)
    // Eid al-Fitr 1447 (Fri 20 Mar, Sat 21 Mar -> Mon 23 Mar).
    (2026, 3, 20, "Eid al-Fitr"),
    (2026, 3, 23, "Eid al-Fitr"),
    // Eid al-Adha 1447 (Wed 27 May, Thu 28 May).
    (2026, 5, 27, "Eid al-Adha"),
    (2026, 5, 28, "Eid al-Adha"),
    // Mawlid 1448 (Tue 25 Aug).
    (2026, 8, 25, "Mawlid"),
    // 2027 (expected)
    // Eid al-Fitr 1448 (Tue 9 Mar, Wed 10 Mar).
    (2027, 3, 9, "Eid al-Fitr"),
    (2027, 3, 10, "Eid al-Fitr"),
    // Eid al-Adha 1448 (Sun 16 May, Mon 17 May -> Mon 17 and Tue 18 May).
    (2027, 5, 17, "Eid al-Adha"),
    (2027, 5, 18, "Eid al-Adha"),
    // Mawlid 1449 (Sat 14 Aug -> Mon 16 Aug).
    (2027, 8, 16, "Mawlid"),
    // 2028 (expected)
    // Eid al-Fitr 1449 (Sat 26 Feb, Sun 27 Feb -> Mon 28 and Tue 29 Feb).
    (2028, 2, 28, "Eid al-Fitr"),
    (2028, 2, 29, "Eid al-Fitr"),
    // Eid al-Adha 1449 (Fri 5 May, Sat 6 May -> Fri 5 and Mon 8 May).
    (2028, 5, 5, "Eid al-Adha"),
    (2028, 5, 8, "Eid al-Adha"),
    // Mawlid 1450 (Thu 3 Aug).
    (2028, 8, 3, "Mawlid"),
];

/// Fixed-date holidays (month, day, name); a weekend one gets a substitute.
const FIXED_HOLIDAYS: &[(u32, u32, &str)] = &[
    (1, 1, "New Year's Day"),
    (5, 1, "Workers' Day"),
    (6, 12, "Democracy Day"),
    (10, 1, "Independence Day"),
    (12, 25, "Christmas Day"),
    (12, 26, "Boxing Day"),
];

fn ymd(y: i32, m: u32, d: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(y, m, d).expect("valid built-in date")
}

/// Easter Sunday of a Gregorian year (anonymous Gregorian algorithm, Meeus).
pub fn easter_sunday(year: i32) -> NaiveDate {
    let a = year.rem_euclid(19);
    let b = year.div_euclid(100);
    let c = year.rem_euclid(100);
    let d = b / 4;
    let e = b % 4;
    let f = (b + 8) / 25;
    let g = (b - f + 1) / 3;
    let h = (19 * a + b - d - g + 15) % 30;
    let i = c / 4;
    let k = c % 4;
    let l = (32 + 2 * e + 2 * i - h - k) % 7;
    let m = (a + 11 * h + 22 * l) / 451;
    let month = (h + l - 7 * m + 114) / 31;
    let day = (h + l - 7 * m + 114) % 31 + 1;
    ymd(year, month as u32, day as u32)
}

/// Parse a strict `YYYY-MM-DD`.
fn parse_date(text: &str) -> Option<NaiveDate> {
    let b = text.as_bytes();
    let shape_ok = b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit());
    if !shape_ok {
        return None;
    }
    NaiveDate::parse_from_str(text, "%Y-%m-%d").ok()
}

impl Calendar {
    /// The built-in Nigerian public holidays (days off) for 2024-2028.
    pub fn nigeria() -> Calendar {
        let mut days: BTreeSet<NaiveDate> = BTreeSet::new();
        for &(y, m, d, _name) in ISLAMIC_HOLIDAYS {
            days.insert(ymd(y, m, d));
        }
        for year in BUILTIN_FIRST_YEAR..=BUILTIN_LAST_YEAR {
            let easter = easter_sunday(year);
            days.insert(easter - Duration::days(2)); // Good Friday
            days.insert(easter + Duration::days(1)); // Easter Monday
            for &(m, d, _name) in FIXED_HOLIDAYS {
                let date = ymd(year, m, d);
                if is_weekend(date) {
                    continue;
                }
                days.insert(date);
            }
        }
        // Substitutes, in date order, after every weekday holiday is known:
        // the next working day that is not already a holiday (so Christmas on
        // Saturday and Boxing Day on Sunday give Monday and Tuesday).
        for year in BUILTIN_FIRST_YEAR..=BUILTIN_LAST_YEAR {
            for &(m, d, _name) in FIXED_HOLIDAYS {
                let date = ymd(year, m, d);
                if !is_weekend(date) {
                    continue;
                }
                let mut sub = date + Duration::days(1);
                while is_weekend(sub) || days.contains(&sub) {
                    sub += Duration::days(1);
                }
                days.insert(sub);
            }
        }
        Calendar { holidays: days }
    }

    /// Parse a holidays list: one `YYYY-MM-DD` a line; blank lines and `#`
    /// comments (whole-line or trailing) are ignored. The list replaces the
    /// built-in holidays. Errors name the 1-based line number.
    pub fn parse(text: &str) -> Result<Calendar, String> {
        let mut holidays = BTreeSet::new();
        for (index, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            match parse_date(line) {
                Some(date) => {
                    holidays.insert(date);
                }
                None => {
                    return Err(format!(
                        "line {}: invalid date {:?} (expected YYYY-MM-DD)",
                        index + 1,
                        line
                    ))
                }
            }
        }
        Ok(Calendar { holidays })
    }

    /// Load a holidays file (`--holidays FILE`), see [`Calendar::parse`].
    pub fn from_file(path: impl AsRef<Path>) -> Result<Calendar, String> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("holidays file {}: {e}", path.display()))?;
        Calendar::parse(&text).map_err(|e| format!("holidays file {}: {e}", path.display()))
    }
}
