//! Rate limits (429 with `Retry-After`): per authenticated API user and
//! per client address, token buckets refilled continuously. Each node
//! counts its own requests: behind a load balancer over N nodes a client
//! may reach up to N times the limit (the balancer's own limits, if any,
//! apply before ours). 0 turns a limit off.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Requests per second and burst of one limit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rate {
    pub per_second: u32,
    pub burst: u32,
}

impl Rate {
    /// `per_second` with a burst of twice that; `None` when 0 (off).
    pub fn of(per_second: u32) -> Option<Rate> {
        (per_second > 0).then(|| Rate {
            per_second,
            burst: per_second.saturating_mul(2),
        })
    }
}

struct Bucket {
    tokens: f64,
    last: Instant,
}

/// Buckets kept before idle ones are dropped.
const MAX_KEYS: usize = 100_000;

struct Buckets<K> {
    rate: Option<Rate>,
    buckets: Mutex<HashMap<K, Bucket>>,
}

impl<K: Hash + Eq + Clone> Buckets<K> {
    fn new(rate: Option<Rate>) -> Self {
        Buckets {
            rate,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one token for `key`, or says how long until one is there.
    fn take(&self, key: &K, now: Instant) -> Result<(), Duration> {
        let Some(rate) = self.rate else {
            return Ok(());
        };
        let (per_second, burst) = (f64::from(rate.per_second), f64::from(rate.burst));
        let mut buckets = self
            .buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if buckets.len() >= MAX_KEYS && !buckets.contains_key(key) {
            // Full buckets hold no information: drop them.
            buckets.retain(|_, b| b.tokens + now.duration_since(b.last).as_secs_f64() * per_second < burst);
        }
        let bucket = buckets.entry(key.clone()).or_insert(Bucket {
            tokens: burst,
            last: now,
        });
        let refill = now.duration_since(bucket.last).as_secs_f64() * per_second;
        bucket.tokens = (bucket.tokens + refill).min(burst);
        bucket.last = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - bucket.tokens) / per_second))
        }
    }
}

/// Failed sign-ins one address may make in [`SIGN_IN_WINDOW`] before
/// its sign-ins are refused until the window ends.
pub const MAX_FAILED_SIGN_INS_PER_ADDRESS: u32 = 20;
pub const SIGN_IN_WINDOW: Duration = Duration::from_secs(15 * 60);

/// The limits of this process.
pub struct RateLimits {
    users: Buckets<String>,
    addresses: Buckets<IpAddr>,
    /// Failed sign-ins per address: (count, start of the window).
    failed_sign_ins: Mutex<HashMap<IpAddr, (u32, Instant)>>,
}

impl RateLimits {
    pub fn new(per_user: Option<Rate>, per_address: Option<Rate>) -> RateLimits {
        RateLimits {
            users: Buckets::new(per_user),
            addresses: Buckets::new(per_address),
            failed_sign_ins: Mutex::new(HashMap::new()),
        }
    }

    /// Counts a sign-in attempt from `ip` before its password is checked
    /// (so attempts sent at once are counted one by one): `Err(seconds to
    /// wait)`, uncounted, once the address has used its failures.
    /// [`sign_in_not_a_failure`](Self::sign_in_not_a_failure) takes one
    /// back off the count.
    pub fn sign_in_attempt(&self, ip: IpAddr) -> Result<(), u64> {
        let now = Instant::now();
        let mut failed = self
            .failed_sign_ins
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if failed.len() >= MAX_KEYS {
            failed.retain(|_, (_, start)| now.duration_since(*start) < SIGN_IN_WINDOW);
        }
        let entry = failed.entry(ip).or_insert((0, now));
        if now.duration_since(entry.1) >= SIGN_IN_WINDOW {
            *entry = (0, now);
        }
        if entry.0 >= MAX_FAILED_SIGN_INS_PER_ADDRESS {
            return Err(retry_after(SIGN_IN_WINDOW - now.duration_since(entry.1)));
        }
        entry.0 += 1;
        Ok(())
    }

    /// Takes an attempt off `ip`'s count that was no wrong guess: its
    /// password was right, or it was refused unchecked (its name locked).
    pub fn sign_in_not_a_failure(&self, ip: IpAddr) {
        let mut failed = self
            .failed_sign_ins
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(entry) = failed.get_mut(&ip) {
            entry.0 = entry.0.saturating_sub(1);
        }
    }

    /// No limits (tools and tests that build an app state themselves).
    pub fn off() -> RateLimits {
        RateLimits::new(None, None)
    }

    /// A request of an authenticated user: `Err(seconds to wait)` beyond
    /// the limit.
    pub fn user(&self, user_id: &str) -> Result<(), u64> {
        self.users
            .take(&user_id.to_string(), Instant::now())
            .map_err(retry_after)
    }

    /// A request from `ip`.
    pub fn address(&self, ip: IpAddr) -> Result<(), u64> {
        self.addresses.take(&ip, Instant::now()).map_err(retry_after)
    }
}

/// Whole seconds for `Retry-After`, at least 1.
fn retry_after(wait: Duration) -> u64 {
    wait.as_secs_f64().ceil().max(1.0) as u64
}

/// The client address of a request, set by the server's accept loop.
#[derive(Clone, Copy, Debug)]
pub struct ClientAddr(pub IpAddr);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_allows_its_burst_then_its_rate() {
        let b: Buckets<&str> = Buckets::new(Some(Rate {
            per_second: 10,
            burst: 3,
        }));
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(b.take(&"u", t0).is_ok());
        }
        let wait = b.take(&"u", t0).unwrap_err();
        assert!(
            wait <= Duration::from_millis(100) && wait > Duration::ZERO,
            "{wait:?}"
        );
        assert!(b.take(&"other", t0).is_ok(), "keys are separate");
        assert!(
            b.take(&"u", t0 + Duration::from_millis(100)).is_ok(),
            "refilled at the rate"
        );
        assert!(b.take(&"u", t0 + Duration::from_millis(100)).is_err());
        assert_eq!(retry_after(Duration::from_millis(10)), 1);
        assert_eq!(retry_after(Duration::from_millis(1500)), 2);
    }

    #[test]
    fn zero_is_off() {
        assert_eq!(Rate::of(0), None);
        let limits = RateLimits::new(None, None);
        for _ in 0..10_000 {
            assert!(limits.user("u").is_ok());
        }
    }
}
