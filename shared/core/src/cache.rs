//! One small time-bounded cache for what a Lambda instance remembers between requests
//! (channels, flow items, backlog hints, resolved API keys, the tenant list): an entry is
//! trusted for the cache's time to live, and the whole map is dropped when it grows past its
//! bound, so a busy instance never holds more than that many entries. A zero time to live
//! turns the cache off (every read misses, nothing is kept).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Entries kept before the map is cleared.
pub const DEFAULT_BOUND: usize = 10_000;

pub struct TtlCache<K, V> {
    ttl: Duration,
    bound: usize,
    entries: Mutex<HashMap<K, (Instant, V)>>,
}

impl<K: Eq + Hash, V: Clone> TtlCache<K, V> {
    pub fn new(ttl: Duration) -> Self {
        Self::bounded(ttl, DEFAULT_BOUND)
    }

    pub fn bounded(ttl: Duration, bound: usize) -> Self {
        Self {
            ttl,
            bound: bound.max(1),
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// The time to live.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The value, when it was kept less than the time to live ago.
    pub fn get(&self, key: &K) -> Option<V> {
        self.get_within(key, self.ttl)
    }

    /// The value, when it was kept less than `age` ago (never longer than the time to live).
    pub fn get_within(&self, key: &K, age: Duration) -> Option<V> {
        if self.ttl.is_zero() {
            return None;
        }
        let entries = self.entries.lock().ok()?;
        let (at, v) = entries.get(key)?;
        (at.elapsed() < age.min(self.ttl)).then(|| v.clone())
    }

    /// The value however old it is (a hint, not a fact: the caller checks it).
    pub fn get_stale(&self, key: &K) -> Option<V> {
        let entries = self.entries.lock().ok()?;
        entries.get(key).map(|(_, v)| v.clone())
    }

    /// Applies `f` to a fresh entry in place (its age unchanged); a stale one is removed.
    pub fn with_mut<R>(&self, key: &K, f: impl FnOnce(&mut V) -> R) -> Option<R> {
        let mut entries = self.entries.lock().ok()?;
        match entries.get_mut(key) {
            Some((at, v)) if at.elapsed() < self.ttl => Some(f(v)),
            Some(_) => {
                entries.remove(key);
                None
            }
            None => None,
        }
    }

    /// The fresh value of `key`, or `make()`'s, kept from now (a stale one is replaced). With
    /// a zero time to live, `make()`'s, kept nowhere.
    pub fn get_or_insert_with(&self, key: K, make: impl FnOnce() -> V) -> V {
        if self.ttl.is_zero() {
            return make();
        }
        let Ok(mut entries) = self.entries.lock() else {
            return make();
        };
        if let Some((at, v)) = entries.get(&key)
            && at.elapsed() < self.ttl
        {
            return v.clone();
        }
        if entries.len() >= self.bound && !entries.contains_key(&key) {
            entries.clear();
        }
        let v = make();
        entries.insert(key, (Instant::now(), v.clone()));
        v
    }

    pub fn insert(&self, key: K, value: V) {
        if self.ttl.is_zero() {
            return;
        }
        if let Ok(mut entries) = self.entries.lock() {
            if entries.len() >= self.bound && !entries.contains_key(&key) {
                entries.clear();
            }
            entries.insert(key, (Instant::now(), value));
        }
    }

    pub fn remove(&self, key: &K) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.remove(key);
        }
    }

    pub fn clear(&self) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.clear();
        }
    }
}

/// What was made once from a value and is kept with it: a channel's `config` as its adapter
/// parsed it, kept with the copy of the channel an instance holds (for the channel cache's
/// time to live), so that the deliveries of a channel do not parse their settings again.
///
/// A clone starts empty: a changed copy (a channel patched from a clone of the old one) never
/// carries what was made from the value it was cloned from. Equal to every other (it is
/// derived from the value it sits beside, not part of it).
#[derive(Default)]
pub struct Parsed(std::sync::OnceLock<std::sync::Arc<dyn std::any::Any + Send + Sync>>);

impl Parsed {
    /// What `make` made the first time, or makes now. A `T` other than the one made first
    /// (never, for one channel type) is made again each time.
    pub fn get_or_make<T: Send + Sync + 'static, E>(
        &self,
        make: impl FnOnce() -> Result<T, E>,
    ) -> Result<std::sync::Arc<T>, E> {
        if let Some(kept) = self.0.get() {
            if let Ok(t) = kept.clone().downcast::<T>() {
                return Ok(t);
            }
            return make().map(std::sync::Arc::new);
        }
        let made = std::sync::Arc::new(make()?);
        let _ = self.0.set(made.clone());
        Ok(made)
    }
}

impl Clone for Parsed {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl PartialEq for Parsed {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for Parsed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() {
            "Parsed(kept)"
        } else {
            "Parsed(empty)"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_live_for_the_ttl_and_a_zero_ttl_keeps_nothing() {
        let c = TtlCache::new(Duration::from_millis(40));
        c.insert("a", 1);
        assert_eq!(c.get(&"a"), Some(1));
        assert_eq!(c.get_within(&"a", Duration::ZERO), None);
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(c.get(&"a"), None);
        assert_eq!(c.get_stale(&"a"), Some(1));
        c.remove(&"a");
        assert_eq!(c.get_stale(&"a"), None);

        c.insert("b", 5);
        assert_eq!(c.with_mut(&"b", |v| std::mem::replace(v, 6)), Some(5));
        assert_eq!(c.get(&"b"), Some(6));
        assert_eq!(c.with_mut(&"zz", |v| *v), None);

        let off = TtlCache::new(Duration::ZERO);
        off.insert("a", 1);
        assert_eq!(off.get(&"a"), None);
        assert_eq!(off.get_stale(&"a"), None);
    }

    #[test]
    fn the_map_is_dropped_when_it_outgrows_its_bound() {
        let c = TtlCache::bounded(Duration::from_secs(60), 3);
        for k in 0..3 {
            c.insert(k, k);
        }
        c.insert(1, 10);
        assert_eq!(c.get(&0), Some(0), "replacing a key never drops the map");
        c.insert(3, 3);
        assert_eq!(c.get(&0), None);
        assert_eq!(c.get(&3), Some(3));
    }

    #[test]
    fn a_parsed_value_is_made_once_and_a_clone_starts_empty() {
        let p = Parsed::default();
        let made = std::cell::Cell::new(0);
        let make = || -> Result<String, ()> {
            made.set(made.get() + 1);
            Ok("settings".to_owned())
        };
        assert_eq!(*p.get_or_make(make).unwrap(), "settings");
        assert_eq!(*p.get_or_make(make).unwrap(), "settings");
        assert_eq!(made.get(), 1, "made once");
        let copy = p.clone();
        copy.get_or_make(make).unwrap();
        assert_eq!(made.get(), 2, "a clone makes its own");
        assert_eq!(
            p.get_or_make(|| Err::<u8, _>("other type")),
            Err("other type")
        );
        let failed = Parsed::default();
        assert_eq!(failed.get_or_make(|| Err::<u8, _>("bad")), Err("bad"));
        assert_eq!(
            *failed.get_or_make(|| Ok::<u8, ()>(7)).unwrap(),
            7,
            "a failure keeps nothing"
        );
    }
}
