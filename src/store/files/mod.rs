//! The files backend (tier 0): every operation of the store on the home's own files, which are
//! the source of truth. A [`Files`] is a view of the home's layout, made by the store for each
//! call; it knows nothing of PostgreSQL (the other backend, `store::postgres`).

mod archive;
mod fsck;
mod keys;
mod known;
mod ledger;
mod outbox;
mod registry;
mod short;
mod threads;

pub(crate) use known::Known;
pub(crate) use threads::read_envelope_file;

use crate::protocol::envelope::Envelope;
use crate::store::Observer;
use crate::store::layout::Layout;

/// The files backend over one home: its layout, whom to tell of every thread written, and what
/// this process knows of the files already.
#[derive(Clone, Copy)]
pub(crate) struct Files<'a> {
    pub(crate) layout: &'a Layout,
    pub(crate) observer: Option<&'a Observer>,
    pub(crate) known: &'a Known,
}

impl Files<'_> {
    /// Where things live.
    pub(crate) fn layout(&self) -> &Layout {
        self.layout
    }

    /// Tells the observer about a thread just written.
    pub(crate) fn changed(&self, envelope: &Envelope) {
        if let Some(observer) = self.observer {
            observer(envelope);
        }
    }
}
