//! What a node keeps between requests while `auth_epoch` stays where it
//! was read (ADRs 0021 and 0024).
//!
//! `auth_epoch` moves, in the writing transaction and from any node, with
//! every change to the tables authentication reads and to the
//! configuration a payment reads (product transactions, postback
//! configs), except a sign-in's bookkeeping on the user, which nothing
//! kept reads (migration 39). A request reads the epoch once, when its
//! caller is authenticated, and carries it ([`super::Cx::epoch`]). What any request
//! read from the database after reading epoch `e` is at least as new as
//! `e`, so it may be kept under `e` and given to every later request that
//! read `e` too: none of them sees anything older than its own epoch, and
//! a change is seen by every request whose caller is authenticated after
//! it commits, on every node.
//!
//! SQLite's writer runs a group of jobs in one transaction with one
//! commit, so a job may read an earlier job's change before it is
//! committed. If that commit then fails, the writer calls [`forget_all`]:
//! nothing kept before it serves again.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

/// Moved by [`forget_all`]. A value serves only in the generation that
/// was current before it was read.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Forgets everything kept in this process: writes that jobs may have
/// read were lost (a group's commit failed), so what they read may never
/// have existed.
pub fn forget_all() {
    GENERATION.fetch_add(1, Ordering::SeqCst);
}

fn generation() -> u64 {
    GENERATION.load(Ordering::SeqCst)
}

/// A kept value: its epoch, the generation it was read in, the value.
type Entry<V> = (i64, u64, V);

/// Values by key, each under the epoch it was read at.
pub struct Kept<K, V> {
    values: Mutex<HashMap<K, Entry<V>>>,
    /// More values than this and all are dropped: a bound on memory, not a
    /// policy (a node sees far fewer locations and users).
    max: usize,
}

impl<K, V> Kept<K, V> {
    pub fn new(max: usize) -> Kept<K, V> {
        Kept {
            values: Mutex::new(HashMap::new()),
            max,
        }
    }
}

/// The bound of a [`Kept`] made by `default()`.
pub const DEFAULT_MAX: usize = 10_000;

impl<K, V> Default for Kept<K, V> {
    fn default() -> Self {
        Kept::new(DEFAULT_MAX)
    }
}

impl<K: Eq + Hash, V: Clone> Kept<K, V> {
    /// The value kept for `key` under `epoch`, if any.
    pub fn get(&self, key: &K, epoch: i64) -> Option<V> {
        let now = generation();
        let values = self.values.lock().unwrap_or_else(PoisonError::into_inner);
        values
            .get(key)
            .filter(|(e, g, _)| *e == epoch && *g == now)
            .map(|(_, _, v)| v.clone())
    }

    /// Keeps `value`, read after `epoch` was, under `epoch`.
    pub fn keep(&self, key: K, epoch: i64, value: V) {
        self.keep_read_in(key, epoch, generation(), value);
    }

    /// Keeps `value`, read in `generation` (taken before the read began).
    fn keep_read_in(&self, key: K, epoch: i64, generation: u64, value: V) {
        let mut values = self.values.lock().unwrap_or_else(PoisonError::into_inner);
        if values.len() >= self.max {
            values.clear();
        }
        values.insert(key, (epoch, generation, value));
    }

    /// The value kept for `key` under `epoch`, or `read` now (and kept).
    /// Without an epoch (a request that read none: the system's own work,
    /// a session caller) it always reads.
    pub fn get_or_read<E>(
        &self,
        key: K,
        epoch: Option<i64>,
        read: impl FnOnce() -> Result<V, E>,
    ) -> Result<V, E> {
        let Some(epoch) = epoch else {
            return read();
        };
        if let Some(value) = self.get(&key, epoch) {
            return Ok(value);
        }
        let before = generation();
        let value = read()?;
        self.keep_read_in(key, epoch, before, value.clone());
        Ok(value)
    }

    /// [`Kept::get_or_read`] for a lookup that may find nothing: only what
    /// is found is kept, so ids that name nothing (any caller may send
    /// them) cannot crowd out the rest.
    pub fn get_or_find<E>(
        &self,
        key: K,
        epoch: Option<i64>,
        find: impl FnOnce() -> Result<Option<V>, E>,
    ) -> Result<Option<V>, E> {
        let Some(epoch) = epoch else {
            return find();
        };
        if let Some(value) = self.get(&key, epoch) {
            return Ok(Some(value));
        }
        let before = generation();
        let found = find()?;
        if let Some(value) = &found {
            self.keep_read_in(key, epoch, before, value.clone());
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::Kept;
    use std::sync::{Mutex, MutexGuard, PoisonError};

    /// The generation is the process's: tests that forget everything must
    /// not run while others count what is kept.
    fn serial() -> MutexGuard<'static, ()> {
        static SERIAL: Mutex<()> = Mutex::new(());
        SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
    }

    #[test]
    fn a_value_serves_only_its_own_epoch() {
        let _serial = serial();
        let kept: Kept<&str, i32> = Kept::new(10);
        let mut reads = 0;
        let mut read = |v| {
            reads += 1;
            Ok::<_, ()>(v)
        };
        assert_eq!(kept.get_or_read("pt", Some(1), || read(10)), Ok(10));
        assert_eq!(kept.get_or_read("pt", Some(1), || read(11)), Ok(10));
        // The epoch moved: read again, and the old value is gone.
        assert_eq!(kept.get_or_read("pt", Some(2), || read(12)), Ok(12));
        assert_eq!(kept.get(&"pt", 1), None);
        // No epoch: always read, nothing kept.
        assert_eq!(kept.get_or_read("other", None, || read(13)), Ok(13));
        assert_eq!(kept.get(&"other", 2), None);
        assert_eq!(reads, 3);
    }

    #[test]
    fn forgetting_drops_what_was_kept_and_what_was_being_read() {
        let _serial = serial();
        let kept: Kept<&str, i32> = Kept::new(10);
        kept.keep("a", 1, 1);
        super::forget_all();
        assert_eq!(kept.get(&"a", 1), None);
        // A read under way while everything is forgotten is not served.
        let read = kept.get_or_read("b", Some(1), || {
            super::forget_all();
            Ok::<_, ()>(2)
        });
        assert_eq!(read, Ok(2));
        assert_eq!(kept.get(&"b", 1), None);
    }

    #[test]
    fn nothing_found_is_not_kept() {
        let _serial = serial();
        let kept: Kept<&str, i32> = Kept::new(10);
        assert_eq!(kept.get_or_find("x", Some(1), || Ok::<_, ()>(None)), Ok(None));
        assert_eq!(kept.get(&"x", 1), None);
        assert_eq!(
            kept.get_or_find("x", Some(1), || Ok::<_, ()>(Some(7))),
            Ok(Some(7))
        );
        assert_eq!(kept.get_or_find("x", Some(1), || Ok::<_, ()>(None)), Ok(Some(7)));
    }

    #[test]
    fn a_failed_read_keeps_nothing_and_the_bound_holds() {
        let _serial = serial();
        let kept: Kept<u32, u32> = Kept::new(2);
        assert_eq!(
            kept.get_or_read(1, Some(5), || Err::<u32, _>("down")),
            Err("down")
        );
        assert_eq!(kept.get(&1, 5), None);
        for k in 0..5 {
            kept.keep(k, 5, k);
        }
        let held = (0..5).filter(|k| kept.get(k, 5).is_some()).count();
        assert!(held <= 2, "{held} values kept over a bound of 2");
        assert_eq!(kept.get(&4, 5), Some(4));
    }
}
