//! [`IdStack`]: the one buffer a term walk builds every nested encoding on.

use super::tags::{tag, TERM_SEED};
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// The encodings of nested tuples, lists and maps, built on one shared buffer as a
/// walker visits a term depth first: [`open`](IdStack::open) a container,
/// [`push`](IdStack::push) its children's ids as they are known (a child container
/// is opened and closed above its parent's ids meanwhile), then
/// [`close`](IdStack::close) it with its tag (a list is known to be improper only at
/// its tail) to get its id. Maps collect `(key id, value id)` entries instead, sorted
/// when closed. Nothing is allocated until the buffers outgrow their inline part,
/// and a walker's stack frames need no buffer of their own.
pub struct IdStack {
    bytes: Spill<u8, 192>,
    entries: Spill<(u64, u64), 8>,
}

/// Where a container's encoding starts in an [`IdStack`].
#[derive(Clone, Copy)]
pub struct Mark(usize);

impl Default for IdStack {
    fn default() -> Self {
        IdStack::new()
    }
}

impl IdStack {
    #[inline]
    pub fn new() -> IdStack {
        IdStack {
            bytes: Spill::new(),
            entries: Spill::new(),
        }
    }

    /// Starts a tuple or list (its tag is given at [`close`](IdStack::close)).
    #[inline]
    pub fn open(&mut self) -> Mark {
        let mark = Mark(self.bytes.len());
        self.bytes.extend(&[0]);
        mark
    }

    /// Room for `ids` more ids without growing (an optimisation only).
    #[inline]
    pub fn reserve(&mut self, ids: usize) {
        self.bytes.reserve(8 * ids);
    }

    /// Appends the next child id of the innermost open tuple or list.
    #[inline]
    pub fn push(&mut self, id: u64) {
        self.bytes.extend(&id.to_le_bytes());
    }

    /// Ends the innermost open tuple or list, which has type tag `tag`; its id.
    #[inline]
    pub fn close(&mut self, mark: Mark, tag: u8) -> u64 {
        let encoding = &mut self.bytes.as_mut_slice()[mark.0..];
        encoding[0] = tag;
        let id = xxh3_64_with_seed(encoding, TERM_SEED);
        self.bytes.truncate(mark.0);
        id
    }

    /// Starts a map.
    #[inline]
    pub fn open_map(&mut self) -> Mark {
        Mark(self.entries.len())
    }

    /// Room for `n` more map entries without growing (an optimisation only).
    #[inline]
    pub fn reserve_entries(&mut self, n: usize) {
        self.entries.reserve(n);
    }

    /// Appends an entry of the innermost open map.
    #[inline]
    pub fn push_entry(&mut self, key: u64, value: u64) {
        self.entries.extend(&[(key, value)]);
    }

    /// The number of entries pushed since `mark`.
    #[inline]
    pub fn entries_since(&self, mark: Mark) -> usize {
        self.entries.len() - mark.0
    }

    /// Ends the innermost open map: sorts its entries by (key id, value id) and
    /// returns its id. (Not inlined: the sort's scratch space then stays off the
    /// stack frames of a recursive walker.)
    #[inline(never)]
    pub fn close_map(&mut self, mark: Mark) -> u64 {
        let entries = &mut self.entries.as_mut_slice()[mark.0..];
        entries.sort_unstable();
        let at = Mark(self.bytes.len());
        self.bytes.reserve(1 + 16 * entries.len());
        self.bytes.extend(&[0]);
        for &(k, v) in entries.iter() {
            self.bytes.extend(&k.to_le_bytes());
            self.bytes.extend(&v.to_le_bytes());
        }
        self.entries.truncate(mark.0);
        self.close(at, tag::MAP)
    }
}

/// A stack of `T` held inline up to `N` items, on the heap beyond.
struct Spill<T: Copy + Default, const N: usize> {
    inline: [T; N],
    len: usize,
    heap: Vec<T>,
}

impl<T: Copy + Default, const N: usize> Spill<T, N> {
    #[inline]
    fn new() -> Self {
        Spill {
            inline: [T::default(); N],
            len: 0,
            heap: Vec::new(),
        }
    }

    #[inline]
    fn spilled(&self) -> bool {
        self.heap.capacity() != 0
    }

    #[inline]
    fn len(&self) -> usize {
        if self.spilled() {
            self.heap.len()
        } else {
            self.len
        }
    }

    #[inline]
    fn reserve(&mut self, more: usize) {
        if self.spilled() || self.len + more > N {
            self.reserve_heap(more);
        }
    }

    #[inline(never)]
    fn reserve_heap(&mut self, more: usize) {
        if self.spilled() {
            self.heap.reserve(more);
        } else {
            let mut heap = Vec::with_capacity((self.len + more).max(2 * N));
            heap.extend_from_slice(&self.inline[..self.len]);
            self.heap = heap;
        }
    }

    #[inline]
    fn extend(&mut self, items: &[T]) {
        if !self.spilled() && self.len + items.len() <= N {
            self.inline[self.len..self.len + items.len()].copy_from_slice(items);
            self.len += items.len();
        } else {
            self.grow(items);
        }
    }

    #[inline(never)]
    fn grow(&mut self, items: &[T]) {
        self.reserve_heap(items.len());
        self.heap.extend_from_slice(items);
    }

    #[inline]
    fn truncate(&mut self, len: usize) {
        if self.spilled() {
            self.heap.truncate(len);
        } else {
            self.len = self.len.min(len);
        }
    }

    #[inline]
    fn as_mut_slice(&mut self) -> &mut [T] {
        if self.spilled() {
            &mut self.heap
        } else {
            &mut self.inline[..self.len]
        }
    }
}
