//! Short links for SMS (`/r/{code}`) and notification buttons: a random code mapped to a link
//! token in `.mess/short/<code>` (mode 0600; in tier 1 a row of the database, so any node
//! follows it), kept until the token expires.

/// Characters of a code: letters and digits, so it survives every SMS gateway.
pub(crate) const ALPHABET: &[u8; 62] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// Length of a code (12 of 62 characters is about 71 bits, beyond guessing over HTTP) and its
/// form: a notification's buttons carry the same codes.
pub use crate::protocol::buttons::{CODE_LEN, is_code};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_maps_to_its_token_until_it_expires_and_is_then_pruned() {
        let dir = tempfile::TempDir::new().unwrap();
        let store = crate::store::testing::store_in(dir.path());
        let code = store.save_short_link("tok.en.x", 1_000).unwrap();
        assert!(is_code(&code), "{code}");
        assert_eq!(
            store.short_link(&code, 999).unwrap().as_deref(),
            Some("tok.en.x")
        );
        assert_eq!(store.short_link(&code, 1_000).unwrap(), None);
        assert_eq!(store.short_link("../secret", 0).unwrap(), None);
        let other = store.save_short_link("t2", 5_000).unwrap();
        assert_ne!(code, other);
        assert_eq!(store.prune_short_links(2_000).unwrap(), 1);
        assert_eq!(
            store.short_link(&other, 2_000).unwrap().as_deref(),
            Some("t2")
        );
    }
}
