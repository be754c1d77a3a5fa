//! A tiny x86-64 encoder for the dozen instructions minijit generates. Each method emits one
//! instruction and says its bytes, so the generated code reads like an assembly listing.

/// Machine code being assembled. Offsets are from the start of the function.
#[derive(Default)]
pub struct Asm {
    pub code: Vec<u8>,
}

/// REX.W: 64-bit operand size.
const REX_W: u8 = 0x48;

impl Asm {
    /// Where the next instruction goes.
    pub fn offset(&self) -> u32 {
        self.code.len() as u32
    }

    fn emit(&mut self, bytes: &[u8]) {
        self.code.extend_from_slice(bytes);
    }

    /// `push rbp; mov rbp, rsp` — the frame every function gets, so frame-pointer unwinding
    /// goes through generated code to its Rust caller.
    pub fn prologue(&mut self) {
        self.emit(&[0x55]); // push rbp
        self.emit(&[REX_W, 0x89, 0xe5]); // mov rbp, rsp   (89 /r, modrm 11 100 101)
    }

    /// `pop rbp; ret`.
    pub fn epilogue(&mut self) {
        self.emit(&[0x5d]); // pop rbp
        self.emit(&[0xc3]); // ret
    }

    /// `mov rcx, rdi` — the loop counter is the first argument.
    pub fn mov_rcx_rdi(&mut self) {
        self.emit(&[REX_W, 0x89, 0xf9]); // 89 /r, modrm 11 111(rdi) 001(rcx)
    }

    /// `mov eax, imm32` (zero-extends into rax).
    pub fn mov_eax_imm(&mut self, imm: u32) {
        self.emit(&[0xb8]);
        self.emit(&imm.to_le_bytes());
    }

    /// `mov edx, imm32` (zero-extends into rdx).
    pub fn mov_edx_imm(&mut self, imm: u32) {
        self.emit(&[0xba]);
        self.emit(&imm.to_le_bytes());
    }

    /// `imul rax, rax, imm8`.
    pub fn imul_rax_imm8(&mut self, imm: i8) {
        self.emit(&[REX_W, 0x6b, 0xc0, imm as u8]); // 6B /r ib, modrm 11 000 000
    }

    /// `add rax, imm8` (sign-extended).
    pub fn add_rax_imm8(&mut self, imm: i8) {
        self.emit(&[REX_W, 0x83, 0xc0, imm as u8]); // 83 /0 ib
    }

    /// `add rax, rcx`.
    pub fn add_rax_rcx(&mut self) {
        self.emit(&[REX_W, 0x01, 0xc8]); // 01 /r, modrm 11 001(rcx) 000(rax)
    }

    /// `xor rax, rdx`.
    pub fn xor_rax_rdx(&mut self) {
        self.emit(&[REX_W, 0x31, 0xd0]); // 31 /r, modrm 11 010(rdx) 000(rax)
    }

    /// `dec rcx`.
    pub fn dec_rcx(&mut self) {
        self.emit(&[REX_W, 0xff, 0xc9]); // FF /1, modrm 11 001 001
    }

    /// `sub rsp, imm8`: a frameless function's stack space (4 bytes).
    pub fn sub_rsp_imm8(&mut self, imm: i8) {
        self.emit(&[REX_W, 0x83, 0xec, imm as u8]); // 83 /5 ib, modrm 11 101 100
    }

    /// `add rsp, imm8` (4 bytes).
    pub fn add_rsp_imm8(&mut self, imm: i8) {
        self.emit(&[REX_W, 0x83, 0xc4, imm as u8]); // 83 /0 ib, modrm 11 000 100
    }

    /// `mov rax, imm64; call rax`: a call to an absolute address.
    pub fn call_abs(&mut self, target: u64) {
        self.emit(&[REX_W, 0xb8]); // B8+r io
        self.emit(&target.to_le_bytes());
        self.emit(&[0xff, 0xd0]); // FF /2, modrm 11 010 000
    }

    /// `ret`.
    pub fn ret(&mut self) {
        self.emit(&[0xc3]);
    }

    /// `jnz target` (rel32, counted from the end of the instruction).
    pub fn jnz_to(&mut self, target: u32) {
        let end = self.offset() as i64 + 6;
        let rel = (target as i64 - end) as i32;
        self.emit(&[0x0f, 0x85]);
        self.emit(&rel.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_match_the_manual() {
        let mut a = Asm::default();
        a.prologue();
        a.mov_rcx_rdi();
        let top = a.offset();
        a.imul_rax_imm8(13);
        a.add_rax_imm8(-1);
        a.dec_rcx();
        a.jnz_to(top);
        a.epilogue();
        assert_eq!(
            a.code,
            [
                0x55, 0x48, 0x89, 0xe5, // push rbp; mov rbp, rsp
                0x48, 0x89, 0xf9, // mov rcx, rdi
                0x48, 0x6b, 0xc0, 0x0d, // imul rax, rax, 13
                0x48, 0x83, 0xc0, 0xff, // add rax, -1
                0x48, 0xff, 0xc9, // dec rcx
                0x0f, 0x85, 0xef, 0xff, 0xff, 0xff, // jnz -17 (back to the imul)
                0x5d, 0xc3, // pop rbp; ret
            ]
        );
    }
}
