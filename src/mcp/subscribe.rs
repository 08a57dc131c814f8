//! Resource update notifications: which committed change concerns which resource URI, for
//! both protocol eras (legacy `resources/subscribe` and modern `subscriptions/listen`).

use crate::exchange::ThreadChange;

/// Whether `change` concerns resource `uri` as `who` sees it.
pub(crate) fn concerns(uri: &str, change: &ThreadChange, who: &str) -> bool {
    let env = &change.envelope;
    let mine = env.requestor == who || env.executor.as_deref() == Some(who);
    match uri {
        "mess://pending" | "mess://history" => mine,
        _ => uri
            .strip_prefix("mess://request/")
            .or_else(|| uri.strip_prefix("thread://"))
            .is_some_and(|id| {
                id == change.thread.as_str() || (mine && env.client_id.as_deref() == Some(id))
            }),
    }
}
