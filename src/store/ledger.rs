//! The shells ledger: an append-only, double-entry record of every movement of shells between
//! accounts (a principal's id, `escrow:REF` for a request's escrow, `operator` for grants), one
//! YAML document per movement in `ledger/YYYY-MM.yaml`, so `read_yaml_auto` and people read it.
//! Each movement has an id that says what it is for (`escrow-REF`, `settle-REF`), and a
//! movement whose id is already recorded is not recorded again: a release or refund happens
//! once however often it is asked for. Writes are serialized by the ledger lock and replace the
//! month's file atomically.

use std::collections::BTreeMap;

use crate::protocol::time::{self, Timestamp};
use crate::protocol::value::{Map, Value};
use crate::store::error::StoreError;

/// The account grants come from; its balance is minus everything granted.
pub const OPERATOR: &str = "operator";

/// One movement of shells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Movement {
    /// What it is for; recorded once.
    pub id: String,
    /// When it was recorded.
    pub at: Timestamp,
    /// The account debited.
    pub from: String,
    /// The account credited.
    pub to: String,
    /// How many (above zero).
    pub shells: i64,
    /// `grant`, `escrow`, `release` or `refund`.
    pub kind: String,
    /// The thread it belongs to, if any.
    pub thread: Option<String>,
    /// Why, in words.
    pub note: Option<String>,
}

/// Whether `id` names an account of the ledger's own (`operator`, an `escrow:`), which no
/// principal may hold.
pub fn reserved_account(id: &str) -> bool {
    id == OPERATOR || id.starts_with("escrow:")
}

/// Balances by account.
pub type Balances = BTreeMap<String, i64>;

impl Movement {
    pub(crate) fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("id", Value::str(&self.id));
        m.insert("at", Value::str(time::format_timestamp(&self.at)));
        m.insert("from", Value::str(&self.from));
        m.insert("to", Value::str(&self.to));
        m.insert("shells", Value::Int(self.shells));
        m.insert("kind", Value::str(&self.kind));
        m.insert_opt("thread", self.thread.as_deref().map(Value::str));
        m.insert_opt("note", self.note.as_deref().map(Value::str));
        Value::Map(m)
    }

    pub(crate) fn from_value(v: &Value) -> Option<Movement> {
        let m = v.as_map()?;
        let text = |k: &str| m.get(k).and_then(Value::scalar_text);
        let shells = match m.get("shells")? {
            Value::Int(n) if *n > 0 => *n,
            _ => return None,
        };
        Some(Movement {
            id: text("id")?,
            at: time::parse_timestamp_lenient(&text("at")?).ok()?,
            from: text("from")?,
            to: text("to")?,
            shells,
            kind: text("kind")?,
            thread: text("thread"),
            note: text("note"),
        })
    }
}

/// What a movement about to be recorded is checked against: the balances before it.
pub type Check<'a> = &'a dyn Fn(&Balances) -> Result<(), String>;

/// Why a movement was not recorded.
#[derive(Debug)]
pub enum Refused {
    /// Its check failed (a balance too small): why.
    Check(String),
    /// The ledger could not be read or written.
    Store(StoreError),
}

impl From<StoreError> for Refused {
    fn from(e: StoreError) -> Refused {
        Refused::Store(e)
    }
}

/// Whether `movement` may be recorded on the balances `before` it: `check` passes, and an
/// escrow pays out at most what it holds, whoever asks.
pub(crate) fn admit(
    movement: &Movement,
    before: &Balances,
    check: Check<'_>,
) -> Result<(), Refused> {
    check(before).map_err(Refused::Check)?;
    if movement.from.starts_with("escrow:") {
        let held = before.get(&movement.from).copied().unwrap_or_default();
        if held < movement.shells {
            return Err(Refused::Check(format!(
                "{} holds {held} shells, not the {} asked of it",
                movement.from, movement.shells
            )));
        }
    }
    Ok(())
}

/// What each kind of movement may move, from which account to which: the only movements the
/// exchange itself records (a grant from the operator; a request's escrow; an escrow carried
/// into a new thread; an escrow released to an executor, shared with a delegator, or refunded).
const MOVEMENT_SHAPES: [(&str, Account, Account); 6] = [
    ("grant", Account::Operator, Account::Principal),
    ("escrow", Account::Principal, Account::Escrow),
    ("carry", Account::Escrow, Account::Escrow),
    ("release", Account::Escrow, Account::Principal),
    ("share", Account::Escrow, Account::Principal),
    ("refund", Account::Escrow, Account::Principal),
];

/// The kinds of account the ledger knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Account {
    /// `operator`, where grants come from.
    Operator,
    /// `escrow:REF`, a request's escrow.
    Escrow,
    /// An agent's or executor's id.
    Principal,
}

impl Account {
    fn of(name: &str) -> Option<Account> {
        if name == OPERATOR {
            return Some(Account::Operator);
        }
        if let Some(thread) = name.strip_prefix("escrow:") {
            return crate::protocol::ids::ThreadRef::parse(thread)
                .is_ok()
                .then_some(Account::Escrow);
        }
        crate::protocol::ids::ThreadRef::parse(name)
            .is_ok()
            .then_some(Account::Principal)
    }
}

/// Replays `incoming` movements, in order, on top of the `recorded` ones, under the ledger's
/// own rules, as an import must (a foreign ledger is trusted no more than a key holder): each
/// is of a kind the exchange records, between the accounts that kind moves between; no account
/// but `operator` goes below zero (so an escrow never pays out more than it took); each id is
/// recorded once (one already recorded is skipped when it is the same movement and refused
/// when it is not). Returns the movements to record, or every refusal, each naming its id.
pub fn replay(recorded: &[Movement], incoming: &[Movement]) -> Result<Vec<Movement>, Vec<String>> {
    let mut balances = balances_of(recorded);
    let known: BTreeMap<&str, &Movement> = recorded.iter().map(|m| (m.id.as_str(), m)).collect();
    let mut seen = std::collections::HashSet::new();
    let mut fresh = Vec::new();
    let mut refused = Vec::new();
    for m in incoming {
        let id = &m.id;
        if !seen.insert(id.as_str()) {
            refused.push(format!("movement {id} appears twice"));
            continue;
        }
        if let Some(before) = known.get(id.as_str()) {
            if *before != m {
                refused.push(format!(
                    "movement {id} differs from the movement of that id already recorded"
                ));
            }
            continue;
        }
        let shape = (Account::of(&m.from), Account::of(&m.to));
        let fits = MOVEMENT_SHAPES
            .iter()
            .any(|(kind, from, to)| *kind == m.kind && shape == (Some(*from), Some(*to)));
        if !fits || m.from == m.to {
            refused.push(format!(
                "movement {id}: a {:?} of {} from {} to {} is not a movement the exchange records",
                m.kind, m.shells, m.from, m.to
            ));
            continue;
        }
        let held = balances.get(&m.from).copied().unwrap_or_default();
        if m.from != OPERATOR && held < m.shells {
            refused.push(format!(
                "movement {id}: {} holds {held} shells, not the {} it moves",
                m.from, m.shells
            ));
            continue;
        }
        *balances.entry(m.from.clone()).or_default() -= m.shells;
        *balances.entry(m.to.clone()).or_default() += m.shells;
        fresh.push(m.clone());
    }
    if refused.is_empty() {
        Ok(fresh)
    } else {
        Err(refused)
    }
}

/// Balances after `movements`.
pub fn balances_of(movements: &[Movement]) -> Balances {
    let mut out = Balances::new();
    for m in movements {
        *out.entry(m.from.clone()).or_default() -= m.shells;
        *out.entry(m.to.clone()).or_default() += m.shells;
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tempfile::TempDir;

    use super::*;

    fn movement(id: &str, from: &str, to: &str, shells: i64) -> Movement {
        Movement {
            id: id.to_owned(),
            at: time::parse_timestamp("2026-11-27T12:00:00Z").unwrap(),
            from: from.to_owned(),
            to: to.to_owned(),
            shells,
            kind: "grant".to_owned(),
            thread: None,
            note: None,
        }
    }

    #[test]
    fn a_movement_is_recorded_once_and_checks_see_the_balances_before_it() {
        let dir = TempDir::new().unwrap();
        let store = crate::store::testing::store_in(dir.path());
        assert!(store.balances().unwrap().is_empty());
        let grant = movement("g1", OPERATOR, "agent", 10);
        assert!(store.record_movement(&grant, &|_| Ok(())).unwrap());
        assert!(!store.record_movement(&grant, &|_| Ok(())).unwrap());
        let spend = movement("s1", "agent", "escrow:x", 15);
        let refused = store.record_movement(&spend, &|b| {
            if b.get("agent").copied().unwrap_or_default() >= 15 {
                Ok(())
            } else {
                Err("short".to_owned())
            }
        });
        assert!(matches!(refused, Err(Refused::Check(ref why)) if why == "short"));
        let b = store.balances().unwrap();
        assert_eq!((b["agent"], b[OPERATOR]), (10, -10));
        assert_eq!(store.ledger().unwrap().len(), 1);
    }

    #[test]
    fn a_foreign_ledger_is_replayed_under_the_ledgers_own_rules() {
        let grant = movement("g1", OPERATOR, "agent", 10);
        let mut escrow = movement("escrow-2026-11-27-001", "agent", "escrow:2026-11-27-001", 8);
        escrow.kind = "escrow".to_owned();
        let mut release = movement("settle-2026-11-27-001", "escrow:2026-11-27-001", "robot", 8);
        release.kind = "release".to_owned();
        let fine = vec![grant.clone(), escrow.clone(), release.clone()];
        assert_eq!(replay(&[], &fine).unwrap(), fine);
        // Imported twice: what is recorded already is skipped.
        assert_eq!(replay(&fine, &fine).unwrap(), Vec::<Movement>::new());
        let refusals = |incoming: Vec<Movement>| replay(&[], &incoming).unwrap_err().join("; ");
        // An account below zero, an escrow paying more than it took.
        let mut overdrawn = release.clone();
        overdrawn.shells = 9;
        let why = refusals(vec![grant.clone(), escrow.clone(), overdrawn]);
        assert!(why.contains("holds 8 shells, not the 9"), "{why}");
        let why = refusals(vec![escrow.clone()]);
        assert!(why.contains("agent holds 0 shells"), "{why}");
        // The same id twice, or another movement under a recorded id.
        let why = refusals(vec![grant.clone(), grant.clone()]);
        assert!(why.contains("g1 appears twice"), "{why}");
        let mut changed = grant.clone();
        changed.shells = 1000;
        let why = replay(&fine, &[changed]).unwrap_err().join("; ");
        assert!(why.contains("differs"), "{why}");
        // Shells made out of nothing: only the operator grants, and only to a principal.
        let mut minted = movement("m1", "robot", "agent", 5);
        minted.kind = "grant".to_owned();
        let mut to_operator = movement("m2", "agent", OPERATOR, 5);
        to_operator.kind = "refund".to_owned();
        let mut from_escrow_as_grant = movement("m3", OPERATOR, "escrow:2026-11-27-001", 5);
        from_escrow_as_grant.kind = "grant".to_owned();
        let mut bad_account = movement("m4", OPERATOR, "../etc", 5);
        bad_account.kind = "grant".to_owned();
        for bad in [minted, to_operator, from_escrow_as_grant, bad_account] {
            let why = refusals(vec![grant.clone(), bad.clone()]);
            assert!(
                why.contains("not a movement the exchange records"),
                "{bad:?}: {why}"
            );
        }
    }

    #[test]
    fn concurrent_writers_lose_no_movement() {
        let dir = TempDir::new().unwrap();
        let store = Arc::new(crate::store::testing::store_in(dir.path()));
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let store = store.clone();
                std::thread::spawn(move || {
                    for i in 0..10 {
                        let m = movement(&format!("g{t}-{i}"), OPERATOR, &format!("a{t}"), 1);
                        assert!(store.record_movement(&m, &|_| Ok(())).unwrap());
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let b = store.balances().unwrap();
        assert_eq!(b[OPERATOR], -80);
        assert_eq!(b.values().sum::<i64>(), 0);
        assert_eq!(store.ledger().unwrap().len(), 80);
    }
}
