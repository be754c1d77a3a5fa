//! LLVM XRay logs as an input: replaying logs into call stacks (`replay.rs`), the account
//! table (`account.rs`), a log reported on its own (`log.rs`), and the correlation of logs a
//! recording stored next to its samples (`live.rs`, used by `input/recording`). The log and
//! map parsers are in `format/xray/`; docs/xray.md describes the whole feature.

pub mod account;
pub(crate) mod live;
pub(crate) mod log;
pub mod replay;
