//! The `--frameless` phase: `frameless_caller` (a normal frame) calls `frameless_leaf`, which
//! keeps no frame pointer and moves the stack pointer (`sub rsp, 24`). Frame-pointer unwinding
//! from inside the leaf skips `frameless_caller`; the leaf's `.eh_frame`, written in an
//! UNWINDING_INFO record before its CODE_LOAD, lets a DWARF unwinder find it. With
//! `--no-unwind-info` the record is left out, to show the difference.

use crate::asm::Asm;

/// Bytes of stack the leaf reserves.
const LEAF_STACK: i8 = 24;

/// The leaf: `sub rsp, 24`, a loop of `rdi` rounds, `add rsp, 24; ret`. Returns the code and
/// the offsets right after the `sub` and right after the `add` (where the CFA rule changes).
pub fn leaf() -> (Vec<u8>, u32, u32) {
    let mut a = Asm::default();
    a.sub_rsp_imm8(LEAF_STACK);
    let after_sub = a.offset();
    a.mov_rcx_rdi();
    a.mov_eax_imm(1);
    let top = a.offset();
    for _ in 0..4 {
        a.imul_rax_imm8(13);
        a.add_rax_imm8(5);
    }
    a.dec_rcx();
    a.jnz_to(top);
    a.add_rsp_imm8(LEAF_STACK);
    let after_add = a.offset();
    a.ret();
    (a.code, after_sub, after_add)
}

/// The caller: a normal frame around one call of the leaf at `leaf_addr`.
pub fn caller(leaf_addr: u64) -> Vec<u8> {
    let mut a = Asm::default();
    a.prologue();
    a.call_abs(leaf_addr);
    a.epilogue();
    a.code
}

/// The leaf's `.eh_frame` (one CIE, one FDE with PC-relative addresses), laid out to sit right
/// after the code, 8-aligned: CFA = rsp+8 at entry, rsp+32 after the `sub`, rsp+8 again after
/// the `add`; the return address at CFA-8.
pub fn leaf_eh_frame(code_len: u32, after_sub: u32, after_add: u32) -> Vec<u8> {
    const DW_CFA_DEF_CFA: u8 = 0x0c;
    const DW_CFA_DEF_CFA_OFFSET: u8 = 0x0e;
    const DW_CFA_ADVANCE_LOC: u8 = 0x40; // low 6 bits: delta
    const DW_CFA_OFFSET_RA: u8 = 0x80 | 16; // register 16 = return address
    const REG_RSP: u8 = 7;
    const PCREL_SDATA4: u8 = 0x1b;
    let mut cie = vec![0, 0, 0, 0, 1]; // CIE id, version
    cie.extend_from_slice(b"zR\0");
    cie.extend_from_slice(&[1, 0x78, 16, 1, PCREL_SDATA4]); // align 1, -8, RA reg, aug
    cie.extend_from_slice(&[DW_CFA_DEF_CFA, REG_RSP, 8, DW_CFA_OFFSET_RA, 1]);
    pad4(&mut cie);
    let mut table = Vec::new();
    table.extend((cie.len() as u32).to_le_bytes());
    table.extend(&cie);

    let table_offset = code_len.next_multiple_of(8) as i64;
    let fde_start = table.len();
    let pc_begin_field = fde_start + 8;
    let mut fde = Vec::new();
    fde.extend(((fde_start + 4) as u32).to_le_bytes()); // back to the CIE
    let pc_begin = -(table_offset + pc_begin_field as i64);
    fde.extend((pc_begin as i32).to_le_bytes());
    fde.extend(code_len.to_le_bytes());
    fde.push(0); // augmentation data length
    fde.extend([
        DW_CFA_ADVANCE_LOC | after_sub as u8,
        DW_CFA_DEF_CFA_OFFSET,
        8 + LEAF_STACK as u8,
        DW_CFA_ADVANCE_LOC | (after_add - after_sub) as u8,
        DW_CFA_DEF_CFA_OFFSET,
        8,
    ]);
    pad4(&mut fde);
    table.extend((fde.len() as u32).to_le_bytes());
    table.extend(&fde);
    table
}

fn pad4(entry: &mut Vec<u8>) {
    // Entry length (4) + body must stay 4-aligned; DW_CFA_nop is 0.
    while !entry.len().is_multiple_of(4) {
        entry.push(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cfa_changes_fit_in_advance_loc() {
        let (code, after_sub, after_add) = leaf();
        assert_eq!(after_sub, 4);
        assert!(after_add - after_sub < 64);
        let table = leaf_eh_frame(code.len() as u32, after_sub, after_add);
        assert_eq!(table.len() % 4, 0);
    }
}
