//! `flags` bits of the fixed struct (j9nonbuilder.h).

/// `GC_MAP_32_BIT_OFFSETS` is authoritative (without it the body's size decides).
pub const USED_FOR_SIZE: u64 = 0x1;
/// Stack maps use 4-byte low-code offsets.
pub const GC_MAP_32_BIT_OFFSETS: u64 = 0x2;
/// The metadata describes a stub, not a compiled method.
pub const IS_STUB: u64 = 0x4;
/// The metadata is not completely filled in yet.
pub const NOT_INITIALIZED: u64 = 0x8;
/// Compiled by a JITServer (remote compilation).
pub const IS_REMOTE_COMP: u64 = 0x10;
/// AOT code deserialized from a JITServer cache.
pub const IS_DESERIALIZED_COMP: u64 = 0x20;
/// Compiled before a CRIU checkpoint.
pub const IS_PRECHECKPOINT_COMP: u64 = 0x40;
/// Compiled for full-speed debug (FSD).
pub const IS_FSD_COMP: u64 = 0x80;
/// The body contains vectorized code.
pub const VECTORIZED_CODE: u64 = 0x100;
