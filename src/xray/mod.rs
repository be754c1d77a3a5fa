//! LLVM XRay on jprof's side: replaying logs into call stacks (`replay.rs`), the account table
//! (`account.rs`), the standalone report of a log (`standalone.rs`), and the correlation of
//! logs recorded next to samples (`live.rs`). The log and map
//! parsers are in `format/xray/`; docs/xray.md describes the whole feature.

pub mod account;
pub mod live;
pub mod replay;
pub mod standalone;
