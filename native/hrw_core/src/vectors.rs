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
    let mut vectors = vec![
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
    ];
    vectors.extend(boundary_vectors());
    vectors
}

/// `±(2^bits + delta)` (delta in -1..=1) as an integer id.
fn pow2(negative: bool, bits: usize, delta: i8) -> u64 {
    let mut m = vec![0u8; bits / 8 + 1];
    m[bits / 8] = 1 << (bits % 8);
    match delta {
        1 => m[0] |= 1,
        -1 => {
            // 2^bits - 1: every bit below `bits` set.
            m[bits / 8] = 0;
            m[..bits / 8].fill(0xFF);
            m[bits / 8] = (1u8 << (bits % 8)) - 1;
        }
        _ => {}
    }
    integer(negative, &m)
}

/// `%{1 => 1, ..., n => n}`: above 32 keys the VM holds such a map as a HAMT.
fn counting_map(n: i64) -> u64 {
    let mut entries: Vec<(u64, u64)> = (1..=n).map(|i| (int64(i), int64(i))).collect();
    entries.reverse();
    map(&mut entries)
}

/// The edges of every type, printed by `docs/reference.py` ("boundary term ids").
/// Bitstrings are given with every bit set: the unused bits must not count.
fn boundary_vectors() -> Vec<(&'static str, u64, u64)> {
    vec![
        ("int 2 ** 63 - 1", pow2(false, 63, -1), 0xd66452e54ae2095e),
        ("int -(2 ** 63 - 1)", pow2(true, 63, -1), 0xd42037260ec3bbd0),
        ("int 2 ** 63", pow2(false, 63, 0), 0x571eb3b1da2994f3),
        ("int -(2 ** 63)", pow2(true, 63, 0), 0xa9807ee526112564),
        ("int 2 ** 63 + 1", pow2(false, 63, 1), 0xb2b4b068830e23ba),
        ("int -(2 ** 63 + 1)", pow2(true, 63, 1), 0xd06bd7cc58a07330),
        ("int 2 ** 64 - 1", pow2(false, 64, -1), 0x852dccb229adc782),
        ("int -(2 ** 64 - 1)", pow2(true, 64, -1), 0xee9226a234691ce0),
        ("int 2 ** 64", pow2(false, 64, 0), 0x382311f1fd68c2b6),
        ("int -(2 ** 64)", pow2(true, 64, 0), 0x05491b19074ee18a),
        ("int 2 ** 64 + 1", pow2(false, 64, 1), 0x92e22ffa45dd8dfc),
        ("int -(2 ** 64 + 1)", pow2(true, 64, 1), 0x786b067741ec7955),
        ("int 2 ** 127 - 1", pow2(false, 127, -1), 0x35226d403f0aadd3),
        (
            "int -(2 ** 127 - 1)",
            pow2(true, 127, -1),
            0x15819d34fb938f14,
        ),
        ("int 2 ** 127", pow2(false, 127, 0), 0x7772bc7514b00bf6),
        ("int -(2 ** 127)", pow2(true, 127, 0), 0x6a33faccf9c4b304),
        ("int 2 ** 127 + 1", pow2(false, 127, 1), 0x20dae5425fd5f2a2),
        (
            "int -(2 ** 127 + 1)",
            pow2(true, 127, 1),
            0x1d138e60aa828455,
        ),
        ("int 2 ** 128 - 1", pow2(false, 128, -1), 0x0fec6d783bffd058),
        (
            "int -(2 ** 128 - 1)",
            pow2(true, 128, -1),
            0xa9ca480ff2f9ce9c,
        ),
        ("int 2 ** 128", pow2(false, 128, 0), 0x1a1535995aef827e),
        ("int -(2 ** 128)", pow2(true, 128, 0), 0x623dd9be1fb27492),
        ("int 2 ** 128 + 1", pow2(false, 128, 1), 0x801c3936953315ba),
        (
            "int -(2 ** 128 + 1)",
            pow2(true, 128, 1),
            0x045a420ecaa3ca94,
        ),
        (
            "int 2 ** 2040 - 1",
            pow2(false, 2040, -1),
            0x5b06b2d06276a945,
        ),
        (
            "int -(2 ** 2040 - 1)",
            pow2(true, 2040, -1),
            0x74d47a44beafa999,
        ),
        ("int 2 ** 2040", pow2(false, 2040, 0), 0xe1ceb816b8d5806e),
        ("int -(2 ** 2040)", pow2(true, 2040, 0), 0x7887db80255a71a0),
        (
            "int 2 ** 2040 + 1",
            pow2(false, 2040, 1),
            0xdb26744e45c8aea0,
        ),
        (
            "int -(2 ** 2040 + 1)",
            pow2(true, 2040, 1),
            0xb055bbef25460332,
        ),
        ("int 2 ** 1000", pow2(false, 1000, 0), 0xa264f713255351fb),
        ("int -(2 ** 1000)", pow2(true, 1000, 0), 0x230f6cbe9e369e51),
        (
            "int 2 ** 100000",
            pow2(false, 100000, 0),
            0x96cfe307ef0f0ba5,
        ),
        (
            "int -(2 ** 100000)",
            pow2(true, 100000, 0),
            0xb08d9762ac1c732b,
        ),
        ("atom 'é'x1", atom("é".as_bytes()), 0x13477ee53762d801),
        ("atom 'ÿ'x1", atom("ÿ".as_bytes()), 0xdb0bb6dc130fd9a3),
        ("atom 'Ā'x1", atom("Ā".as_bytes()), 0x24632a8fcff2d83a),
        ("atom 'λ'x1", atom("λ".as_bytes()), 0x31a2afb161779022),
        ("atom '日本'x2", atom("日本".as_bytes()), 0xf073ee620864a7e7),
        ("atom '😀'x1", atom("😀".as_bytes()), 0xb91bca74dc67c903),
        ("atom ''x0", atom("".as_bytes()), 0x60e851b42c30ff42),
        (
            "atom 'aaa'x255",
            atom("a".repeat(255).as_bytes()),
            0xfea30c345d59ee0f,
        ),
        (
            "atom 'ééé'x255",
            atom("é".repeat(255).as_bytes()),
            0x2c9fde693d257fd3,
        ),
        (
            "atom 'λλλ'x255",
            atom("λ".repeat(255).as_bytes()),
            0x3392f62fb1131523,
        ),
        (
            "atom '😀😀😀'x255",
            atom("😀".repeat(255).as_bytes()),
            0x7a140e458e9a0293,
        ),
        ("float -0.0", float(-0.0), 0x973093ec5ab4466a),
        ("float 5.0e-324", float(5.0e-324), 0x6e2971b840454639),
        ("float -5.0e-324", float(-5.0e-324), 0xc60878c4227f395d),
        (
            "float 2.225073858507201e-308",
            float(2.225073858507201e-308),
            0xb37be98242af7766,
        ),
        (
            "float 1.7976931348623157e308",
            float(1.7976931348623157e308),
            0x94be98baae7bc8bc,
        ),
        (
            "float -1.7976931348623157e308",
            float(-1.7976931348623157e308),
            0x196f8dd5e91b142c,
        ),
        ("bits 1", bitstring(&[0xFF; 1], 1), 0x6bd0db3a36616657),
        ("bits 2", bitstring(&[0xFF; 1], 2), 0xe0844c4e0dfc3da0),
        ("bits 3", bitstring(&[0xFF; 1], 3), 0x5f98ac3e53f9a8bb),
        ("bits 4", bitstring(&[0xFF; 1], 4), 0xc91b8fdb8041a8b4),
        ("bits 5", bitstring(&[0xFF; 1], 5), 0x90b89178b010b739),
        ("bits 6", bitstring(&[0xFF; 1], 6), 0xce0dc19aa7a1eead),
        ("bits 7", bitstring(&[0xFF; 1], 7), 0x5eee1e9475fadc5c),
        ("bits 9", bitstring(&[0xFF; 2], 9), 0x5718478f4a109380),
        ("bits 15", bitstring(&[0xFF; 2], 15), 0x7cfc15a8ed0f348b),
        ("bits 17", bitstring(&[0xFF; 3], 17), 0x2e70e517c1101ef4),
        ("bits 63", bitstring(&[0xFF; 8], 63), 0x709e449f83c4931f),
        ("bits 65", bitstring(&[0xFF; 9], 65), 0xe9544aa5720a4f04),
        (
            "bits 1001",
            bitstring(&[0xFF; 126], 1001),
            0xb5f98510858fae57,
        ),
        ("map 32", counting_map(32), 0x554a9629c8dd4fbc),
        ("map 33", counting_map(33), 0x6b64f7a29027fc5e),
        ("map 100", counting_map(100), 0x3450d74ad00ab3b6),
        (
            "improper binary tail",
            improper_list(&[binary(b"a")], binary(b"b")),
            0x4adebf8cafb209da,
        ),
        (
            "improper atom tail",
            improper_list(&[int64(1), int64(2)], atom(b"a")),
            0xc84bb10a6c660cf0,
        ),
        // The same names read as Latin-1, as the VM hands them out.
        (
            "atom 'é' from Latin-1",
            atom_latin1(&[0xE9]),
            0x13477ee53762d801,
        ),
        (
            "atom 'ÿ' from Latin-1",
            atom_latin1(&[0xFF]),
            0xdb0bb6dc130fd9a3,
        ),
        (
            "atom 'é'x255 from Latin-1",
            atom_latin1(&[0xE9; 255]),
            0x2c9fde693d257fd3,
        ),
        (
            "atom 'a'x255 from Latin-1",
            atom_latin1(&[b'a'; 255]),
            0xfea30c345d59ee0f,
        ),
        ("u64 max from uint64", uint64(u64::MAX), 0x852dccb229adc782),
        ("2^63 from uint64", uint64(1 << 63), 0x571eb3b1da2994f3),
        ("i64 min", int64(i64::MIN), 0xa9807ee526112564),
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
