//! Binaries that start off a byte boundary (`<<_::1, k::binary, _::7>>`):
//! `enif_inspect_binary` copies such a binary into an aligned buffer, O(size),
//! before the caller learns its size, and the NIF API has no other way to ask.
//! So the size is read here, from the sub-binary's header ([`layout`]), and
//! charged first.
//!
//! Any ERTS whose layout is not known: [`unaligned_size`] says `None` and the copy
//! stays uncharged. The caller checks the size read against what the VM then
//! reports, and a mismatch turns the reading off for good ([`disable`]);
//! test/hrw/budget_test.exs checks on every leg of the test matrix that the size
//! is read.

mod layout;

use rustler::sys::{enif_system_info, ErlNifSysInfo, ErlNifTerm};
use std::sync::atomic::{AtomicUsize, Ordering};

use layout::{HEADER_TAG_MASK, SUB_BIN_TAG, SUB_BITS_TAG};

/// The header tag of this VM's sub-binaries, the one value the per-binary check
/// compares with (its layout follows from it); or `UNDECIDED` before [`detect`],
/// or `OFF`. Both are above `HEADER_TAG_MASK`, so no header matches them.
static SUB_TAG: AtomicUsize = AtomicUsize::new(UNDECIDED);
const UNDECIDED: usize = 0x80;
const OFF: usize = 0x40;
const _: () = assert!(UNDECIDED > HEADER_TAG_MASK && OFF > HEADER_TAG_MASK);

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

/// For `raw`, a term of any type: when it is a sub-binary that starts off a byte
/// boundary (whose inspection copies it), its size in bytes; `None` for any other
/// term (immediates and lists without a memory read, other boxed terms after
/// reading their header), and when the layout is not known for this VM.
///
/// On the path of every boxed term hashed on a normal scheduler: one load of
/// `SUB_TAG`, one of the header word (which `enif_inspect_binary` reads next
/// anyway) and a compare; the rest is out of line.
#[inline(always)]
pub fn unaligned_size(raw: ErlNifTerm) -> Option<usize> {
    // SAFETY: `ErlNifTerm` is `#[repr(transparent)]` over a `usize`.
    let bits = unsafe { std::mem::transmute::<ErlNifTerm, usize>(raw) };
    // SAFETY: `raw` is a live term of the running call, so a boxed one points at
    // its object's header (what `layout::unaligned_size` requires); `SUB_TAG` is a
    // sub-binary tag of this VM's layout, or a value no header has.
    unsafe { layout::unaligned_size(bits, SUB_TAG.load(Ordering::Relaxed)) }
}
