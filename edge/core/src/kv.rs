//! The storage the Worker gives the engine: a key-value map with ordered prefix scans, kept by
//! the exchange's Durable Object in its SQLite storage (synchronous calls, one transaction per
//! request), and an in-memory map for tests.

use std::collections::BTreeMap;

/// A synchronous key-value map. Every write of one request commits together or not at all
/// (the Durable Object runs the engine inside `transactionSync`).
pub trait Kv {
    /// The value of `key`.
    fn get(&self, key: &str) -> Option<String>;
    /// Sets `key` to `value`.
    fn put(&mut self, key: &str, value: &str);
    /// Removes `key`.
    fn delete(&mut self, key: &str);
    /// Every entry whose key starts with `prefix`, in key order.
    fn scan(&self, prefix: &str) -> Vec<(String, String)>;
}

/// A map in memory (tests, and the engine's own checks).
#[derive(Debug, Default, Clone)]
pub struct MemKv {
    /// The entries.
    pub map: BTreeMap<String, String>,
}

impl Kv for MemKv {
    fn get(&self, key: &str) -> Option<String> {
        self.map.get(key).cloned()
    }

    fn put(&mut self, key: &str, value: &str) {
        self.map.insert(key.to_owned(), value.to_owned());
    }

    fn delete(&mut self, key: &str) {
        self.map.remove(key);
    }

    fn scan(&self, prefix: &str) -> Vec<(String, String)> {
        self.map
            .range(prefix.to_owned()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}
