//! Unit tests of the worker's LRU cache (`reticle_worker::cache`).

use reticle_worker::cache::*;

#[test]
fn evicts_the_least_recently_used_entry_by_count() {
    let mut c = LruCache::new(2, u64::MAX);
    c.insert("a", 1, 0);
    c.insert("b", 2, 0);
    assert_eq!(c.get("a"), Some(1)); // b is now the oldest
    c.insert("c", 3, 0);
    assert_eq!(c.get("b"), None);
    assert_eq!(c.get("a"), Some(1));
    assert_eq!(c.get("c"), Some(3));
    assert_eq!(c.len(), 2);
}

#[test]
fn respects_the_cost_budget_and_refuses_oversized_values() {
    let mut c = LruCache::new(10, 100);
    assert!(c.insert("a", 'a', 60));
    assert!(c.insert("b", 'b', 30));
    assert!(c.insert("c", 'c', 30)); // evicts a (oldest) to fit
    assert_eq!(c.get("a"), None);
    assert_eq!(c.cost(), 60);
    assert!(!c.insert("huge", 'h', 101));
    assert_eq!(c.get("huge"), None);
    assert_eq!(c.len(), 2);
}

#[test]
fn reinserting_a_key_replaces_its_cost() {
    let mut c = LruCache::new(10, 100);
    c.insert("a", 1, 50);
    c.insert("a", 2, 10);
    assert_eq!(c.cost(), 10);
    assert_eq!(c.get("a"), Some(2));
    assert_eq!(c.remove("a"), Some(2));
    assert!(c.is_empty());
    assert_eq!(c.cost(), 0);
}
