//! The sub-binary reading of src/bits.rs on fake terms: term words built here,
//! pointing at aligned fake objects. (The crate itself links against the VM and
//! has no test binary; this file compiles bits.rs, which makes no VM call, alone.)

#[path = "../src/bits.rs"]
#[allow(dead_code)]
mod bits;

use bits::{unaligned_size_as, SUB_BIN_TAG, SUB_BITS_TAG, TAG_PTR_MASK};

/// A fake object: a header and three words, aligned as heap words are.
#[repr(C, align(8))]
struct Object([usize; 4]);

/// An `ErlSubBin` (OTP 25, 26) of `size` bytes starting `bit_offset` bits into
/// its first byte.
fn sub_bin(size: usize, bit_offset: usize) -> Object {
    Object([(3 << 6) | SUB_BIN_TAG, size, 0, bit_offset << 8])
}

/// An `ErlSubBits` (OTP 27 to 29) from bit `start` to bit `end`.
fn sub_bits(start: usize, end: usize) -> Object {
    Object([(3 << 6) | SUB_BITS_TAG, 0, start, end])
}

/// The boxed term word of `object`, with the extra tag bits `tag` (0, or the
/// literal tag 0x4 on 64-bit VMs).
fn boxed(object: &Object, tag: usize) -> usize {
    let address = object as *const Object as usize;
    assert_eq!(address & 0x7, 0);
    address | tag | 0x2
}

fn read(term: usize, sub_tag: usize) -> Option<usize> {
    // SAFETY: every term word here is an immediate, or boxed and pointing (tag bits
    // cleared) at a live `Object`, whose four words cover a header of arity 3.
    unsafe { unaligned_size_as(term, sub_tag) }
}

#[test]
fn a_sub_binary_off_a_byte_boundary_gives_its_size_in_both_layouts() {
    let old = sub_bin(1000, 3);
    assert_eq!(read(boxed(&old, 0), SUB_BIN_TAG), Some(1000));
    let new = sub_bits(8 * 16 + 5, 8 * 16 + 5 + 8 * 777);
    assert_eq!(read(boxed(&new, 0), SUB_BITS_TAG), Some(777));
}

#[test]
fn aligned_sub_binaries_and_other_layouts_give_none() {
    let aligned = sub_bin(1000, 0);
    assert_eq!(read(boxed(&aligned, 0), SUB_BIN_TAG), None);
    let aligned = sub_bits(8 * 16, 8 * 16 + 8 * 10);
    assert_eq!(read(boxed(&aligned, 0), SUB_BITS_TAG), None);
    // The layout of another ERTS (or `OFF`) matches no header.
    let old = sub_bin(1000, 3);
    assert_eq!(read(boxed(&old, 0), SUB_BITS_TAG), None);
    assert_eq!(read(boxed(&old, 0), 0x40), None);
}

// The function is called for every boxed term, not only binaries: a tuple, a map
// or a bignum reads its header and stops there.
#[test]
fn other_boxed_terms_give_none() {
    let tuple = Object([3 << 6, 0x3F, 0x3F, 0x3F]); // {a, b, c}: ARITYVAL subtag 0
    let float = Object([(1 << 6) | 0x18, 0, 0, 0]); // FLOAT_DEF, subtag 0x6
    let map = Object([0x3C, 0, 0, 0]); // MAP_DEF, subtag 0xF
    for object in [&tuple, &float, &map] {
        assert_eq!(read(boxed(object, 0), SUB_BIN_TAG), None);
        assert_eq!(read(boxed(object, 0), SUB_BITS_TAG), None);
    }
}

#[test]
fn immediates_and_lists_are_never_read() {
    // Not pointers at all: a read would fault.
    for term in [0x0F_usize, 0x3F, 0x0B, 0x3B, usize::MAX, 0x1, 0x9] {
        assert_eq!(read(term, SUB_BIN_TAG), None, "{term:#x}");
    }
}

// A literal term on a VM without a physical memory reservation (Windows, debug
// emulators) carries the tag 0x4 beside the boxed tag: clearing only two bits
// read the header 4 bytes into it (misaligned, undefined behaviour, and here a
// wrong word: the size would not be found).
#[cfg(target_pointer_width = "64")]
#[test]
fn literal_terms_are_untagged_with_three_bits_on_64_bit() {
    let old = sub_bin(1000, 3);
    assert_eq!(read(boxed(&old, 0x4), SUB_BIN_TAG), Some(1000));
    let new = sub_bits(8 * 16 + 1, 8 * 16 + 1 + 8 * 4096);
    assert_eq!(read(boxed(&new, 0x4), SUB_BITS_TAG), Some(4096));
    let aligned = sub_bin(1000, 0);
    assert_eq!(read(boxed(&aligned, 0x4), SUB_BIN_TAG), None);
}

/// ERTS's `TAG_PTR_MASK__` (erl_term.h): 0x7 on 64-bit, 0x3 on 32-bit.
#[test]
fn the_mask_is_erts_mask_for_the_word_size() {
    let expected = if cfg!(target_pointer_width = "64") {
        0x7
    } else {
        0x3
    };
    assert_eq!(TAG_PTR_MASK, expected);
}

/// The version gate and its fallback, as the library runs them: the layout read
/// for each ERTS major version the load callback can report. A version whose
/// layout is not known here (older, newer, or none reported) reads no size, and
/// neither does a layout the VM contradicted once (`disable`): the binary is then
/// inspected, copied and hashed as before, uncharged for the copy; its id does
/// not depend on the reading (test/hrw/term_id_test.exs compares the ids with the
/// reading off, "the same ids when the sub-binary layout is not read").
#[test]
fn unknown_versions_and_a_disabled_layout_read_nothing() {
    let old = sub_bin(1000, 3);
    let new = sub_bits(8 * 16 + 5, 8 * 16 + 5 + 8 * 777);
    let little = cfg!(target_endian = "little");
    for (major, reads_old, reads_new) in [
        (None, false, false),
        (Some(12), false, false),
        (Some(13), little, false),
        (Some(14), little, false),
        (Some(15), false, true),
        (Some(17), false, true),
        (Some(18), false, false),
    ] {
        let tag = bits::layout_of(major);
        assert_eq!(read(boxed(&old, 0), tag).is_some(), reads_old, "{major:?}");
        assert_eq!(read(boxed(&new, 0), tag).is_some(), reads_new, "{major:?}");
    }
    // The library's own switch: decided once, then off for good when contradicted.
    bits::detect(Some(15));
    // SAFETY: as in `read`.
    assert_eq!(unsafe { bits::unaligned_size(boxed(&new, 0)) }, Some(777));
    bits::detect(Some(12));
    // SAFETY: as above.
    assert_eq!(unsafe { bits::unaligned_size(boxed(&new, 0)) }, Some(777));
    bits::disable();
    // SAFETY: as above.
    assert_eq!(unsafe { bits::unaligned_size(boxed(&new, 0)) }, None);
    bits::detect(Some(15));
    // SAFETY: as above.
    assert_eq!(unsafe { bits::unaligned_size(boxed(&new, 0)) }, None);
}
