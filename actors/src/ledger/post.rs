//! Posting: [`post`] checks an entry against the balances and computes
//! each line's `balance_after`; the ledger's invariants are assertions
//! here (an entry balances, its lines chain, loaded balances match their
//! newest lines): a broken one is a programmer error, never a 500.

use super::*;

/// The posted result of an entry: its lines and the balances they leave.
#[derive(Debug, Clone)]
pub struct Posting {
    pub lines: Vec<LedgerLine>,
    pub balances: Vec<(BalanceKey, i64)>,
}

/// Checks `entry` against `balances` and computes its lines. Pure.
pub fn post(
    balances: &HashMap<BalanceKey, i64>,
    merchant: Uuid,
    mode: Mode,
    entry: &EntrySpec,
    mut next_id: impl FnMut() -> u64,
    now: DateTime<Utc>,
) -> DomainResult<Posting> {
    assert_entry_balances(entry);
    let mut working: HashMap<BalanceKey, i64> = HashMap::new();
    let mut lines = Vec::with_capacity(entry.lines.len());
    for spec in &entry.lines {
        let key = (spec.brand, spec.currency, spec.bucket);
        let before = *working
            .get(&key)
            .unwrap_or_else(|| balances.get(&key).unwrap_or(&0));
        let after = before
            .checked_add(spec.amount)
            .ok_or_else(|| DomainError::internal("balance overflow"))?;
        if after < 0 && spec.amount < 0 && !entry.allow_negative {
            return Err(DomainError::state(
                ErrorCode::InsufficientFunds,
                format!(
                    "the {} {} balance is {before}, short of {}",
                    spec.currency.as_str(),
                    spec.bucket.as_str(),
                    -spec.amount
                ),
            ));
        }
        working.insert(key, after);
        lines.push(LedgerLine {
            id: next_id(),
            merchant,
            mode,
            brand: spec.brand,
            currency: spec.currency,
            bucket: spec.bucket,
            amount: spec.amount,
            balance_after: after,
            entry_type: entry.entry_type,
            gross: spec.gross,
            fee: spec.fee,
            source: entry.source,
            description: entry.description.clone(),
            created_at: now,
        });
    }
    let posting = Posting {
        lines,
        balances: working.into_iter().collect(),
    };
    assert_posting_follows(balances, &posting);
    Ok(posting)
}

/// Asserts that `entry` balances: it has lines, and an entry that only moves
/// money between buckets (a release) sums to zero in each currency. A broken
/// entry is a programmer error, so this stops the posting (fail-stop: the
/// ledger actor restarts and nothing is written) rather than answering 500.
pub fn assert_entry_balances(entry: &EntrySpec) {
    assert!(
        !entry.lines.is_empty(),
        "ledger invariant: a {} entry needs at least one line",
        entry.entry_type.as_str()
    );
    if entry.entry_type.crosses_the_boundary() {
        return;
    }
    for c in Currency::ALL {
        // In i128: lines of extreme amounts cannot overflow the check.
        let sum: i128 = entry
            .lines
            .iter()
            .filter(|l| l.currency == c)
            .map(|l| l.amount as i128)
            .sum();
        assert!(
            sum == 0,
            "ledger invariant: a {} entry must balance; its {} lines sum to {sum}",
            entry.entry_type.as_str(),
            c.as_str()
        );
    }
}

/// Asserts that a posting's lines chain from `before`: in each bucket the
/// first line's `balance_after` is the old balance plus its amount, each next
/// line's is the previous one's plus its amount, and the balance the posting
/// leaves is its last line's `balance_after`.
fn assert_posting_follows(before: &HashMap<BalanceKey, i64>, posting: &Posting) {
    let mut running: HashMap<BalanceKey, i64> = HashMap::new();
    for l in &posting.lines {
        let key = (l.brand, l.currency, l.bucket);
        let prev = running
            .get(&key)
            .or_else(|| before.get(&key))
            .copied()
            .unwrap_or(0);
        assert!(
            prev.checked_add(l.amount) == Some(l.balance_after),
            "ledger invariant: line {} moves {} {} by {} from {prev} but records {}",
            l.id,
            l.currency.as_str(),
            l.bucket.as_str(),
            l.amount,
            l.balance_after
        );
        running.insert(key, l.balance_after);
    }
    assert_eq!(
        running.len(),
        posting.balances.len(),
        "ledger invariant: a posting leaves a balance for each bucket it moves"
    );
    for (key, amount) in &posting.balances {
        assert_eq!(
            running.get(key),
            Some(amount),
            "ledger invariant: the balance a posting leaves is its last line's balance_after"
        );
    }
}

/// How many of the newest lines [`assert_loaded_balances`] reads: balances
/// are kept running (one row per bucket), so activation checks the recent
/// chain of lines against them instead of summing the whole history.
pub const LOAD_CHECK_LINES: usize = 1_000;

/// Asserts that loaded `balances` agree with the newest lines (given newest
/// first): each bucket with a line has a balance row equal to its newest
/// line's `balance_after`, consecutive lines of a bucket chain (the older
/// line's `balance_after` plus the newer line's amount is the newer line's
/// `balance_after`), and when `complete` (the lines are the whole history) a
/// bucket without lines has a zero balance.
pub fn assert_loaded_balances(
    balances: &HashMap<BalanceKey, i64>,
    newest_first: &[LedgerLine],
    complete: bool,
) {
    // The newer line of each bucket seen so far.
    let mut newer: HashMap<BalanceKey, &LedgerLine> = HashMap::new();
    for l in newest_first {
        let key = (l.brand, l.currency, l.bucket);
        match newer.get(&key) {
            None => assert_eq!(
                balances.get(&key),
                Some(&l.balance_after),
                "ledger invariant: the {} {} balance of brand {} is not its newest line's ({})",
                l.currency.as_str(),
                l.bucket.as_str(),
                l.brand,
                l.id
            ),
            Some(n) => assert!(
                l.balance_after.checked_add(n.amount) == Some(n.balance_after),
                "ledger invariant: line {} ({} after {}) does not follow line {} ({})",
                n.id,
                n.balance_after,
                n.amount,
                l.id,
                l.balance_after
            ),
        }
        newer.insert(key, l);
    }
    if complete {
        for (key, amount) in balances {
            assert!(
                newer.contains_key(key) || *amount == 0,
                "ledger invariant: the {} {} balance of brand {} is {amount} with no line",
                key.1.as_str(),
                key.2.as_str(),
                key.0
            );
        }
    }
}

/// Posts several entries in order, each seeing the balances the previous
/// left; all or nothing. Pure.
pub fn post_all(
    balances: &HashMap<BalanceKey, i64>,
    merchant: Uuid,
    mode: Mode,
    entries: &[EntrySpec],
    mut next_id: impl FnMut() -> u64,
    now: DateTime<Utc>,
) -> DomainResult<Posting> {
    let mut overlay: HashMap<BalanceKey, i64> = HashMap::new();
    let mut lines = Vec::new();
    for entry in entries {
        let view = |k: &BalanceKey| overlay.get(k).or_else(|| balances.get(k)).copied();
        let mut current: HashMap<BalanceKey, i64> = HashMap::new();
        for l in &entry.lines {
            let k = (l.brand, l.currency, l.bucket);
            if let Some(v) = view(&k) {
                current.insert(k, v);
            }
        }
        let p = post(&current, merchant, mode, entry, &mut next_id, now)?;
        lines.extend(p.lines);
        overlay.extend(p.balances);
    }
    Ok(Posting {
        lines,
        balances: overlay.into_iter().collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(bucket: Bucket, amount: i64) -> LineSpec {
        LineSpec {
            brand: Uuid::nil(),
            currency: Currency::NGN,
            bucket,
            amount,
            gross: None,
            fee: None,
        }
    }

    fn entry(t: EntryType, lines: Vec<LineSpec>) -> EntrySpec {
        EntrySpec {
            entry_type: t,
            source: Uuid::nil(),
            description: String::new(),
            lines,
            allow_negative: false,
        }
    }

    #[test]
    fn balance_after_follows_each_line() {
        let mut balances = HashMap::new();
        balances.insert((Uuid::nil(), Currency::NGN, Bucket::Pending), 500);
        let mut id = 0;
        let p = post(
            &balances,
            Uuid::nil(),
            Mode::Test,
            &entry(
                EntryType::Release,
                vec![line(Bucket::Pending, -300), line(Bucket::Available, 300)],
            ),
            || {
                id += 1;
                id
            },
            Utc::now(),
        )
        .unwrap();
        assert_eq!(p.lines[0].balance_after, 200);
        assert_eq!(p.lines[1].balance_after, 300);
        assert_eq!(p.lines[0].id + 1, p.lines[1].id);
    }

    #[test]
    fn an_entry_that_would_overdraw_a_bucket_is_refused() {
        let e = post(
            &HashMap::new(),
            Uuid::nil(),
            Mode::Test,
            &entry(
                EntryType::Release,
                vec![line(Bucket::Pending, -1), line(Bucket::Available, 1)],
            ),
            || 1,
            Utc::now(),
        )
        .unwrap_err();
        assert_eq!(e.code, "insufficient_funds");
    }

    fn post_one(balances: &HashMap<BalanceKey, i64>, e: EntrySpec) -> DomainResult<Posting> {
        let mut id = 0;
        post(
            balances,
            Uuid::nil(),
            Mode::Test,
            &e,
            || {
                id += 1;
                id
            },
            Utc::now(),
        )
    }

    #[test]
    #[should_panic(expected = "a release entry must balance")]
    fn a_release_that_does_not_balance_is_a_programmer_error() {
        let _ = post_one(
            &HashMap::new(),
            entry(EntryType::Release, vec![line(Bucket::Available, 1)]),
        );
    }

    #[test]
    #[should_panic(expected = "needs at least one line")]
    fn an_entry_without_lines_is_a_programmer_error() {
        let _ = post_one(&HashMap::new(), entry(EntryType::Payment, vec![]));
    }

    #[test]
    #[should_panic(expected = "a release entry must balance")]
    fn extreme_lines_that_do_not_balance_panic_never_wrap() {
        // Lines whose sum overflows i64 (and does not balance).
        let _ = post_one(
            &HashMap::new(),
            entry(
                EntryType::Release,
                vec![
                    line(Bucket::Pending, i64::MAX),
                    line(Bucket::Available, i64::MAX),
                ],
            ),
        );
    }

    #[test]
    fn an_entry_crossing_the_boundary_need_not_sum_to_zero() {
        let p = post_one(
            &HashMap::new(),
            entry(EntryType::Payment, vec![line(Bucket::Pending, 700)]),
        )
        .unwrap();
        assert_eq!(p.lines[0].balance_after, 700);
    }

    fn posted(balances: &HashMap<BalanceKey, i64>, lines: Vec<LineSpec>) -> Posting {
        post_one(balances, entry(EntryType::Payment, lines)).unwrap()
    }

    #[test]
    fn loaded_balances_that_match_their_lines_pass() {
        let first = posted(&HashMap::new(), vec![line(Bucket::Pending, 500)]);
        let before: HashMap<_, _> = first.balances.iter().copied().collect();
        let second = posted(&before, vec![line(Bucket::Pending, -200)]);
        let balances: HashMap<_, _> = second.balances.iter().copied().collect();
        let newest_first = vec![second.lines[0].clone(), first.lines[0].clone()];
        assert_loaded_balances(&balances, &newest_first, true);
        assert_loaded_balances(&balances, &newest_first[..1], false);
    }

    #[test]
    #[should_panic(expected = "is not its newest line's")]
    fn a_loaded_balance_unlike_its_newest_line_panics() {
        let p = posted(&HashMap::new(), vec![line(Bucket::Pending, 500)]);
        let mut balances: HashMap<_, _> = p.balances.iter().copied().collect();
        *balances.values_mut().next().unwrap() += 1;
        assert_loaded_balances(&balances, &p.lines, true);
    }

    #[test]
    #[should_panic(expected = "does not follow line")]
    fn loaded_lines_that_do_not_chain_panic() {
        let first = posted(&HashMap::new(), vec![line(Bucket::Pending, 500)]);
        let mut second = posted(&HashMap::new(), vec![line(Bucket::Pending, 100)]);
        second.lines[0].id = 2;
        let balances: HashMap<_, _> = second.balances.iter().copied().collect();
        assert_loaded_balances(
            &balances,
            &[second.lines[0].clone(), first.lines[0].clone()],
            true,
        );
    }

    #[test]
    #[should_panic(expected = "with no line")]
    fn a_loaded_balance_without_lines_panics() {
        let mut balances = HashMap::new();
        balances.insert((Uuid::nil(), Currency::NGN, Bucket::Available), 10);
        assert_loaded_balances(&balances, &[], true);
    }

    #[test]
    #[should_panic(expected = "records")]
    fn a_posting_whose_lines_do_not_follow_panics() {
        let mut p = posted(&HashMap::new(), vec![line(Bucket::Pending, 500)]);
        p.lines[0].balance_after = 499;
        assert_posting_follows(&HashMap::new(), &p);
    }

    #[test]
    fn a_balance_past_i64_max_is_refused() {
        // A balance that would pass i64::MAX is refused.
        let mut balances = HashMap::new();
        balances.insert((Uuid::nil(), Currency::NGN, Bucket::Pending), 1);
        balances.insert((Uuid::nil(), Currency::NGN, Bucket::Available), i64::MAX);
        let e = post(
            &balances,
            Uuid::nil(),
            Mode::Test,
            &entry(
                EntryType::Release,
                vec![line(Bucket::Pending, -1), line(Bucket::Available, 1)],
            ),
            || 1,
            Utc::now(),
        )
        .unwrap_err();
        assert_eq!(e.code, "internal_error");
    }
}
