//! Exponential backoff with jitter for a unit whose sync failed: 1 s doubling to a 5 min cap,
//! each delay drawn uniformly from [d/2, d] ("equal jitter"), reset on success.

use std::time::Duration;

/// Backoff state of one unit.
#[derive(Debug, Clone)]
pub struct Backoff {
    next: Duration,
    base: Duration,
    cap: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self::new(Duration::from_secs(1), Duration::from_secs(300))
    }
}

impl Backoff {
    /// Starts at `base`, doubles per failure up to `cap`.
    pub fn new(base: Duration, cap: Duration) -> Self {
        Self { next: base, base, cap }
    }

    /// The delay before the next retry; doubles the one after it.
    pub fn next_delay(&mut self) -> Duration {
        let full = self.next;
        self.next = (self.next * 2).min(self.cap);
        let half = full / 2;
        half + half.mul_f64(rand::random::<f64>())
    }

    /// Back to `base` after a success.
    pub fn reset(&mut self) {
        self.next = self.base;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_cap_with_jitter() {
        let mut b = Backoff::default();
        let mut ceilings = Vec::new();
        for _ in 0..12 {
            let d = b.next_delay();
            ceilings.push(d);
        }
        assert!(ceilings[0] >= Duration::from_millis(500) && ceilings[0] <= Duration::from_secs(1));
        assert!(ceilings[1] >= Duration::from_secs(1) && ceilings[1] <= Duration::from_secs(2));
        assert!(ceilings.iter().all(|d| *d <= Duration::from_secs(300)));
        assert!(ceilings[11] >= Duration::from_secs(150));
    }

    #[test]
    fn success_resets_the_delay() {
        let mut b = Backoff::default();
        for _ in 0..5 {
            b.next_delay();
        }
        b.reset();
        assert!(b.next_delay() <= Duration::from_secs(1));
    }
}
