//! The work-budget cost model: a normal-scheduler call's [`Budget`], what a step
//! pays from it ([`Budget::pay`]: charged and counted in one call), the tally of
//! the work done ([`work`]), and every constant and cost function the charges are
//! made of.
//!
//! Why here, in hrw_core: the charges are made in the NIF glue (hrw_nif), before
//! each step, but much of the work they pay for is done in this crate (scans, ring
//! and skeleton builds and lookups, sorts, bounded assignment), and it is counted
//! where it is done ([`work`]). A charge and its count must use the same
//! figures, and only this crate is visible to both, so the glue's own steps (the
//! term walk, node and key lists, batches, the VM's map builder) are costed here
//! too: plain numbers, no Erlang. A structure's cost takes its shape as arguments;
//! its methods (`Ring::owner_cost`, `Skeleton::owners_cost`, ...) only pass it in.
//!
//! Units are rough nanoseconds of warm work (a scale, never a timing asserted:
//! test/hrw/budget_test.exs checks every charge against the work counted). A
//! caller charges an upper bound of the work it is about to do, from sizes it knows
//! beforehand. docs/GUARANTEES.md ("Scheduling") states [`NORMAL_BUDGET`] and
//! [`MAX_NORMAL_KEYS`], citing this file, and test/hrw/budget_test.exs checks
//! against both: a change to either goes there too. No other file repeats a
//! figure of this one.

// ---------------------------------------------------------------------------
// The budget

/// The whole budget of one normal-scheduler call. A NIF call on a normal
/// scheduler should stay well under ~1 ms, and a first, cache-cold pass over a
/// list costs more than the warm work the units stand for, so the budget is less
/// than half of that. `mix hrw.stalls` measures the worst normal-scheduler stall
/// of every public function at the largest input this budget lets through.
pub const NORMAL_BUDGET: u64 = 400_000;

/// Units in 1% of a scheduler's time slice: the whole budget is one slice.
const UNITS_PER_TIMESLICE_PERCENT: u64 = NORMAL_BUDGET / 100;

/// The share of a time slice, in percent (not capped), that `spent` units of a
/// normal-scheduler call used.
#[inline(always)]
pub const fn timeslice_percent(spent: u64) -> u64 {
    spent / UNITS_PER_TIMESLICE_PERCENT
}

/// A key list longer than this goes to a dirty scheduler before any key is
/// hashed: every key costs at least [`TERM`] and a cell, plus its lookup and its
/// share of the result, so such a batch seldom fits [`NORMAL_BUDGET`], and finding
/// that out by hashing keys would waste the budget's worth of work.
pub const MAX_NORMAL_KEYS: usize = 8192;

/// Work a call may still spend before it must move to a dirty scheduler: a
/// normal-scheduler call's budget is [`NORMAL_BUDGET`], a dirty call's is
/// unlimited. Every step is charged *before* it runs, with the figures below.
pub struct Budget {
    remaining: u64,
    limited: bool,
    /// Bytes of the binaries whose ids were computed under this budget: what the
    /// VM then hashes or compares when such a term becomes a map key (the glue's
    /// batches charge it, [`map_key`]).
    binary_bytes: u64,
}

/// Why a charge failed: the budget of a normal-scheduler call ran out, and the
/// call must run again on a dirty scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NeedsDirty;

impl Budget {
    /// The budget of a normal-scheduler call.
    pub fn normal() -> Budget {
        Budget {
            remaining: NORMAL_BUDGET,
            limited: true,
            binary_bytes: 0,
        }
    }

    /// The budget of a dirty-scheduler call: unlimited.
    pub fn dirty() -> Budget {
        Budget {
            remaining: u64::MAX,
            limited: false,
            binary_bytes: 0,
        }
    }

    /// Whether this budget can run out (a normal-scheduler call).
    pub fn is_limited(&self) -> bool {
        self.limited
    }

    /// Units left (`u64::MAX` on a dirty scheduler): for deciding, before any
    /// work, that a call cannot fit (nothing is charged).
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// Notes `bytes` of a binary term hashed (see `binary_bytes`).
    #[inline(always)]
    pub fn note_binary(&mut self, bytes: usize) {
        self.binary_bytes = self.binary_bytes.wrapping_add(bytes as u64);
    }

    /// Binary bytes hashed so far (a running total: callers take differences).
    pub fn binary_bytes(&self) -> u64 {
        self.binary_bytes
    }

    /// Pays for a step the caller does itself, now: charges `units` and counts
    /// them as work done ([`work::count`]). The one call of most steps; a step
    /// whose work is done elsewhere (in a scan, a build) or counted as it goes is
    /// [`Budget::charge`]d, and counted where the work is done.
    #[inline(always)]
    pub fn pay(&mut self, units: u64) -> Result<(), NeedsDirty> {
        self.charge(units)?;
        work::count(units);
        Ok(())
    }

    /// Reserves `units` for work counted where it is done; fails when a normal
    /// call's budget would run out.
    #[inline]
    pub fn charge(&mut self, units: u64) -> Result<(), NeedsDirty> {
        if self.limited {
            if units > self.remaining {
                return Err(NeedsDirty);
            }
            self.remaining -= units;
            work::charged(units);
        }
        Ok(())
    }
}

/// The tally (feature `work-count`) of the work actually done, so a test can
/// check that every call paid for its work before doing it.
///
/// A caller with a [`Budget`] charges an upper bound of the work it is about to
/// do; the code that does the work *counts* it where it happens, in the same
/// units. With the feature off, every function here compiles to nothing.
///
/// Both tallies are per thread: a normal-scheduler NIF call runs on one thread
/// from start to end, so a probe that resets them, runs one call and reads them
/// sees that call alone.
pub mod work {
    #[cfg(feature = "work-count")]
    mod tally {
        use std::cell::Cell;

        thread_local! {
            pub static COUNTED: Cell<u64> = const { Cell::new(0) };
            pub static CHARGED: Cell<u64> = const { Cell::new(0) };
        }

        pub fn add(cell: &'static std::thread::LocalKey<Cell<u64>>, units: u64) {
            cell.with(|c| c.set(c.get().saturating_add(units)));
        }
    }

    /// Records `units` of work done on this thread (feature `work-count`).
    #[inline(always)]
    pub fn count(units: u64) {
        #[cfg(feature = "work-count")]
        tally::add(&tally::COUNTED, units);
        #[cfg(not(feature = "work-count"))]
        let _ = units;
    }

    /// Records `units` charged to a budget on this thread (feature `work-count`).
    #[inline(always)]
    pub fn charged(units: u64) {
        #[cfg(feature = "work-count")]
        tally::add(&tally::CHARGED, units);
        #[cfg(not(feature = "work-count"))]
        let _ = units;
    }

    /// Whether counting is compiled in.
    pub const fn enabled() -> bool {
        cfg!(feature = "work-count")
    }

    /// `(charged, counted)` on this thread since the last call, and resets both.
    pub fn take() -> (u64, u64) {
        #[cfg(feature = "work-count")]
        {
            (tally::CHARGED.take(), tally::COUNTED.take())
        }
        #[cfg(not(feature = "work-count"))]
        {
            (0, 0)
        }
    }
}

// ---------------------------------------------------------------------------
// Steps: the units everything else is made of

/// One N3 score of a prepared node (a scan step; `examples/scan_bench.rs` gives
/// ns per node by backend).
pub const SCORE: u64 = 2;
/// One weighted cost (N3 score, its logarithm, a division; bounds skip most logs).
pub const WEIGHTED_SCORE: u64 = 24;
/// One level of a skeleton descent (a coin, a compare, a dependent load).
pub const LEVEL: u64 = 4;
/// One element read, copied or written: a list cell, a tuple slot, a result term.
pub const ELEMENT: u64 = 2;
/// One term visited by the canonical term walk (hrw_nif's `term_id`): the type
/// test and reading a scalar (an integer of at most 64 bits, a float, a binary's
/// header, an atom name of at most 255 characters).
pub const TERM: u64 = 16;
/// Bytes hashed per unit (XXH3 hashes several bytes a nanosecond).
pub const BYTES_PER_UNIT: u64 = 16;
/// One comparison-and-move step of a comparison sort: a sort of `n` costs
/// `n * ceil(log2 n)` of these ([`sort`]). Every sort charged with it orders
/// 16-byte pairs or narrower (map entries `(key id, value id)` in the term walk,
/// `(id, index)` in [`crate::sort`], scores, u32 positions), with room for a
/// slower machine than the one a step of such a sort takes about a nanosecond on.
pub const SORT_STEP: u64 = 3;

/// Hashing `bytes` bytes (a partial stripe counts whole).
#[inline]
pub const fn hash(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(BYTES_PER_UNIT)
}

/// Sorting `n` elements (comparison sorts, hash-map building; [`crate::sort::by_id`]
/// does less).
#[inline]
pub const fn sort(n: usize) -> u64 {
    let n = n as u64;
    if n < 2 {
        n
    } else {
        n * (64 - (n - 1).leading_zeros() as u64) * SORT_STEP
    }
}

// ---------------------------------------------------------------------------
// The core's structures

/// [`crate::scan::top`] over `len` nodes: a score each, then a sort.
pub const fn top(len: usize) -> u64 {
    SCORE * len as u64 + sort(len) + ELEMENT * len as u64
}

/// [`crate::nodes::distinct`] over `n` pairs: a hash-map probe and insert each
/// (SipHash of a u64 and a possible table growth).
pub const fn distinct(n: usize) -> u64 {
    24 * ELEMENT * n as u64
}

/// [`crate::nodes::fingerprint`] over `n` nodes and `params` parameters: its words
/// written and hashed (whole 16-byte stripes: the words come in pairs).
pub const fn fingerprint(n: usize, params: usize) -> u64 {
    let words = (2 + 2 * n + params) as u64;
    ELEMENT * words + 8 * words / BYTES_PER_UNIT
}

/// `Ring::new` over `n` nodes: each id prepared, each weight compared and copied.
pub const fn ring_build(n: usize) -> u64 {
    3 * ELEMENT * n as u64
}

/// One `Ring::owner` over `n` nodes, an upper bound: a score of every node.
pub const fn ring_owner(n: usize, weighted: bool) -> u64 {
    let per = if weighted { WEIGHTED_SCORE } else { SCORE };
    per * n as u64
}

/// One `Ring::owners` over `n` nodes (any count), an upper bound: every node
/// scored, then sorted.
pub const fn ring_owners(n: usize, weighted: bool) -> u64 {
    if weighted {
        (WEIGHTED_SCORE + ELEMENT) * n as u64 + sort(n)
    } else {
        top(n)
    }
}

/// `Skeleton::build` over `n` input nodes, an upper bound: the sort by routing
/// key, then a bounded amount of work per node (routing key, trie slots, masses,
/// leaf blocks; fewer than `2n + 1` slots).
pub const fn skeleton_build(n: usize) -> u64 {
    sort(n) + 24 * ELEMENT * n as u64 + 16 * ELEMENT
}

/// What bounds a skeleton's lookups (the skeleton's `shape`).
pub struct SkeletonShape {
    /// Descent steps from the root to the deepest leaf.
    pub levels: u32,
    /// Trie slots.
    pub slots: usize,
    /// Distinct nodes.
    pub nodes: usize,
    /// Most nodes in a leaf.
    pub max_leaf: usize,
    /// Most ids a leaf scan reads (padding included).
    pub max_width: usize,
    pub weighted: bool,
}

/// One leaf pick of a skeleton, an upper bound, each membership test of the
/// taken set costing `per_taken` (0 when nothing is taken).
pub const fn skeleton_pick(shape: &SkeletonShape, per_taken: u64) -> u64 {
    let m = shape.max_leaf as u64;
    if shape.weighted {
        // Per node: its bounds (three times at most), one exact cost, two
        // membership tests; plus the first candidate's bounds and exact cost.
        m * (6 * SCORE + WEIGHTED_SCORE + 2 * per_taken) + 2 * SCORE + WEIGHTED_SCORE
    } else {
        m * (SCORE + per_taken)
    }
}

/// One `Skeleton::holds` (is this node at that index?): one read and one compare.
pub const SKELETON_HOLDS: u64 = ELEMENT + TERM;

/// One `Ring::holds`: one compare.
pub const RING_HOLDS: u64 = ELEMENT;

/// One `Skeleton::owner`, an upper bound: every level of the descent and the
/// widest leaf.
pub const fn skeleton_owner(shape: &SkeletonShape) -> u64 {
    let leaf = if shape.weighted {
        skeleton_pick(shape, 0)
    } else {
        shape.max_width as u64 * SCORE
    };
    LEVEL * shape.levels as u64 + leaf
}

/// One `Skeleton::owners_of` over `keys` keys, an upper bound: `keys` owners.
pub const fn skeleton_owners_of(shape: &SkeletonShape, keys: usize) -> u64 {
    (keys as u64).saturating_mul(skeleton_owner(shape))
}

/// One `Skeleton::owners` with `ranks` ranks (at most the nodes), an upper bound:
/// per rank a path of at most `levels + 1` slots, each asking the taken set twice,
/// and a leaf pick that skips the taken nodes. `dense` when the taken set is a
/// table over every slot and node (set up once, one probe a test) rather than a
/// list of the ranks so far.
pub fn skeleton_owners(shape: &SkeletonShape, ranks: usize, dense: bool) -> u64 {
    let c = ranks as u64;
    let per_taken = ELEMENT * if dense { 1 } else { c.max(1) };
    let setup = ELEMENT * c
        + if dense {
            ELEMENT * (shape.slots + shape.nodes) as u64
        } else {
            0
        };
    let path = shape.levels as u64 + 1;
    let per_rank = path * (LEVEL + 3 * per_taken) + skeleton_pick(shape, per_taken);
    setup + c * per_rank
}

/// [`crate::bounded::assign`] for `keys` keys and `nodes` nodes, an upper bound:
/// the sort of the keys, then per key a first-choice scan and, when that node is
/// full, a second scan of every node.
pub const fn assign(keys: usize, nodes: usize) -> u64 {
    let (k, n) = (keys as u64, nodes as u64);
    sort(keys) + 2 * ELEMENT * (k + n) + k * (2 * SCORE + ELEMENT) * n
}

// ---------------------------------------------------------------------------
// The term walk (hrw_nif's `term_id`)

/// Holding one child id of a tuple, list or map in its encoding (the 8 bytes of
/// every id are also charged as hashed bytes, [`ids`]).
pub const ID: u64 = 4;
/// Setting up and releasing the VM's iterator over one map.
pub const MAP: u64 = 64;
/// One step of the VM's map iterator (fetching an entry, advancing), besides the
/// visits of the entry's key and value. Large maps are HAMTs: iterating them is
/// several times slower than a list walk.
pub const MAP_ENTRY: u64 = 24;
/// One call into the VM's external term format: allocating the result binary, or
/// decoding a limit term (the largest of the fixed costs here: a pid, a reference
/// or a 2040-bit bignum each make one such call).
pub const ETF_CALL: u64 = 240;
/// ETF bytes written or read per unit (digits and names are copied as they are).
pub const ETF_BYTES_PER_UNIT: u64 = 2;
/// One lookup (or first store) in the per-VM atom-id cache: a hash of the atom's
/// term value and one or two probes of a static table.
pub const ATOM_CACHE: u64 = 4;
/// Reading an atom's name on a cache miss, besides its characters.
pub const ATOM_READ: u64 = 48;

/// Reading an atom's name of `chars` Latin-1 characters (the VM converts its
/// UTF-8 name a character at a time) and hashing it (UTF-8 takes at most two
/// bytes a Latin-1 character).
#[inline]
pub const fn atom_read(chars: usize) -> u64 {
    ATOM_READ + (chars as u64).div_ceil(2) + hash(1 + 2 * chars)
}

/// Copying an unaligned binary of `bytes` bytes to an aligned buffer, bit-shifting
/// every byte.
#[inline]
pub const fn copy(bytes: usize) -> u64 {
    bytes as u64
}

/// One ETF call that writes or reads `bytes` bytes.
#[inline]
pub const fn etf(bytes: usize) -> u64 {
    ETF_CALL + (bytes as u64).div_ceil(ETF_BYTES_PER_UNIT)
}

/// The buffer and hash of `n` child ids.
#[inline]
pub const fn ids(n: usize) -> u64 {
    n as u64 * ID + hash(8 * n + 1)
}

/// The iteration over a map of `n` entries (its setup and steps), charged with
/// [`ids`] of its `2n` ids and [`sort`] of its entries before it is read.
#[inline]
pub const fn map_iteration(n: usize) -> u64 {
    MAP + n as u64 * MAP_ENTRY
}

// ---------------------------------------------------------------------------
// Node lists, key lists and their answers (hrw_nif)

/// Per node of a node list, beyond its term id: the cell, the weight decode, three
/// pushes, the copy into the distinct terms, deduplication, and (weighted, with
/// repeated ids) the second pass that picks each kept weight's term.
pub const NODE_DECODE: u64 = 7 * ELEMENT + 2 * distinct(1);

/// The least a node of a list costs a build that then spends `build_per_node` on
/// it: its cell and share of [`NODE_DECODE`], one term visit, and the build's share.
pub const fn node_least(build_per_node: u64) -> u64 {
    NODE_DECODE + TERM + build_per_node
}

/// Per node of the list path's allocation-free owner scan, beyond hashing it: the
/// cell, two buffer pushes and the score.
pub const LIST_OWNER_NODE: u64 = 3 * ELEMENT + SCORE;

/// Counting `n` cells of a list without reading their heads.
pub const fn cells(n: usize) -> u64 {
    ELEMENT * n as u64
}

/// The struct fields a build answers for `n` distinct nodes and `params`
/// parameters: the nodes tuple, the weights tuple and the fingerprint.
pub const fn build_reply(n: usize, params: usize, weighted: bool) -> u64 {
    let weights = if weighted { ELEMENT * n as u64 } else { 0 };
    ELEMENT * n as u64 + weights + fingerprint(n, params) + TERM
}

/// A list of `count` owner indices (a prepared structure's `owners`).
pub const fn owner_indices(count: usize) -> u64 {
    ELEMENT * count as u64
}

/// A list of `count` owner terms picked from a node list (the list path's
/// `owners`): each term gathered, then its cell.
pub const fn owner_terms(count: usize) -> u64 {
    2 * ELEMENT * count as u64
}

// ---------------------------------------------------------------------------
// Batches and bounded assignments (hrw_nif), and the VM's map builder

/// Per key of a batch beyond hashing it (charged by the term walk) and looking it
/// up (charged per target): the cell, the id and term buffers, the owner index,
/// and its share of the result (a list cell and term, or a `{key, from, to}`
/// tuple).
pub const BATCH_KEY: u64 = 8 * ELEMENT;

/// Per key of a batch over `targets` targets whose lookups cost `lookups` together:
/// [`BATCH_KEY`], and per target the lookup and its owner index.
pub const fn batch_key(lookups: u64, targets: usize) -> u64 {
    BATCH_KEY + lookups + ELEMENT * targets as u64
}

/// Grouping `n` keys by owner, an upper bound: their positions sorted by owner
/// (a stable sort) and gathered into one list per owner.
pub const fn groups(n: usize) -> u64 {
    2 * sort(n) + 2 * ELEMENT * n as u64
}

/// One lookup in a batch's table of node ids (a hash map probe or insert).
pub const ID_LOOKUP: u64 = 16 * ELEMENT;

/// VM work units per byte of a binary in a map key: the VM's internal hash of a
/// binary and its byte-wise compares (test/hrw/budget_test.exs, "the found
/// uncharged work is charged": a map of 40 one-megabyte nodes goes dirty).
pub const MAP_KEY_PER_BYTE: u64 = 1;

/// Most keys of a map the VM keeps flat (`MAP_SMALL_MAP_LIMIT`): it sorts them by
/// insertion sort, so a key may be compared with every other.
pub const FLAT_MAP_KEYS: usize = 32;

/// What the VM spends on a term as a map key (hashing it, or comparing it with
/// another) when its walk charged `walk_units` (at least [`TERM`] a term) and
/// hashed `binary_bytes` bytes of binaries.
pub const fn map_key(walk_units: u64, binary_bytes: u64) -> u64 {
    walk_units + MAP_KEY_PER_BYTE * binary_bytes
}

/// What the VM's map builder spends on `n` keys whose [`map_key`] costs sum to
/// `key_costs`: each hashed once and compared on a hash match (a large map), or
/// compared with up to every other key (a flat map's insertion sort).
pub fn map_keys(key_costs: u64, n: usize) -> u64 {
    let per_key = if n > FLAT_MAP_KEYS {
        3
    } else {
        n.max(2) as u64
    };
    key_costs.saturating_mul(per_key)
}

/// Per key of a bounded assignment over `nodes` nodes, beyond hashing it: the
/// cell, the entry, its node scans (a first choice, and a second scan when that
/// node is full), and its result entry.
pub const fn bounded_key(nodes: usize) -> u64 {
    6 * ELEMENT + assign(1, nodes)
}

/// A bounded assignment of `keys` keys to `nodes` nodes beyond its per-key share
/// ([`bounded_key`]) and its result map's keys ([`map_keys`]): two sorts (its own,
/// for the assignment's order, and the result map's), the dedup and the id copy,
/// the node ids, and the assignment's own pass over keys and nodes.
pub const fn bounded_rest(keys: usize, nodes: usize) -> u64 {
    2 * sort(keys) + 4 * ELEMENT * keys as u64 + 2 * ELEMENT * nodes as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sort_cost_grows_as_n_log_n() {
        assert_eq!(sort(0), 0);
        assert_eq!(sort(1), 1);
        assert_eq!(sort(2), 2 * SORT_STEP);
        assert_eq!(sort(1024), 1024 * 10 * SORT_STEP);
        assert_eq!(sort(1025), 1025 * 11 * SORT_STEP);
    }
}
