//! The constants every tagged encoding starts from: its seed and its type tags.

/// Seed for every non-binary term: the ASCII bytes "HRW1TERM" read big-endian.
pub const TERM_SEED: u64 = 0x4852_5731_5445_524D;

/// Type tags: the first byte of every tagged encoding.
pub mod tag {
    pub const INTEGER: u8 = 0x01;
    pub const FLOAT: u8 = 0x02;
    pub const ATOM: u8 = 0x03;
    pub const BITSTRING: u8 = 0x04;
    pub const TUPLE: u8 = 0x05;
    pub const LIST: u8 = 0x06;
    pub const IMPROPER_LIST: u8 = 0x07;
    pub const MAP: u8 = 0x08;
    pub const PID: u8 = 0x09;
    pub const PORT: u8 = 0x0A;
    pub const REFERENCE: u8 = 0x0B;
    pub const FUN: u8 = 0x0C;
}
