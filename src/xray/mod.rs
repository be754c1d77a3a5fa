//! LLVM XRay on jprof's side: replaying logs into call stacks (`replay.rs`), the account table
//! (`account.rs`), and the correlation of logs recorded next to samples (`live.rs`). The log
//! and map parsers are in `format/xray/`; a log reported on its own is `report/xray_log.rs`;
//! docs/xray.md describes the whole feature.

pub mod account;
pub mod live;
pub mod replay;
