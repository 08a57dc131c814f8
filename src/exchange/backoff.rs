//! The wait before a failed notice delivery is tried again: exponential growth to a cap, less
//! a random part the caller supplies, so the rule is a pure function tested on its own.

use std::time::Duration;

/// The wait after the `tries`-th failure: `first` doubled per failure after the first, at most
/// `max`, less up to a quarter by `noise` (in `0.0..=1.0`; the caller draws it, so retries of
/// many deliveries spread). Attempts 0 and 1 wait `first`; doubling stops after 20 failures
/// and saturates instead of overflowing. Noise outside the range is clamped and NaN counts as
/// the middle, so every input gives a wait.
pub(crate) fn backoff(tries: u32, first: Duration, max: Duration, noise: f64) -> Duration {
    let doubled = first.saturating_mul(1u32 << tries.saturating_sub(1).min(20));
    let wait = doubled.min(max);
    let noise = if noise.is_nan() {
        0.5
    } else {
        noise.clamp(0.0, 1.0)
    };
    // `mul_f64` would panic where rounding takes a wait near `Duration::MAX` past it.
    Duration::try_from_secs_f64(wait.as_secs_f64() * (1.0 - 0.25 * noise)).unwrap_or(wait)
}

#[cfg(test)]
mod tests {
    use super::backoff;
    use std::time::Duration;

    const FIRST: Duration = Duration::from_secs(10);
    const MAX: Duration = Duration::from_secs(3600);

    #[test]
    fn the_first_failures_wait_the_first_delay() {
        assert_eq!(backoff(0, FIRST, MAX, 0.0), FIRST);
        assert_eq!(backoff(1, FIRST, MAX, 0.0), FIRST);
    }

    #[test]
    fn each_further_failure_doubles_the_wait() {
        let waits: Vec<u64> = (1..=6)
            .map(|t| backoff(t, FIRST, MAX, 0.0).as_secs())
            .collect();
        assert_eq!(waits, [10, 20, 40, 80, 160, 320]);
    }

    #[test]
    fn the_wait_stops_at_the_maximum() {
        assert_eq!(backoff(9, FIRST, MAX, 0.0), Duration::from_secs(2560));
        assert_eq!(backoff(10, FIRST, MAX, 0.0), MAX);
        assert_eq!(backoff(30, FIRST, MAX, 0.0), MAX);
    }

    #[test]
    fn jitter_takes_off_at_most_a_quarter() {
        let wait = Duration::from_secs(80);
        assert_eq!(backoff(4, FIRST, MAX, 1.0), wait.mul_f64(0.75));
        assert_eq!(backoff(4, FIRST, MAX, 0.5), wait.mul_f64(0.875));
        for i in 0..=100 {
            let w = backoff(4, FIRST, MAX, f64::from(i) / 100.0);
            assert!(w <= wait && w >= wait.mul_f64(0.75), "{w:?} at noise {i}%");
        }
    }

    #[test]
    fn noise_out_of_range_is_clamped() {
        assert_eq!(backoff(1, FIRST, MAX, -3.0), FIRST);
        assert_eq!(backoff(1, FIRST, MAX, 7.0), FIRST.mul_f64(0.75));
        assert_eq!(backoff(1, FIRST, MAX, f64::NAN), FIRST.mul_f64(0.875));
    }

    #[test]
    fn large_attempt_counts_and_delays_saturate_instead_of_overflowing() {
        assert_eq!(backoff(u32::MAX, FIRST, MAX, 0.0), MAX);
        assert_eq!(
            backoff(u32::MAX, Duration::MAX, Duration::MAX, 0.0),
            Duration::MAX
        );
        assert_eq!(backoff(21, FIRST, Duration::MAX, 0.0), FIRST * (1 << 20));
        assert_eq!(backoff(40, FIRST, Duration::MAX, 0.0), FIRST * (1 << 20));
    }
}
