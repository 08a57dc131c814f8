//! The exchange's clock: the one place that reads the system time, so tests can fix it.

use std::sync::Mutex;

use chrono::{DateTime, TimeDelta, Utc};

/// A source of the current time.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current instant.
    fn now(&self) -> DateTime<Utc>;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that stands still until told to move; for tests.
#[derive(Debug)]
pub struct FixedClock {
    now: Mutex<DateTime<Utc>>,
}

impl FixedClock {
    /// A clock showing `now`.
    pub fn new(now: DateTime<Utc>) -> FixedClock {
        FixedClock {
            now: Mutex::new(now),
        }
    }

    /// Sets the time.
    pub fn set(&self, now: DateTime<Utc>) {
        if let Ok(mut guard) = self.now.lock() {
            *guard = now;
        }
    }

    /// Moves the time forward.
    pub fn advance(&self, by: TimeDelta) {
        if let Ok(mut guard) = self.now.lock() {
            *guard += by;
        }
    }
}

impl Clock for FixedClock {
    fn now(&self) -> DateTime<Utc> {
        // A poisoned lock still holds a valid instant.
        match self.now.lock() {
            Ok(g) => *g,
            Err(p) => *p.into_inner(),
        }
    }
}
