//! Binaries that start off a byte boundary (`<<_::1, k::binary, _::7>>`):
//! `enif_inspect_binary` copies such a binary into an aligned buffer, O(size),
//! before the caller learns its size, and the NIF API has no other way to ask.
//! So the size is read here, from the sub-binary's header, and charged first.
//!
//! Two layouts, each a header word (subtag, and an arity of at least 3 words) and
//! then:
//! - ERTS 13 and 14 (OTP 25, 26), `ErlSubBin` (erl_binary.h), subtag 0xA: the size
//!   in bytes, the byte offset, and a word whose second byte is the bit offset;
//! - ERTS 15 to 17 (OTP 27 to 29), `ErlSubBits` (erl_bits.h), subtag 0x9 (header
//!   0x124 seen on OTP 27.3 and 29.1): the base pointer with flags, then the start
//!   and end offsets in bits (the start is bumped by whole bytes to make room for
//!   the flags, so its low 3 bits are the bit offset).
//!
//! Any other ERTS: [`unaligned_size`] says `None` and the copy stays uncharged.
//! The caller checks the size read against what the VM then reports, and a
//! mismatch turns the reading off for good ([`disable`]); test/hrw/budget_test.exs
//! checks on every leg of the test matrix that the size is read.

use rustler::sys::{enif_system_info, ErlNifSysInfo, ErlNifTerm};
use std::sync::atomic::{AtomicUsize, Ordering};

/// `_make_header(ERL_SUB_BIN_SIZE - 2, _TAG_HEADER_SUB_BIN)`: the low 6 bits are
/// the subtag (0xA << 2, primary tag 00), the rest the arity (3 words follow
/// that the header covers: size, offs, and the bit fields).
const SUB_BIN_TAG: usize = 0x28;
/// The same for `ErlSubBits` (subtag 0x9 << 2).
const SUB_BITS_TAG: usize = 0x24;
const HEADER_TAG_MASK: usize = 0x3F;
const SUB_BIN_ARITY: usize = 3;

/// The header tag of this VM's sub-binaries, the one value the per-binary check
/// compares with (its layout follows from it); or `UNDECIDED` before [`detect`],
/// or `OFF`. Both are above `HEADER_TAG_MASK`, so no header matches them.
static SUB_TAG: AtomicUsize = AtomicUsize::new(UNDECIDED);
const UNDECIDED: usize = 0x80;
const OFF: usize = 0x40;

/// Decides the layout for this VM; called by the NIF's load and upgrade callbacks
/// (init.rs), so that the per-binary check below reads a settled value. A layout
/// turned off ([`disable`]) stays off across reloads.
pub fn detect() {
    if SUB_TAG.load(Ordering::Relaxed) == UNDECIDED {
        let tag = match erts_major() {
            // `ErlSubBin` (little-endian only: the bit offset's byte in its word).
            Some(13 | 14) if cfg!(target_endian = "little") => SUB_BIN_TAG,
            Some(15..=17) => SUB_BITS_TAG,
            _ => OFF,
        };
        SUB_TAG.store(tag, Ordering::Relaxed);
    }
}

/// The ERTS major version of the running VM.
fn erts_major() -> Option<u32> {
    let mut info = std::mem::MaybeUninit::<ErlNifSysInfo>::zeroed();
    // SAFETY: `info` is a writable, zeroed struct of the size passed; the VM fills
    // at most that many bytes. `erts_version` then points at a static C string of
    // the VM (or stays null).
    let version = unsafe {
        enif_system_info(info.as_mut_ptr(), std::mem::size_of::<ErlNifSysInfo>());
        let ptr = info.assume_init().erts_version;
        if ptr.is_null() {
            return None;
        }
        std::ffi::CStr::from_ptr(ptr).to_str().ok()?.to_owned()
    };
    version.split('.').next()?.parse().ok()
}

/// A read that the VM contradicted: never read the layout again.
pub fn disable() {
    SUB_TAG.store(OFF, Ordering::Relaxed);
}

/// The byte size of `raw`, a term the VM says is a whole-byte binary, when it is
/// a sub-binary starting off a byte boundary (whose inspection copies it); `None`
/// when it is aligned, or when the layout is not known for this VM.
///
/// On the path of every binary hashed on a normal scheduler: one load of
/// `SUB_TAG`, one of the header word (which `enif_inspect_binary` reads next
/// anyway) and a compare; the rest is out of line.
#[inline(always)]
pub fn unaligned_size(raw: ErlNifTerm) -> Option<usize> {
    // SAFETY: `ErlNifTerm` is `#[repr(transparent)]` over a `usize`.
    let bits = unsafe { std::mem::transmute::<ErlNifTerm, usize>(raw) };
    if bits & 0x3 != 0x2 {
        return None;
    }
    let ptr = (bits & !0x3) as *const usize;
    // SAFETY: a boxed term (primary tag 10) of a live binary points at its header
    // word.
    let header = unsafe { ptr.read() };
    if header & HEADER_TAG_MASK != SUB_TAG.load(Ordering::Relaxed) {
        return None;
    }
    sub_binary_size(ptr, header)
}

/// The size of the sub-binary at `ptr` when it starts off a byte boundary.
#[cold]
#[inline(never)]
fn sub_binary_size(ptr: *const usize, header: usize) -> Option<usize> {
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
