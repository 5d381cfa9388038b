//! Bounded-load assignment: every key gets its best-scoring node that is not full.
//!
//! Keys are processed in ascending order of their ids (a defined order that does not
//! depend on input order), each taking the highest N3 score among nodes whose load is
//! below `cap = ceil(|keys| / |nodes| * (1 + epsilon))`, both counts after removing
//! duplicates. Most keys get their first choice, found by one SIMD scan; only keys
//! whose first choice is full rank the remaining nodes.

use crate::{cost, n3, scan, work};

/// `ceil(keys / nodes * (1 + epsilon))` in f64, the same arithmetic as hrw 0.2.1's
/// Elixir (`ceil(length(keys) / length(nodes) * (1 + epsilon))`).
pub fn cap(keys: usize, nodes: usize, epsilon: f64) -> usize {
    (keys as f64 / nodes as f64 * (1.0 + epsilon)).ceil() as usize
}

/// Assigns keys to nodes. `keys` and `nodes` are ids, both already distinct; returns
/// for each key (in the order of `order`, ascending key id) its node index. The
/// returned `order` holds positions into `keys`.
pub struct Assignment {
    pub order: Vec<usize>,
    pub node_of: Vec<usize>,
}

/// Assigns distinct `keys` to distinct `nodes` (ids): sorts the keys, then
/// [`assign_sorted`].
pub fn assign(keys: &[u64], nodes: &[u64], epsilon: f64) -> Assignment {
    let mut sorted: Vec<(u64, usize)> = keys.iter().copied().zip(0..).collect();
    crate::sort::by_id(&mut sorted);
    let ids: Vec<u64> = sorted.iter().map(|e| e.0).collect();
    Assignment {
        order: sorted.iter().map(|e| e.1).collect(),
        node_of: assign_sorted(&ids, nodes, epsilon),
    }
}

/// [`assign`] of keys already in processing order (ascending ids, distinct): each
/// key's node index, in that order.
pub fn assign_sorted(keys: &[u64], nodes: &[u64], epsilon: f64) -> Vec<usize> {
    debug_assert!(keys.windows(2).all(|w| w[0] < w[1]));
    work::count(2 * cost::ELEMENT * (keys.len() + nodes.len()) as u64);
    if nodes.is_empty() {
        return Vec::new();
    }
    let cap = cap(keys.len(), nodes.len(), epsilon).max(1);
    let prepared: Vec<u64> = nodes.iter().map(|&id| n3::linear(id)).collect();
    let mut load = vec![0usize; nodes.len()];
    let backend = scan::Backend::detect();
    keys.iter()
        .map(|&key| {
            let tk = n3::prepared_key(key);
            let first = backend.argmax(&prepared, tk).unwrap_or(0);
            let pick = if load[first] < cap {
                first
            } else {
                best_open(&prepared, tk, &load, cap)
            };
            load[pick] += 1;
            pick
        })
        .collect()
}

/// The highest-scoring node whose load is below `cap`. The caps add up to at least
/// the number of keys, so while keys remain some node is open.
fn best_open(prepared: &[u64], tk: u64, load: &[usize], cap: usize) -> usize {
    work::count((cost::SCORE + cost::ELEMENT) * prepared.len() as u64);
    let load = &load[..prepared.len()];
    scan::first_lowest(
        prepared.len(),
        |i| load[i] < cap,
        |i| !n3::score_prepared(tk, prepared[i]),
    )
    .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(n: u64, salt: u64) -> Vec<u64> {
        (0..n).map(|i| n3::prep(i ^ salt)).collect()
    }

    #[test]
    fn caps_hold_and_every_key_is_assigned() {
        let nodes = ids(37, 1);
        for &eps in &[0.0, 0.1, 0.25, 1.0] {
            let keys = ids(10_000, 99);
            let a = assign(&keys, &nodes, eps);
            assert_eq!(a.node_of.len(), keys.len());
            let mut load = vec![0; nodes.len()];
            for &n in &a.node_of {
                load[n] += 1;
            }
            let cap = cap(keys.len(), nodes.len(), eps);
            assert!(
                load.iter().all(|&l| l <= cap),
                "eps {eps}: {load:?} > {cap}"
            );
        }
    }

    #[test]
    fn with_room_to_spare_every_key_gets_its_first_choice() {
        let nodes = ids(10, 1);
        let keys = ids(50, 2);
        let a = assign(&keys, &nodes, 100.0);
        for (&i, &n) in a.order.iter().zip(&a.node_of) {
            assert_eq!(
                Some(n),
                scan::portable::argmax(
                    &nodes.iter().map(|&x| n3::linear(x)).collect::<Vec<_>>(),
                    n3::prepared_key(keys[i])
                )
            );
        }
    }

    #[test]
    fn a_full_first_choice_falls_to_the_next_best_open_node() {
        let nodes = ids(3, 5);
        let keys = ids(300, 6);
        let a = assign(&keys, &nodes, 0.0);
        let prepared: Vec<u64> = nodes.iter().map(|&x| n3::linear(x)).collect();
        let mut load = [0usize; 3];
        for (&i, &n) in a.order.iter().zip(&a.node_of) {
            let tk = n3::prepared_key(keys[i]);
            let ranked = scan::top(&prepared, tk, 3);
            let expected = *ranked.iter().find(|&&r| load[r] < 100).unwrap();
            assert_eq!(n, expected);
            load[n] += 1;
        }
        assert_eq!(load, [100, 100, 100]);
    }
}
