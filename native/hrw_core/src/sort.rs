//! Sorting by id. Ids are hashes, spread evenly over `u64`, so a counting pass over
//! their top bits puts each entry next to its final place; each bucket (about one
//! entry) is then sorted alone. Linear work for hashed ids, and never worse than a
//! comparison sort for ids that are not spread (a crafted key set only fills some
//! buckets more, and those are sorted by comparison).

use crate::{cost, work};

/// Below this many entries a comparison sort is as fast.
const BUCKET_MIN: usize = 4096;

/// Sorts `entries` ascending by `(id, value)`: the same order as `sort_unstable`.
/// Its work is bounded by a comparison sort's, [`cost::sort`] (a counting pass, a
/// scatter and per-bucket sorts do less).
pub fn by_id(entries: &mut Vec<(u64, usize)>) {
    work::count(cost::sort(entries.len()));
    let n = entries.len();
    if n < BUCKET_MIN {
        entries.sort_unstable();
        return;
    }
    // About one entry per bucket: `ceil(log2 n)` top bits.
    let bits = usize::BITS - (n - 1).leading_zeros();
    let shift = 64 - bits;
    let bucket = |id: u64| (id >> shift) as usize;
    let mut starts = vec![0usize; (1 << bits) + 1];
    for e in entries.iter() {
        starts[bucket(e.0) + 1] += 1;
    }
    for b in 1..starts.len() {
        starts[b] += starts[b - 1];
    }
    let mut next = starts.clone();
    let mut sorted = vec![(0u64, 0usize); n];
    for &e in entries.iter() {
        let b = bucket(e.0);
        sorted[next[b]] = e;
        next[b] += 1;
    }
    for w in starts.windows(2) {
        let bucket = &mut sorted[w[0]..w[1]];
        if bucket.len() <= 8 {
            insertion_sort(bucket);
        } else {
            bucket.sort_unstable();
        }
    }
    *entries = sorted;
}

/// Sorts a few entries in place (no call, no branch mispredicted per bucket).
#[inline(always)]
fn insertion_sort(v: &mut [(u64, usize)]) {
    for i in 1..v.len() {
        let e = v[i];
        let mut j = i;
        while j > 0 && v[j - 1] > e {
            v[j] = v[j - 1];
            j -= 1;
        }
        v[j] = e;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::n3;

    fn check(mut entries: Vec<(u64, usize)>) {
        let mut expected = entries.clone();
        expected.sort_unstable();
        by_id(&mut entries);
        assert_eq!(entries, expected);
    }

    #[test]
    fn sorts_like_a_comparison_sort_at_every_size() {
        for n in [0, 1, 2, 4095, 4096, 4097, 10_000, 65_537] {
            check((0..n).map(|i| (n3::prep(i as u64), i)).collect());
        }
    }

    #[test]
    fn crowded_and_repeated_ids_still_sort() {
        // Every id in one bucket; ids repeated with different values; extremes.
        check((0..9000).map(|i| ((i % 7) as u64, 9000 - i)).collect());
        check((0..9000).map(|i| (u64::MAX - (i % 3) as u64, i)).collect());
        check(
            (0..9000)
                .map(|i| (n3::prep((i / 4) as u64), i % 5))
                .collect(),
        );
    }
}
