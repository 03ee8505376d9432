//! A small bounded LRU cache keyed by string (content hashes: layouts by sha256,
//! SOCS kernels by model hash). The worker's caches only ever save recomputation;
//! nothing in them is authoritative, so eviction is always safe.
//!
//! Bounded by entry count and by a caller-declared cost (bytes). Eviction scans for
//! the least recently used entry, which is fine for the tens of entries these caches
//! hold.

// The engine integration is the first user; until then only the tests call it.
#![allow(dead_code)]

use std::collections::HashMap;

struct CacheSlot<V> {
    value: V,
    cost: u64,
    last_used: u64,
}

/// A bounded least-recently-used map from string keys to values.
pub struct LruCache<V> {
    entries: HashMap<String, CacheSlot<V>>,
    max_entries: usize,
    max_cost: u64,
    cost: u64,
    clock: u64,
}

impl<V: Clone> LruCache<V> {
    /// A cache holding at most `max_entries` entries and `max_cost` total cost.
    #[must_use]
    pub fn new(max_entries: usize, max_cost: u64) -> Self {
        Self {
            entries: HashMap::new(),
            max_entries: max_entries.max(1),
            max_cost,
            cost: 0,
            clock: 0,
        }
    }

    /// The value under `key`, marking it most recently used.
    pub fn get(&mut self, key: &str) -> Option<V> {
        self.clock += 1;
        let clock = self.clock;
        self.entries.get_mut(key).map(|e| {
            e.last_used = clock;
            e.value.clone()
        })
    }

    /// Inserts `value` with its `cost`, evicting least recently used entries until
    /// both bounds hold. A value costlier than the whole budget is not cached.
    /// Returns whether it was stored.
    pub fn insert(&mut self, key: impl Into<String>, value: V, cost: u64) -> bool {
        let key = key.into();
        self.remove(&key);
        if cost > self.max_cost {
            return false;
        }
        while self.entries.len() >= self.max_entries || self.cost + cost > self.max_cost {
            if !self.evict_one() {
                break;
            }
        }
        self.clock += 1;
        self.cost += cost;
        self.entries.insert(
            key,
            CacheSlot {
                value,
                cost,
                last_used: self.clock,
            },
        );
        true
    }

    /// Removes `key`; returns its value if it was present.
    pub fn remove(&mut self, key: &str) -> Option<V> {
        let e = self.entries.remove(key)?;
        self.cost -= e.cost;
        Some(e.value)
    }

    /// Number of entries.
    #[must_use]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the cache is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Total declared cost of the entries held.
    #[must_use]
    pub fn cost(&self) -> u64 {
        self.cost
    }

    fn evict_one(&mut self) -> bool {
        let Some(oldest) = self
            .entries
            .iter()
            .min_by_key(|(_, e)| e.last_used)
            .map(|(k, _)| k.clone())
        else {
            return false;
        };
        self.remove(&oldest);
        true
    }
}
