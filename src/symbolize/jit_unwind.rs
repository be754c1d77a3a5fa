//! Unwinding through JIT code with the `.eh_frame` a runtime wrote in JIT_CODE_UNWINDING_INFO
//! (V8 with `--perf-prof`). The FDEs address the code relative to where the runtime placed the
//! table (right after the code, PC-relative), so the table's address is worked out from its
//! first FDE: that FDE begins at the code's first byte. Each body becomes a framehop module
//! while it is live, at the moment a sample's unwinding reaches it.

use gimli::{BaseAddresses, CieOrFde, EhFrame, LittleEndian, UnwindSection};

/// A code body's unwind table, placed relative to the body's first byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JitUnwind {
    /// The table's `.eh_frame` bytes (CIEs with an omitted LSDA rewritten so gimli reads them).
    pub eh_frame: crate::sys::shared_bytes::SharedBytes,
    /// Where `eh_frame` sits, in bytes from the start of the code.
    pub eh_frame_offset: u64,
}

/// The most a runtime pads between the end of the code and its unwind table.
const MAX_GAP: u64 = 4096;

impl JitUnwind {
    /// Places `eh_frame` for a body of `code_size` bytes; `None` when the table has no FDE
    /// (V8 writes an empty table for code without frames) or cannot be read.
    pub fn place(eh_frame: &[u8], code_size: u64) -> Option<Self> {
        let eh_frame = without_omitted_lsda(eh_frame);
        let offset = first_fde_offset(&eh_frame)?;
        // PC-relative FDE addresses shift with the table; absolute ones would not, and then
        // the guess is the common layout (table 8-aligned right after the code).
        let plausible = offset >= code_size && offset - code_size <= MAX_GAP;
        Some(Self {
            eh_frame: crate::sys::shared_bytes::SharedBytes::owned(eh_frame),
            eh_frame_offset: if plausible {
                offset
            } else {
                code_size.next_multiple_of(8)
            },
        })
    }
}

/// V8's CIEs say "zLR" with the LSDA encoding DW_EH_PE_omit (no LSDA). That is valid, but
/// gimli (under framehop) then refuses every FDE of the CIE. The 'L' and its encoding byte are
/// dropped and two DW_CFA_nop appended to the CIE's instructions, so every entry keeps its
/// size and offset (FDEs point at CIEs and at code by offset). Other tables are returned as
/// they are.
fn without_omitted_lsda(eh_frame: &[u8]) -> Vec<u8> {
    const DW_EH_PE_OMIT: u8 = 0xff;
    let mut out = eh_frame.to_vec();
    let mut at = 0usize;
    while let Some(len) = eh_frame
        .get(at..at + 4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    {
        // 0 ends the table; 0xffffffff (64-bit lengths) is not something V8 writes.
        if len == 0 || len == 0xffff_ffff {
            break;
        }
        let Some(entry) = eh_frame.get(at + 4..at + 4 + len) else {
            break;
        };
        if entry.starts_with(&[0, 0, 0, 0]) {
            if let Some(cie) = rewrite_cie(entry, DW_EH_PE_OMIT) {
                out[at + 4..at + 4 + len].copy_from_slice(&cie);
            }
        }
        at += 4 + len;
    }
    out
}

/// A CIE body (from its id on) without an omitted 'L' augmentation, same length; `None` when
/// it has none (or has a personality pointer, which V8 does not write).
fn rewrite_cie(cie: &[u8], omit: u8) -> Option<Vec<u8>> {
    let version = *cie.get(4)?;
    let aug_end = 5 + cie.get(5..)?.iter().position(|&b| b == 0)?;
    let augmentation = &cie[5..aug_end];
    if !augmentation.starts_with(b"z") || augmentation.contains(&b'P') {
        return None;
    }
    let l_index = augmentation.iter().position(|&b| b == b'L')?;
    let mut at = aug_end + 1;
    let skip_leb = |at: &mut usize| -> Option<()> {
        while cie.get(*at)? & 0x80 != 0 {
            *at += 1;
        }
        *at += 1;
        Some(())
    };
    skip_leb(&mut at)?; // code alignment
    skip_leb(&mut at)?; // data alignment
    if version == 1 {
        at += 1; // return address register, one byte
    } else {
        skip_leb(&mut at)?;
    }
    let aug_len = *cie.get(at)? as usize;
    if aug_len == 0 || aug_len >= 0x80 {
        return None;
    }
    let data_start = at + 1;
    // One data byte per letter after 'z' (L, R: an encoding each).
    let l_byte = data_start + l_index - 1;
    if *cie.get(l_byte)? != omit || data_start + aug_len > cie.len() {
        return None;
    }
    let mut out = Vec::with_capacity(cie.len());
    out.extend_from_slice(&cie[..5 + l_index]);
    out.extend_from_slice(&cie[5 + l_index + 1..at]);
    out.push((aug_len - 1) as u8);
    out.extend_from_slice(&cie[data_start..l_byte]);
    out.extend_from_slice(&cie[l_byte + 1..]);
    out.extend_from_slice(&[0, 0]); // DW_CFA_nop ×2
    Some(out)
}

/// The table address (relative to the code start) at which its first FDE begins at the code
/// start: with the table at address 0 the FDE starts at `-offset`.
fn first_fde_offset(eh_frame: &[u8]) -> Option<u64> {
    let section = EhFrame::new(eh_frame, LittleEndian);
    let bases = BaseAddresses::default().set_eh_frame(0);
    let mut entries = section.entries(&bases);
    while let Ok(Some(entry)) = entries.next() {
        if let CieOrFde::Fde(partial) = entry {
            let fde = partial.parse(|s, b, o| s.cie_from_offset(b, o)).ok()?;
            return Some(0u64.wrapping_sub(fde.initial_address()));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CIE and one FDE (pcrel|sdata4 addresses) for code that starts `gap + code_size`
    /// bytes before the table.
    fn table(code_size: u32, gap: u32) -> Vec<u8> {
        let mut t = Vec::new();
        // CIE: length, id 0, version 1, augmentation "zR", code align 1, data align -8,
        // return register 16, augmentation data length 1, FDE encoding pcrel|sdata4 (0x1b).
        let cie_body = [
            0, 0, 0, 0, 1, b'z', b'R', 0, 1, 0x78, 16, 1, 0x1b, 0x0c, 7, 8, 0x90, 1, 0, 0,
        ];
        t.extend_from_slice(&(cie_body.len() as u32).to_le_bytes());
        t.extend_from_slice(&cie_body);
        let fde_start = t.len() as u32;
        // FDE: length, CIE pointer, pc_begin (relative to its own field), pc_range, aug len.
        let pc_begin_field = fde_start + 8;
        let pc_begin = -((code_size + gap + pc_begin_field) as i32);
        let mut fde = Vec::new();
        fde.extend_from_slice(&(pc_begin_field - 4).to_le_bytes());
        fde.extend_from_slice(&pc_begin.to_le_bytes());
        fde.extend_from_slice(&code_size.to_le_bytes());
        fde.extend_from_slice(&[0, 0, 0, 0]);
        t.extend_from_slice(&(fde.len() as u32).to_le_bytes());
        t.extend_from_slice(&fde);
        t
    }

    #[test]
    fn the_table_is_placed_where_its_fde_starts_the_code() {
        let placed = JitUnwind::place(&table(100, 4), 100).expect("placed");
        assert_eq!(placed.eh_frame_offset, 104);
    }

    /// A table V8 (node 20) wrote for `makeDocument` (0x824 bytes of code, table 4 bytes
    /// after it): CIE "zLR" version 3, one FDE.
    #[test]
    fn a_v8_table_is_placed_after_its_code() {
        let hex = "1800000000000000037a4c520001781002ff1b0c07089001000000002800000020000000\
                   b4f7ffff22080000004f0e108602430d060322060d07410e08520c06100000000000000000\
                   000000";
        let hex: String = hex.split_whitespace().collect();
        let bytes: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        let placed = JitUnwind::place(&bytes, 0x824).expect("placed");
        assert_eq!(placed.eh_frame_offset, 0x828);
    }

    #[test]
    fn implausible_or_empty_tables() {
        // The FDE claims the code starts far before the table: the default layout is used.
        let far = JitUnwind::place(&table(100, 100_000), 100).expect("placed");
        assert_eq!(far.eh_frame_offset, 104);
        assert_eq!(JitUnwind::place(&[], 10), None);
        assert_eq!(JitUnwind::place(&[1, 2, 3], 10), None);
    }
}
