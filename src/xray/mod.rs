//! LLVM XRay on jprof's side: replaying logs into call stacks (`replay.rs`), the account table
//! (`account.rs`), and the standalone report of a log (`standalone.rs`). The log and map
//! parsers are in `format/xray/`; docs/xray.md describes the whole feature.

pub mod account;
pub mod replay;
pub mod standalone;
