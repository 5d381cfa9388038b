//! Binaries that start off a byte boundary (`<<_::1, k::binary, _::7>>`):
//! `enif_inspect_binary` copies such a binary into an aligned buffer, O(size),
//! before the caller learns its size, and the NIF API has no other way to ask.
//! So the size is read here, from the sub-binary's header, and charged first.
//!
//! The layout is OTP 25/26's `ErlSubBin` (erl_binary.h): a header word with
//! subtag `SUB_BINARY_SUBTAG`, then the size in bytes, the byte offset, and a word
//! whose second byte is the bit offset. It is read only on ERTS 13 and 14 (OTP 25,
//! 26), where it was checked; elsewhere [`unaligned_size`] says `None` and the
//! copy stays uncharged (OTP 27 changed binaries to `ErlSubBits`). The caller
//! checks the size read against what the VM then reports, and a mismatch turns
//! the reading off for good ([`disable`]).

use rustler::sys::{enif_system_info, ErlNifSysInfo, ErlNifTerm};
use std::sync::atomic::{AtomicU8, Ordering};

/// `_make_header(ERL_SUB_BIN_SIZE - 2, _TAG_HEADER_SUB_BIN)`: the low 6 bits are
/// the subtag (0xA << 2, primary tag 00), the rest the arity (3 words follow
/// that the header covers: size, offs, and the bit fields).
const SUB_BIN_TAG: usize = 0x28;
const HEADER_TAG_MASK: usize = 0x3F;
const SUB_BIN_ARITY: usize = 3;

/// 0 = not yet decided, 1 = layout known, 2 = off (little-endian only: the bit
/// offset's byte position in its word).
static STATE: AtomicU8 = AtomicU8::new(0);

fn layout_known() -> bool {
    match STATE.load(Ordering::Relaxed) {
        1 => true,
        2 => false,
        _ => {
            let known =
                cfg!(target_endian = "little") && erts_major().is_some_and(|m| m == 13 || m == 14);
            STATE.store(if known { 1 } else { 2 }, Ordering::Relaxed);
            known
        }
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
    STATE.store(2, Ordering::Relaxed);
}

/// The byte size of `raw`, a term the VM says is a whole-byte binary, when it is
/// a sub-binary starting off a byte boundary (whose inspection copies it); `None`
/// when it is aligned, or when the layout is not known for this VM.
#[inline]
pub fn unaligned_size(raw: ErlNifTerm) -> Option<usize> {
    if !layout_known() {
        return None;
    }
    // SAFETY: `ErlNifTerm` is `#[repr(transparent)]` over a `usize`.
    let bits = unsafe { std::mem::transmute::<ErlNifTerm, usize>(raw) };
    if bits & 0x3 != 0x2 {
        return None;
    }
    let ptr = (bits & !0x3) as *const usize;
    // SAFETY: a boxed term (primary tag 10) of a live binary points at its header
    // word; the words after it are read only when the header says this is a
    // sub-binary covering at least those three words.
    unsafe {
        let header = ptr.read();
        if header & HEADER_TAG_MASK != SUB_BIN_TAG || header >> 6 < SUB_BIN_ARITY {
            return None;
        }
        let size = ptr.add(1).read();
        let bit_fields = ptr.add(3).read();
        let bit_offset = (bit_fields >> 8) & 0xFF;
        (bit_offset != 0).then_some(size)
    }
}
