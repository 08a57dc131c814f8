//! Shells, the exchange's own currency (docs/guide/marketplace.md#shells): the operator grants
//! them to agents and executors, and every movement is a line of the ledger
//! (`store::ledger`). Grants and balances are here; escrow of a request's compensation
//! (`exchange::escrow`) builds on them.

use crate::exchange::{Error, Exchange};
use crate::protocol::error::ProtocolError;
use crate::protocol::ids::ThreadRef;
use crate::store::ledger::{Balances, Movement, OPERATOR, Refused};

/// The marketplace: shells granted and held, and the escrow of requests' compensation (its
/// taking, carrying, settling and sweeping, in `escrow`). One of the parts `Exchange` hands
/// out ([`Exchange::marketplace`]).
#[derive(Clone, Copy)]
pub struct Marketplace<'a> {
    pub(super) ex: &'a Exchange,
}

impl Exchange {
    /// The marketplace: grants, balances and escrow.
    pub fn marketplace(&self) -> Marketplace<'_> {
        Marketplace { ex: self }
    }
}

/// Most shells one grant may give.
pub(crate) const MOST_GRANTED: i64 = 1_000_000_000;

impl Marketplace<'_> {
    /// Grants `shells` from the operator to the account of `to` (an agent or executor id).
    pub fn grant_shells(
        &self,
        to: &str,
        shells: i64,
        note: Option<&str>,
    ) -> Result<Movement, Error> {
        let to = to.trim();
        if ThreadRef::parse(to).is_err() || crate::store::ledger::reserved_account(to) {
            return Err(ProtocolError::invalid(
                "id",
                format!(
                    "{to:?} is not an account shells can be granted to (an agent or executor id)"
                ),
            )
            .into());
        }
        if !(1..=MOST_GRANTED).contains(&shells) {
            return Err(ProtocolError::invalid(
                "shells",
                format!("{shells} is not a number of shells to grant (1 to {MOST_GRANTED})"),
            )
            .into());
        }
        let now = self.ex.now();
        let nonce: String = self
            .ex
            .store()
            .random_bytes(4)?
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let movement = Movement {
            id: format!("grant-{}-{nonce}", now.timestamp_millis()),
            at: now,
            from: OPERATOR.to_owned(),
            to: to.to_owned(),
            shells,
            kind: "grant".to_owned(),
            thread: None,
            note: note
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_owned),
        };
        self.record(&movement, &|_| Ok(()))?;
        Ok(movement)
    }

    /// Every account's balance.
    pub fn shell_balances(&self) -> Result<Balances, Error> {
        Ok(self.ex.store().balances()?)
    }

    /// Records `movement` once (see [`crate::store::Store::record_movement`]).
    pub(crate) fn record(
        &self,
        movement: &Movement,
        check: crate::store::ledger::Check<'_>,
    ) -> Result<bool, Error> {
        match self.ex.store().record_movement(movement, check) {
            Ok(recorded) => Ok(recorded),
            Err(Refused::Check(why)) => Err(ProtocolError::invalid("shells", why).into()),
            Err(Refused::Store(e)) => Err(e.into()),
        }
    }
}
