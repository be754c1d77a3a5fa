//! The captured image of a JVM's metadata, how it was captured, and how to find a JVM address in
//! it.

use crate::{Cursor, ParseError};

/// How the image was captured (the record's fields).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capture {
    /// JVM address the image was copied from.
    pub metadata_addr: u64,
    /// `sizeof(J9JITExceptionTable)` in that JVM build.
    pub struct_size: u32,
    /// The struct begins with className/methodName/methodSignature.
    pub eyecatchers: bool,
    /// Stack-map offsets are 4 bytes with 2 bytes of alignment after 16-bit ones (ARM builds).
    pub align_stack_maps: bool,
    /// File offset of the image's first byte, so errors name offsets in the file.
    pub base: usize,
}

/// The image and how to find JVM addresses in it.
pub(crate) struct Image<'a> {
    pub bytes: &'a [u8],
    pub capture: Capture,
}

impl<'a> Image<'a> {
    /// Offset in the image of JVM address `ptr`, read from the field at image offset
    /// `field_at` (named in the error); `Ok(None)` for a null pointer.
    pub fn locate(
        &self,
        ptr: u64,
        what: &str,
        field_at: usize,
    ) -> Result<Option<usize>, ParseError> {
        if ptr == 0 {
            return Ok(None);
        }
        match ptr.checked_sub(self.capture.metadata_addr) {
            Some(off) if off < self.bytes.len() as u64 => Ok(Some(off as usize)),
            _ => Err(ParseError::new(
                self.capture.base + field_at,
                format!(
                    "{what} {ptr:#x} inside the captured image [{:#x}, {:#x}) (the section was not captured)",
                    self.capture.metadata_addr,
                    self.capture.metadata_addr.wrapping_add(self.bytes.len() as u64)
                ),
            )),
        }
    }

    /// A little-endian cursor from image offset `at`.
    pub fn cursor(&self, at: usize) -> Cursor<'a> {
        let at = at.min(self.bytes.len());
        Cursor::new(&self.bytes[at..], self.capture.base + at)
    }
}
