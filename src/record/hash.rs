//! The hash maps and sets of the crate: rustc-hash's Fx hasher (fast on the integer and pointer
//! keys they hold) with the `enabled` feature, the standard library's SipHash with fixed keys
//! without it, so that a build with instrumentation compiled out depends on no hashing crate.
//! Both are deterministic: the same input gives the same iteration order in every run.

#[cfg(feature = "enabled")]
pub(crate) use rustc_hash::{FxHashMap, FxHashSet};

/// A map hashed with SipHash keyed by zeros (`enabled` is off: no rustc-hash).
#[cfg(not(feature = "enabled"))]
pub(crate) type FxHashMap<K, V> =
    std::collections::HashMap<K, V, std::hash::BuildHasherDefault<std::hash::DefaultHasher>>;

/// A set hashed with SipHash keyed by zeros (`enabled` is off: no rustc-hash).
#[cfg(not(feature = "enabled"))]
pub(crate) type FxHashSet<T> =
    std::collections::HashSet<T, std::hash::BuildHasherDefault<std::hash::DefaultHasher>>;
