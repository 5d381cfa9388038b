//! Pinned vectors printed by `docs/reference.py`, an independent Python transcription
//! of docs/HASHING.md. The ExUnit suite asserts the same term ids from Elixir.

use crate::term_hash::*;

pub const N3_VECTORS: &[(u64, u64, u64)] = &[
    (0x0, 0x0, 0x89db37561974918f),
    (0x1, 0x0, 0x46c048f57bef0291),
    (0x0, 0x1, 0x86ec0d360ea22214),
    (0xffffffffffffffff, 0x8000000000000000, 0x985a746c54ffc6fb),
    (0x123456789abcdef, 0xfedcba9876543210, 0xe2ccd71e3ee7a5c0),
    (0x2a, 0x20000000, 0x58d7c9befed2ba6d),
    (0x100000000, 0x800000000000000, 0x4adfa81719d74988),
    (0xdeadbeef, 0x7, 0x2ae406eeb67f6818),
];

/// (label, id computed by this crate, id from the reference).
pub fn term_vectors() -> Vec<(&'static str, u64, u64)> {
    let big = {
        // 2^128 + 1, little-endian magnitude.
        let mut m = [0u8; 17];
        m[0] = 1;
        m[16] = 1;
        integer(true, &m)
    };
    vec![
        ("empty binary", binary(b""), 0x2d06800538d394c2),
        ("binary", binary(b"user:42"), 0x9fc1e605fa7174aa),
        (
            "utf8 binary",
            binary("héllo".as_bytes()),
            0x6a45b79a7b549b1f,
        ),
        ("zero", int64(0), 0x154f124433f8846d),
        ("one", int64(1), 0xd7d8c6235c288c58),
        ("minus one", int64(-1), 0x384021378d8cf872),
        ("i64 max", int64(i64::MAX), 0xd66452e54ae2095e),
        (
            "u64 max",
            integer(false, &u64::MAX.to_le_bytes()),
            0x852dccb229adc782,
        ),
        ("bignum", big, 0x045a420ecaa3ca94),
        ("float one", float(1.0), 0xd5ca9387df81eaba),
        ("float", float(-2.5), 0x06c4721e5e96090f),
        ("atom", atom(b"a"), 0x8a942261fba21c1c),
        ("nil", atom(b"nil"), 0xdd206f34290e70f5),
        ("unicode atom", atom("ünï".as_bytes()), 0x18148844259e160c),
        (
            "bitstring",
            bitstring(&[0b1010_0000], 3),
            0xe294965897565c4e,
        ),
        ("empty tuple", tuple(&[]), 0x738f402f85aed9c9),
        (
            "tuple",
            tuple(&[atom(b"user"), int64(42)]),
            0x33efe09b58654a43,
        ),
        ("empty list", list(&[]), 0x6b633834bd370097),
        (
            "list",
            list(&[int64(1), int64(2), int64(3)]),
            0x776a0f57f21ad88d,
        ),
        (
            "charlist",
            list(&[int64(97), int64(98)]),
            0x14c49eec3d30b331,
        ),
        (
            "improper list",
            improper_list(&[int64(1)], int64(2)),
            0x39f6236dfb639883,
        ),
        ("empty map", map(&mut []), 0x01f8f9911db9f4a1),
        (
            "map",
            map(&mut [(binary(b"b"), int64(2)), (atom(b"a"), int64(1))]),
            0x0311255c12b46adb,
        ),
        (
            "nested",
            tuple(&[
                binary(b"x"),
                list(&[float(1.5), map(&mut [(atom(b"k"), tuple(&[]))])]),
            ]),
            0x91921db748a24993,
        ),
    ]
}

/// (N3 score, weight, cost key) — see `weighted::Standing` and docs/HASHING.md §3.
pub const WEIGHTED_VECTORS: &[(u64, f64, u64)] = &[
    (0x0, 1.0, 0x439a800000000000),
    (0xffffffffffffffff, 1.0, 0x0),
    (0x89db37561974918f, 1.0, 0x433c9347975af850),
    (0x46c048f57bef0291, 2.0, 0x433daf6308e4c77e),
    (0x123456789abcdef, 0.5, 0x437f414fdb49821b),
    (0xfedcba9876543210, 10.0, 0x42950ebecb4594cd),
    (0x8000000000000000, 3.0, 0x4325555555555553),
    (0x2bdc545d6b4b87, 7.25, 0x434745a495a357d5),
    (0x1234, 5e-324, 0x86b9b51ff2e30215),
    (0xfffffffffffff7ff, 9007199254740992.0, 0x3d7a1d8000000000),
    (0xfffffffffffff800, 1e-310, 0x0),
    (0x5a5a5a5a5a5a5a5a, 1e-300, 0x8191f2d2dc56d132),
    (
        0x5a5a5a5a5a5a5a5a,
        2.2250738585072014e-308,
        0x83280a3dcc0cd3c8,
    ),
];

/// Weighted owners of "key-1".."key-20" over a 1, b 2, c 3, d 10, e 0.5.
pub const WEIGHTED_OWNERS: &str = "ddddddddbdccdedddcdd";
