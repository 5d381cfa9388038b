//! Erlang NIF glue for `hrw_core`: the only place that turns terms into ids.
//!
//! Its rooms, each with one job (a module imports only modules above it in this
//! list, or its own children):
//!
//! | module | job |
//! |---|---|
//! | `errors` | how a NIF says no: `ArgumentError`, a stale resource (imported only where one is built) |
//! | `budget` | the work budget (`hrw_core::cost::Budget`: a step pays with one call, `pay`), `Outcome`, what each step returns, and the report to the scheduler |
//! | `nif` | the NIF wrapper macro (`nif!`): decoding, scheduling, probes |
//! | `bits`, `tuple_view` | reading the VM's terms in place (`bits`: the sub-binary header, no VM call) |
//! | `term_id` | term ids (and the `term_id` and `score` NIFs) |
//! | `cells` | the one walk over a list's cells (node lists, key lists) |
//! | `weighted` | `{node, weight}` entries (and the `weighted_score` NIF) |
//! | `nodeset` | a node list decoded: ids, weights, distinct terms; the per-call ring |
//! | `list` | the stateless list path (`list_owner`, `list_owners`) |
//! | `resource`, `prepared`, `ring`, `skeleton` | prepared structures in NIF resources |
//! | `batch`, `bounded` | many keys in one call |
//! | `init` | the library's entry (load and upgrade callbacks) and its function table |
//!
//! Every NIF is declared by one `nif!` line beside the function it wraps (nif.rs)
//! and listed in init.rs's function table; lib/hrw/native.ex holds its stubs.

mod batch;
mod bits;
mod bounded;
mod budget;
mod cells;
mod errors;
mod init;
mod list;
mod nif;
mod nodeset;
mod prepared;
mod resource;
mod ring;
mod skeleton;
mod term_id;
mod tuple_view;
mod weighted;

use std::alloc::{GlobalAlloc, Layout};

// The library's entry (`nif_init`, with load and upgrade callbacks, and the
// function table) is in init.rs.

/// Rust allocations of the NIF (term walks, node lists, batches) come from the VM's
/// allocator, which keeps freed carriers for reuse: with the system allocator every
/// build of thousands of nodes maps fresh pages for its buffers and faults them in.
#[global_allocator]
static ALLOCATOR: VmAllocator = VmAllocator;

/// `rustler::EnifAllocator`, plus a `realloc` that grows in place through
/// `enif_realloc` (rustler's falls back to allocate, copy and free, which made
/// every growing vector copy itself).
struct VmAllocator;

/// The alignment `enif_alloc` guarantees (as rustler's allocator assumes).
const VM_ALIGN: usize = 8;

// SAFETY: every block comes from `EnifAllocator` (alloc) or from `enif_realloc` of
// such a block with an alignment `enif_alloc` already guarantees, and goes back
// through `EnifAllocator` (dealloc), which frees either kind with `enif_free`.
unsafe impl GlobalAlloc for VmAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { rustler::EnifAllocator.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { rustler::EnifAllocator.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.align() <= VM_ALIGN {
            // SAFETY: `ptr` was allocated by `enif_alloc` (alignment ≤ 8 takes that
            // path in `EnifAllocator`) with `layout`; `enif_realloc` keeps the
            // contents up to the smaller size, and its result is freed by
            // `enif_free` like any block of `enif_alloc`.
            return unsafe { rustler::sys::enif_realloc(ptr.cast(), new_size) }.cast();
        }
        // SAFETY: as `GlobalAlloc::realloc`'s default: a new block of the same
        // alignment, the old contents copied, the old block freed.
        unsafe {
            let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
            let new = self.alloc(new_layout);
            if !new.is_null() {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
            new
        }
    }
}
