//! The storage contract, feature by feature: every method of [`crate::store::Store`] sends its
//! call to the backend in effect (`files` or `postgres`) and hands back the same types from
//! either. Nothing here stores anything itself; the two backends never call each other.

mod archive;
mod fsck;
mod keys;
mod ledger;
mod nodes;
mod outbox;
mod registry;
mod short;

pub use nodes::{FOLLOW_PASS_EVERY, Following};
