//! The crate's one "best index while skipping some" loop.

/// The one "best index while skipping some" loop of the crate: the first index
/// `i < len` with `keep(i)` whose `rank(i)` is the lowest (equal ranks keep the
/// first index), or `None` when no index is kept. Highest-score picks rank by `!score`.
/// Used by the portable scan, the weighted argmin, the ring's weighted owner, the
/// bounded assignment's open-node pick and the skeleton's unweighted leaf pick; the
/// callers count their work.
#[inline(always)]
pub fn first_lowest<R: Ord>(
    len: usize,
    mut keep: impl FnMut(usize) -> bool,
    mut rank: impl FnMut(usize) -> R,
) -> Option<usize> {
    let mut best: Option<(R, usize)> = None;
    for i in 0..len {
        if keep(i) {
            let r = rank(i);
            if best.as_ref().is_none_or(|(b, _)| r < *b) {
                best = Some((r, i));
            }
        }
    }
    best.map(|(_, i)| i)
}
