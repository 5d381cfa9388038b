//! The descent's arithmetic: each rank's coin seed, the coin at a bit position, its threshold.

use crate::n3;

/// Salt of the owner's coin seed: `seed = n3::score(n3::prep(key), SEED_SALT)`.
pub const SEED_SALT: u64 = 0x736b_656c_6574_6f6e; // "skeleton"
/// Step of the per-key coin counter (wyrand's increment).
const COIN_STEP: u64 = 0xa076_1d64_78bd_642f;
/// Second multiplicand's mask in the coin (wyrand's).
const COIN_XOR: u64 = 0xe703_7ed1_a0b4_28db;

/// The salt of rank `rank`'s coin seed in
/// [`Skeleton::owners`](crate::skeleton::Skeleton::owners); rank 0 is the owner's.
pub const fn rank_salt(rank: u64) -> u64 {
    SEED_SALT ^ rank.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// `n3::linear(SEED_SALT)`, so the owner's seed costs one `n3::tail`.
pub(super) const SEED_SALT_LINEAR: u64 =
    SEED_SALT ^ SEED_SALT.rotate_left(17) ^ SEED_SALT.rotate_left(43);

/// The coin of a key (through its `seed`) at the internal node splitting on bit `bit`.
#[inline(always)]
pub fn coin(seed: u64, bit: u32) -> u64 {
    let x = seed.wrapping_add(u64::from(bit + 1).wrapping_mul(COIN_STEP));
    let t = u128::from(x) * u128::from(x ^ COIN_XOR);
    (t >> 64) as u64 ^ t as u64
}

/// Coin seed of rank `rank` for the prepared key `tk = n3::prepared_key(key)`.
#[inline(always)]
pub(super) fn seed_of(tk: u64, rank: u64) -> u64 {
    if rank == 0 {
        n3::score_prepared(tk, SEED_SALT_LINEAR)
    } else {
        n3::score_prepared(tk, n3::linear(rank_salt(rank)))
    }
}

/// `floor(2^64 * wl / (wl + wr))`, saturating at `u64::MAX` (IEEE basic operations).
#[inline]
pub fn threshold(wl: f64, wr: f64) -> u64 {
    let p = wl / (wl + wr);
    // Scaling by 2^64 is exact; the cast truncates and saturates (NaN gives 0).
    (p * 18_446_744_073_709_551_616.0) as u64
}
