//! A fast hasher for small integer and pointer keys in post-processing (the Fx hash that rustc
//! uses): not resistant to chosen keys, which is fine for keys a process makes itself.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Multiply-rotate hasher for integer keys.
#[derive(Default, Clone, Copy)]
pub(crate) struct FxHasher(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// A `HashMap` with [`FxHasher`].
pub(crate) type FxHashMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

#[cfg(test)]
mod tests {
    use super::FxHashMap;

    #[test]
    fn map_keeps_distinct_keys() {
        let mut m: FxHashMap<(Option<u64>, usize), u32> = FxHashMap::default();
        for i in 0..1000usize {
            m.insert((Some(i as u64 % 7), i), i as u32);
            m.insert((None, i), i as u32 + 1);
        }
        assert_eq!(m.len(), 2000);
        assert_eq!(m[&(Some(3), 10)], 10);
        assert_eq!(m[&(None, 999)], 1000);
    }
}
