//! Node sets as the prepared structures see them: distinct ids with weights.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;
use xxhash_rust::xxh3::Xxh3;

/// Hashing for the dedup table: node ids are already well-mixed 64-bit hashes, so
/// a keyed multiply-xorshift of the id is enough and several times cheaper than
/// SipHash; the key is random per VM (from `RandomState`), so ids chosen to collide
/// in the table (terms crafted for it) cannot be chosen without it.
#[derive(Clone, Copy)]
struct IdHasherBuilder(u64, u64);

impl IdHasherBuilder {
    fn get() -> IdHasherBuilder {
        static KEYS: OnceLock<(u64, u64)> = OnceLock::new();
        let &(a, b) = KEYS.get_or_init(|| {
            let state = RandomState::new();
            (state.hash_one(0x5eed_u64), state.hash_one(0xfeed_u64) | 1)
        });
        IdHasherBuilder(a, b)
    }
}

struct IdHasher(u64, u64, u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Only u64 keys are hashed here; any other input still hashes correctly.
        for &b in bytes {
            self.2 = (self.2 ^ b as u64).wrapping_mul(self.1);
        }
    }

    fn write_u64(&mut self, id: u64) {
        self.2 = id;
    }

    fn finish(&self) -> u64 {
        let x = (self.2 ^ self.0).wrapping_mul(self.1);
        x ^ (x >> 29)
    }
}

impl BuildHasher for IdHasherBuilder {
    type Hasher = IdHasher;
    fn build_hasher(&self) -> IdHasher {
        IdHasher(self.0, self.1, 0)
    }
}

/// The distinct nodes of an input list.
pub struct Distinct {
    /// For each distinct node, the position of its first occurrence in the input.
    pub positions: Vec<usize>,
    /// `(id, weight)` of each distinct node, in first-occurrence order. A repeated id
    /// keeps its largest weight, which is the entry that wins in a plain scan.
    pub nodes: Vec<(u64, f64)>,
}

/// Deduplicates `(id, weight)` pairs by id.
pub fn distinct(input: &[(u64, f64)]) -> Distinct {
    crate::work::count(crate::cost::distinct(input.len()));
    let mut slot: HashMap<u64, usize, IdHasherBuilder> =
        HashMap::with_capacity_and_hasher(input.len(), IdHasherBuilder::get());
    let mut out = Distinct {
        positions: Vec::with_capacity(input.len()),
        nodes: Vec::with_capacity(input.len()),
    };
    for (pos, &(id, weight)) in input.iter().enumerate() {
        match slot.get(&id) {
            Some(&i) => {
                if weight > out.nodes[i].1 {
                    out.nodes[i].1 = weight;
                }
            }
            None => {
                slot.insert(id, out.nodes.len());
                out.positions.push(pos);
                out.nodes.push((id, weight));
            }
        }
    }
    out
}

/// Whether every weight equals the first (an unweighted set, in effect).
pub fn uniform_weights(nodes: &[(u64, f64)]) -> bool {
    nodes.windows(2).all(|w| w[0].1 == w[1].1)
}

/// A fingerprint of a node set in a given order and structure kind: equal inputs
/// give equal fingerprints on every machine (used to cache rebuilt structures).
pub fn fingerprint(kind: u64, nodes: &[(u64, f64)], params: &[u64]) -> u64 {
    crate::work::count(crate::cost::fingerprint(nodes.len(), params.len()));
    // `term_hash::tuple` of the words, streamed through a small buffer instead of
    // collecting them (same digest: one-shot and streaming XXH3 agree).
    let words = 1 + params.len() + 2 * nodes.len();
    if words <= crate::term_hash::MAX_TAGGED_IDS {
        let mut all = Vec::with_capacity(words);
        all.push(kind);
        all.extend_from_slice(params);
        for &(id, w) in nodes {
            all.push(id);
            all.push(w.to_bits());
        }
        return crate::term_hash::tuple(&all);
    }
    let mut hasher = Xxh3::with_seed(crate::term_hash::TERM_SEED);
    let mut buf = [0u8; 4096];
    buf[0] = crate::term_hash::tag::TUPLE;
    let mut len = 1;
    let mut put = |word: u64, hasher: &mut Xxh3, buf: &mut [u8; 4096]| {
        if len + 8 > buf.len() {
            hasher.update(&buf[..len]);
            len = 0;
        }
        buf[len..len + 8].copy_from_slice(&word.to_le_bytes());
        len += 8;
    };
    put(kind, &mut hasher, &mut buf);
    for &p in params {
        put(p, &mut hasher, &mut buf);
    }
    for &(id, w) in nodes {
        put(id, &mut hasher, &mut buf);
        put(w.to_bits(), &mut hasher, &mut buf);
    }
    hasher.update(&buf[..len]);
    hasher.digest()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_is_the_tuple_of_its_words() {
        for n in [0usize, 1, 5, 7, 8, 300, 1000] {
            let nodes: Vec<(u64, f64)> = (0..n as u64)
                .map(|i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15), (i % 5) as f64 + 0.5))
                .collect();
            let params = [16u64];
            let mut words = vec![2u64, 16];
            for &(id, w) in &nodes {
                words.push(id);
                words.push(w.to_bits());
            }
            assert_eq!(
                fingerprint(2, &nodes, &params),
                crate::term_hash::tuple(&words),
                "{n} nodes"
            );
        }
    }

    #[test]
    fn keeps_first_position_and_largest_weight() {
        let d = distinct(&[(7, 1.0), (9, 2.0), (7, 5.0), (9, 1.0), (3, 1.0)]);
        assert_eq!(d.positions, vec![0, 1, 4]);
        assert_eq!(d.nodes, vec![(7, 5.0), (9, 2.0), (3, 1.0)]);
    }
}
