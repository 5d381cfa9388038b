//! Which scan backends run on this CPU. The SIMD backends exist on x86_64 only:
//! every other CPU (arm64 and s390x in `scripts/test-matrix`) scans with the
//! portable backend alone, which `properties.rs` checks against the flat argmax
//! there. The byte order is printed too: ids and hashes are built from explicit
//! little-endian bytes, so the same tests hold on big-endian s390x.

use hrw_core::scan::Backend;

#[test]
fn the_scan_backends_are_those_this_cpu_has() {
    let available = Backend::available();
    println!(
        "{} ({}-endian): scan backends {:?}",
        std::env::consts::ARCH,
        if cfg!(target_endian = "little") {
            "little"
        } else {
            "big"
        },
        available
    );
    assert_eq!(available.first(), Some(&Backend::Portable));

    #[cfg(target_arch = "x86_64")]
    {
        assert_eq!(
            available.contains(&Backend::Avx2),
            std::arch::is_x86_feature_detected!("avx2")
        );
        assert_eq!(
            available.contains(&Backend::Avx512),
            std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512dq")
        );
    }

    #[cfg(not(target_arch = "x86_64"))]
    assert_eq!(available, vec![Backend::Portable]);
}
