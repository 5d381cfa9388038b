//! Binaries that start off a byte boundary (`<<_::1, k::binary, _::7>>`):
//! `enif_inspect_binary` copies such a binary into an aligned buffer, O(size),
//! before the caller learns its size, and the NIF API has no other way to ask.
//! So the size is read here, from the sub-binary's header, and charged first.
//!
//! This reads the VM's private term layout (docs/MAINTAINING.md, "Internals we rely
//! on"), behind a version gate and a self-disabling check:
//! - [`detect`], from the load callback with the ERTS major version (init.rs),
//!   picks the layout of that version; any other version turns the reading off;
//! - any ERTS whose layout is not known: [`unaligned_size`] says `None` and the copy
//!   stays uncharged (the id is the same: only the charge differs). The caller
//!   checks the size read against what the VM then reports, and a mismatch turns
//!   the reading off for good ([`disable`]).
//!
//! test/hrw/budget_test.exs checks on every leg of the test matrix that the size is
//! read. No VM call in this file: tests/bits_layout.rs compiles it alone and runs
//! it on fake terms, with each version gate and the fallback.
//!
//! The layout. A boxed term (primary tag `10`) is a pointer to its header word with
//! tag bits in its low bits: ERTS clears `TAG_PTR_MASK__` (erl_term.h) to get the
//! pointer, three bits on 64-bit VMs and two on 32-bit ones. The third bit is set
//! on literal terms when the VM has no physical memory reservation
//! (`TAG_LITERAL_PTR`, 0x4: Windows, and debug emulators), so clearing two bits
//! would leave a pointer 4 bytes into the header.
//!
//! Two sub-binary layouts, each a header word (subtag, and an arity of at least 3
//! words) and then:
//! - ERTS 13 and 14 (OTP 25, 26), `ErlSubBin` (erl_binary.h), subtag 0xA: the size
//!   in bytes, the byte offset, and a word whose second byte is the bit offset;
//! - ERTS 15 to 17 (OTP 27 to 29), `ErlSubBits` (erl_bits.h), subtag 0x9 (header
//!   0x124 seen on OTP 27.3 and 29.1): the base pointer with flags, then the start
//!   and end offsets in bits (the start is bumped by whole bytes to make room for
//!   the flags, so its low 3 bits are the bit offset).

use std::sync::atomic::{AtomicUsize, Ordering};

/// The header tag of this VM's sub-binaries, the one value the per-binary check
/// compares with (its layout follows from it); or `UNDECIDED` before [`detect`],
/// or `OFF`. Both are above `HEADER_TAG_MASK`, so no header matches them.
static SUB_TAG: AtomicUsize = AtomicUsize::new(UNDECIDED);
const UNDECIDED: usize = 0x80;
const OFF: usize = 0x40;
const _: () = assert!(UNDECIDED > HEADER_TAG_MASK && OFF > HEADER_TAG_MASK);

/// Decides the layout for the running VM, of ERTS major version `erts_major`
/// (`None` when the VM did not say); called by the NIF's load and upgrade
/// callbacks (init.rs), so that the per-binary check below reads a settled value.
/// A layout turned off ([`disable`]) stays off across reloads.
pub fn detect(erts_major: Option<u32>) {
    if SUB_TAG.load(Ordering::Relaxed) == UNDECIDED {
        SUB_TAG.store(layout_of(erts_major), Ordering::Relaxed);
    }
}

/// The sub-binary header tag of ERTS major version `erts_major`, or `OFF` for a
/// version whose layout is not known here.
pub fn layout_of(erts_major: Option<u32>) -> usize {
    match erts_major {
        // `ErlSubBin` (little-endian only: the bit offset's byte in its word).
        Some(13 | 14) if cfg!(target_endian = "little") => SUB_BIN_TAG,
        Some(15..=17) => SUB_BITS_TAG,
        _ => OFF,
    }
}

/// Test builds: sets the layout as [`detect`] would for `erts_major`, whatever it
/// was (`None`: off), so that a test can run the fallback and compare its answers.
#[cfg(feature = "work-probes")]
pub fn force(erts_major: Option<u32>) {
    SUB_TAG.store(layout_of(erts_major), Ordering::Relaxed);
}

/// A read that the VM contradicted: never read the layout again.
pub fn disable() {
    SUB_TAG.store(OFF, Ordering::Relaxed);
}

/// For the term word `term` of any type (a live term of the running call): when
/// it is a sub-binary that starts off a byte boundary (whose inspection copies
/// it), its size in bytes; `None` for any other term (immediates and lists
/// without a memory read, other boxed terms after reading their header), and when
/// the layout is not known for this VM.
///
/// On the path of every boxed term hashed on a normal scheduler: one load of
/// `SUB_TAG`, one of the header word (which `enif_inspect_binary` reads next
/// anyway) and a compare; the rest is out of line.
///
/// # Safety
/// As [`unaligned_size_as`]: `term` is a live term.
#[inline(always)]
pub unsafe fn unaligned_size(term: usize) -> Option<usize> {
    // SAFETY: the caller's; `SUB_TAG` is a sub-binary tag of this VM's layout, or a
    // value no header has.
    unsafe { unaligned_size_as(term, SUB_TAG.load(Ordering::Relaxed)) }
}

/// ERTS's `_TAG_PRIMARY_MASK`, and the primary tag of a boxed term.
pub const PRIMARY_MASK: usize = 0x3;
pub const PRIMARY_BOXED: usize = 0x2;

/// ERTS's `TAG_PTR_MASK__`: the low bits of a boxed term that are not pointer.
#[cfg(target_pointer_width = "64")]
pub const TAG_PTR_MASK: usize = 0x7;
#[cfg(not(target_pointer_width = "64"))]
pub const TAG_PTR_MASK: usize = 0x3;

/// `_make_header(ERL_SUB_BIN_SIZE - 2, _TAG_HEADER_SUB_BIN)`: the low 6 bits are
/// the subtag (0xA << 2, primary tag 00), the rest the arity (3 words follow
/// that the header covers: size, offs, and the bit fields).
pub const SUB_BIN_TAG: usize = 0x28;
/// The same for `ErlSubBits` (subtag 0x9 << 2).
pub const SUB_BITS_TAG: usize = 0x24;
/// The header bits that hold the primary tag and the subtag.
pub const HEADER_TAG_MASK: usize = 0x3F;
/// Words after a sub-binary's header that are read.
pub const SUB_BIN_ARITY: usize = 3;

/// The header pointer of the term word `term` if it is boxed, else `None`.
#[inline(always)]
pub fn boxed_ptr(term: usize) -> Option<*const usize> {
    if term & PRIMARY_MASK != PRIMARY_BOXED {
        return None;
    }
    let ptr = (term & !TAG_PTR_MASK) as *const usize;
    // Heap words are word-aligned, and the mask clears at least the bits that
    // alignment leaves zero.
    debug_assert_eq!(ptr as usize % std::mem::align_of::<usize>(), 0);
    Some(ptr)
}

/// For the term word `term` of any type: when it is a boxed term whose header has
/// the subtag `sub_tag` (the sub-binary tag of this VM, [`SUB_BIN_TAG`] or
/// [`SUB_BITS_TAG`]; any other value matches no header) and that sub-binary
/// starts off a byte boundary, its size in bytes; else `None`.
///
/// # Safety
/// `term` is a live term: if boxed, it points (tag bits cleared) at the header
/// word of its object, as every boxed term does, and an object whose header has a
/// sub-binary subtag with an arity of at least [`SUB_BIN_ARITY`] has that many
/// readable words after its header.
#[inline(always)]
pub unsafe fn unaligned_size_as(term: usize, sub_tag: usize) -> Option<usize> {
    let ptr = boxed_ptr(term)?;
    // SAFETY: the header word of a live boxed term (the contract), aligned.
    let header = unsafe { ptr.read() };
    if header & HEADER_TAG_MASK != sub_tag {
        return None;
    }
    // SAFETY: a sub-binary's header (the tag matched), as the contract requires.
    unsafe { sub_binary_size(ptr, header) }
}

/// The size of the sub-binary at `ptr` when it starts off a byte boundary.
///
/// # Safety
/// `ptr` is the aligned header of a sub-binary of the layout its tag names; the
/// arity is checked here before the words after it are read.
#[cold]
#[inline(never)]
unsafe fn sub_binary_size(ptr: *const usize, header: usize) -> Option<usize> {
    if header >> 6 < SUB_BIN_ARITY {
        return None;
    }
    // SAFETY: `ptr` is a sub-binary's header whose arity covers the three words
    // after it (checked above).
    unsafe {
        if header & HEADER_TAG_MASK == SUB_BIN_TAG {
            let size = ptr.add(1).read();
            let bit_offset = (ptr.add(3).read() >> 8) & 0xFF;
            (bit_offset != 0).then_some(size)
        } else {
            let (start, end) = (ptr.add(2).read(), ptr.add(3).read());
            (start & 7 != 0 && end >= start).then_some((end - start) >> 3)
        }
    }
}
