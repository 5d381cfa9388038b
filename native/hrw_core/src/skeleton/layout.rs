//! The skeleton's memory layout: its trie slots (`Entry`) and the `Skeleton` holding them.

/// Flag of a leaf entry (in `Entry::b`).
pub(super) const LEAF: u64 = 1 << 63;

/// A trie slot, 16 bytes. Internal: `a` = threshold, `b` = first child | bit << 32
/// (children are adjacent: left at `first`, right at `first + 1`). Leaf: `a` = offset
/// of its block in `Skeleton::blocks` | padding << 48, `b` = `LEAF` | node count << 32
/// | (own slot - 1), so that "go right" stays on the leaf.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Entry {
    pub(super) a: u64,
    pub(super) b: u64,
}

impl Entry {
    #[inline(always)]
    pub(super) fn is_leaf(self) -> bool {
        self.b & LEAF != 0
    }
    #[inline(always)]
    pub(super) fn bit(self) -> u32 {
        (self.b >> 32) as u32
    }
    #[inline(always)]
    pub(super) fn first(self) -> usize {
        self.b as u32 as usize
    }
    /// A leaf's block offset, node count and padded id count (see `Skeleton::blocks`).
    #[inline(always)]
    pub(super) fn block(self) -> (usize, usize, usize) {
        let m = ((self.b >> 32) & 0x7fff_ffff) as usize;
        let off = (self.a & ((1 << 48) - 1)) as usize;
        (off, m, m + (self.a >> 48) as usize)
    }
}

/// An immutable skeleton over `(id, weight)` nodes; see the module docs.
#[derive(Clone, Debug)]
pub struct Skeleton {
    /// Trie slots in breadth-first order (the top levels share cache lines); the
    /// root is slot 0.
    pub(super) entries: Vec<Entry>,
    /// Bit position of the root when internal (the descent's first coin).
    pub(super) root_bit: u32,
    /// Descent steps: the deepest leaf's distance from the root, fillers included.
    pub(super) levels: u32,
    /// One block per leaf of `m` nodes, sorted by routing key: `m` words of
    /// `n3::linear(id)` (unweighted: padded with copies of the first, see
    /// [`scan_width`]), then (weighted only) `m` words of weight bits and `m` of
    /// their reciprocals' bits, then the nodes' indices into the build input, two
    /// u32 per word. One place per leaf keeps a lookup's last accesses together.
    pub(super) blocks: Vec<u64>,
    /// Per slot (cold, for `owners`): the range of sorted positions it covers.
    pub(super) span: Vec<[u32; 2]>,
    /// Per slot (cold, for `owners`): its weight sum (its node count when unweighted).
    pub(super) mass: Vec<f64>,
    /// Per sorted position (cold, for `owners`; empty when unweighted): the weight.
    pub(super) weights: Vec<f64>,
    /// Per build index (cold, for `holds`): the node's `n3::linear` id.
    pub(super) linear: Vec<u64>,
    pub(super) weighted: bool,
    pub(super) len: usize,
    pub(super) depth: usize,
    /// Most nodes in a leaf, and most ids a leaf scan reads (padding included): what
    /// bounds a lookup's work.
    pub(super) max_leaf: usize,
    pub(super) max_width: usize,
}
