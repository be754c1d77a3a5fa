//! Pure parsers and writers over `&[u8]` and symbol-name demangling; jprof and its agent use it.
//!
//! One file per external format. No I/O, no unsafe, no panics on any input: every error names
//! the byte offset and what was expected there.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod demangle;

pub mod j9;
pub mod jitdump;
pub mod jitdump_write;
pub mod mlpd;
pub mod perf;
pub mod perf_map;
pub mod perf_write;
pub mod procfs;
pub mod recording;
pub mod xray;

use thiserror::Error;

/// A parse failure: where, and what was expected there.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("at byte offset {offset}: expected {expected}")]
pub struct ParseError {
    /// Byte offset of the failure, from the start of the whole input.
    pub offset: usize,
    /// What should have been at `offset`, as a phrase ("a NUL-terminated string").
    pub expected: String,
}

impl ParseError {
    /// A failure at byte `offset` where `expected` was wanted.
    pub fn new(offset: usize, expected: impl Into<String>) -> Self {
        Self {
            offset,
            expected: expected.into(),
        }
    }
}

/// Byte order of a file (producers write their native order; readers detect it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Endian {
    /// Least significant byte first (x86_64, aarch64 Linux).
    #[default]
    Little,
    /// Most significant byte first.
    Big,
}

impl Endian {
    pub(crate) fn u16(self, b: [u8; 2]) -> u16 {
        match self {
            Self::Little => u16::from_le_bytes(b),
            Self::Big => u16::from_be_bytes(b),
        }
    }

    pub(crate) fn u32_bytes(self, v: u32) -> [u8; 4] {
        match self {
            Self::Little => v.to_le_bytes(),
            Self::Big => v.to_be_bytes(),
        }
    }

    pub(crate) fn u32(self, b: [u8; 4]) -> u32 {
        match self {
            Self::Little => u32::from_le_bytes(b),
            Self::Big => u32::from_be_bytes(b),
        }
    }

    pub(crate) fn u64(self, b: [u8; 8]) -> u64 {
        match self {
            Self::Little => u64::from_le_bytes(b),
            Self::Big => u64::from_be_bytes(b),
        }
    }
}

/// u64 values borrowed from a record as its bytes, read on access (a sample's callchain and
/// registers are read once each: copying them out would cost an allocation per sample).
#[derive(Clone, Copy, Default)]
pub struct U64s<'a> {
    bytes: &'a [u8],
    endian: Endian,
}

impl<'a> U64s<'a> {
    /// The values of `bytes` (whole u64s; a trailing part is ignored) in `endian` order.
    pub fn new(bytes: &'a [u8], endian: Endian) -> Self {
        Self {
            bytes: &bytes[..bytes.len() / 8 * 8],
            endian,
        }
    }

    /// Whether there are no values.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The `i`th value, or `None` past the end.
    pub fn get(&self, i: usize) -> Option<u64> {
        let b = self.bytes.get(i * 8..i * 8 + 8)?;
        Some(self.endian.u64(b.try_into().ok()?))
    }

    /// The values in order, decoded one by one.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = u64> + ExactSizeIterator + 'a {
        let endian = self.endian;
        self.bytes
            .chunks_exact(8)
            .map(move |b| endian.u64(b.try_into().unwrap_or_default()))
    }
}

impl PartialEq for U64s<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for U64s<'_> {}

impl std::fmt::Debug for U64s<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Reader over a slice; `base` is the slice's offset in the whole input, so errors name
/// absolute offsets.
pub struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    base: usize,
    endian: Endian,
}

impl<'a> Cursor<'a> {
    /// A little-endian cursor.
    pub fn new(buf: &'a [u8], base: usize) -> Self {
        Self::with_endian(buf, base, Endian::Little)
    }

    /// A cursor reading multi-byte values in `endian` order.
    pub fn with_endian(buf: &'a [u8], base: usize, endian: Endian) -> Self {
        Self {
            buf,
            pos: 0,
            base,
            endian,
        }
    }

    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    /// The unread rest of the slice.
    pub(crate) fn rest(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    /// The part of the slice already read.
    pub(crate) fn consumed(&self) -> &'a [u8] {
        &self.buf[..self.pos]
    }

    pub(crate) fn offset(&self) -> usize {
        self.base + self.pos
    }

    pub(crate) fn endian(&self) -> Endian {
        self.endian
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(crate) fn error(&self, expected: impl Into<String>) -> ParseError {
        ParseError::new(self.offset(), expected)
    }

    pub(crate) fn bytes(&mut self, n: usize) -> Result<&'a [u8], ParseError> {
        if self.remaining() < n {
            return Err(self.error(format!("{n} more bytes (only {} left)", self.remaining())));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, ParseError> {
        Ok(self.bytes(1)?[0])
    }

    pub(crate) fn u16(&mut self) -> Result<u16, ParseError> {
        let b = self.bytes(2)?;
        Ok(self.endian.u16([b[0], b[1]]))
    }

    /// Reads a u32.
    pub fn u32(&mut self) -> Result<u32, ParseError> {
        let b = self.bytes(4)?;
        Ok(self.endian.u32([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn i32(&mut self) -> Result<i32, ParseError> {
        Ok(self.u32()? as i32)
    }

    /// Reads a u64.
    pub fn u64(&mut self) -> Result<u64, ParseError> {
        let b = self.bytes(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(self.endian.u64(a))
    }

    /// `n` u64 values, borrowed: read with one bounds check.
    pub(crate) fn u64_view(&mut self, n: usize) -> Result<U64s<'a>, ParseError> {
        let Some(len) = n.checked_mul(8) else {
            return Err(self.error(format!("{n} u64 values")));
        };
        Ok(U64s::new(self.bytes(len)?, self.endian))
    }

    /// A NUL-terminated string; the NUL is consumed. Invalid UTF-8 is replaced, not fatal.
    pub(crate) fn cstr(&mut self) -> Result<String, ParseError> {
        let rest = self.rest();
        let Some(len) = rest.iter().position(|&b| b == 0) else {
            return Err(self.error("a NUL-terminated string"));
        };
        let s = String::from_utf8_lossy(&rest[..len]).into_owned();
        self.pos += len + 1;
        Ok(s)
    }

    /// A NUL-padded string that runs up to `trailer` bytes before the end of the buffer.
    pub(crate) fn cstr_padded(&mut self, trailer: usize) -> Result<String, ParseError> {
        if self.remaining() < trailer {
            return Err(self.error("string followed by the sample_id trailer"));
        }
        let field = self.bytes(self.remaining() - trailer)?;
        let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
        Ok(String::from_utf8_lossy(&field[..end]).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn borrowed_u64s_read_in_their_byte_order() {
        let mut bytes: Vec<u8> = [1u64, 0x0102_0304_0506_0708]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        bytes.push(0xff); // a trailing part is not a value
        let le = U64s::new(&bytes, Endian::Little);
        assert_eq!(le.iter().len(), 2);
        assert_eq!(le.iter().collect::<Vec<_>>(), [1, 0x0102_0304_0506_0708]);
        assert_eq!(le.iter().next_back(), Some(0x0102_0304_0506_0708));
        assert_eq!(le.get(2), None);
        let be = U64s::new(&bytes, Endian::Big);
        assert_eq!(be.get(0), Some(1 << 56));
        assert_ne!(le, be);

        let mut c = Cursor::new(&bytes, 100);
        assert_eq!(c.u64_view(2).unwrap(), le);
        let err = c.u64_view(1).unwrap_err();
        assert!(err.to_string().contains("116"), "{err}");
        assert!(U64s::default().is_empty());
    }
}
