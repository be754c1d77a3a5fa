//! The instrumentation map of an XRay-instrumented ELF file: the `xray_instr_map` section's
//! sled entries, function ids assigned exactly as the runtime and llvm-xray assign them (walk
//! the sleds in section order; ids start at 1 and grow whenever the sled's function changes),
//! and each function's name and size from the symbol table (demangled).
//!
//! Sled entry (64-bit, 32 bytes): `u64 address; u64 function; u8 kind; u8 always_instrument;
//! u8 version; 13 bytes padding` (32-bit: `u32; u32; u8; u8; u8; 5 bytes` = 16). From version 2
//! the two addresses are relative to the field's own address; before, they are absolute and a
//! position-independent file relocates them (`R_*_RELATIVE` addends).

use std::collections::HashMap;

use object::{Object, ObjectSection, ObjectSymbol, RelocationTarget, SymbolKind};

use crate::{Cursor, Endian, ParseError};

/// The section the compiler emits the sleds into.
pub const SECTION: &str = "xray_instr_map";

/// What a sled instruments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SledKind {
    /// Function entry.
    Entry,
    /// Function return.
    Exit,
    /// A tail call out of the function.
    TailCall,
    /// Function entry that also logs arguments.
    LogArgsEntry,
    /// A custom event call.
    CustomEvent,
    /// A typed event call.
    TypedEvent,
    /// A kind code this reader does not know.
    Unknown(u8),
}

impl SledKind {
    fn from_code(code: u8) -> Self {
        match code {
            0 => Self::Entry,
            1 => Self::Exit,
            2 => Self::TailCall,
            3 => Self::LogArgsEntry,
            4 => Self::CustomEvent,
            5 => Self::TypedEvent,
            other => Self::Unknown(other),
        }
    }
}

/// One sled, with addresses already made absolute (file virtual addresses).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sled {
    /// Id of the sled's function.
    pub id: u32,
    /// Address of the sled's patchable instructions.
    pub address: u64,
    /// Entry address of the function the sled belongs to.
    pub function: u64,
    /// What the sled instruments.
    pub kind: SledKind,
    /// The function is instrumented whatever the compiler's thresholds.
    pub always_instrument: bool,
    /// Entry version: from 2 on the addresses were stored relative to their field.
    pub version: u8,
}

/// One instrumented function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Function {
    /// The id logs name the function by (1-based).
    pub id: u32,
    /// Entry address in the file's virtual addresses (add the load bias for a running PIE).
    pub address: u64,
    /// From the symbol table; 0 when unknown.
    pub size: u64,
    /// Demangled symbol name, when a symbol starts at `address`.
    pub name: Option<String>,
}

/// The map: sleds in section order and functions by id (index = id - 1).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InstrMap {
    /// Every sled, in section order.
    pub sleds: Vec<Sled>,
    /// Every instrumented function, in id order.
    pub functions: Vec<Function>,
    /// Position-independent (ET_DYN): addresses need the load bias of the running image.
    pub position_independent: bool,
}

impl InstrMap {
    /// The function with id `id`.
    pub fn function(&self, id: u32) -> Option<&Function> {
        let index = (id as usize).checked_sub(1)?;
        self.functions.get(index)
    }

    /// The function's name, or `#ID` (llvm-xray's spelling for an id it cannot name).
    pub fn name(&self, id: u32) -> String {
        self.function(id)
            .and_then(|f| f.name.clone())
            .unwrap_or_else(|| format!("#{id}"))
    }

    /// The function whose code contains `address` (file virtual address), when the symbol
    /// table gave its size.
    pub fn function_at(&self, address: u64) -> Option<&Function> {
        // Functions are in section order, which is not necessarily address order: search all.
        self.functions
            .iter()
            .find(|f| f.size > 0 && address >= f.address && address - f.address < f.size)
    }
}

/// Whether the ELF image has an `xray_instr_map` section (cheap: headers only).
pub fn has_instr_map(elf: &[u8]) -> bool {
    object::File::parse(elf).is_ok_and(|f| f.section_by_name(SECTION).is_some())
}

/// Reads the map from an ELF image.
pub fn parse(elf: &[u8]) -> Result<InstrMap, ParseError> {
    let file =
        object::File::parse(elf).map_err(|e| ParseError::new(0, format!("an ELF file ({e})")))?;
    let section = file.section_by_name(SECTION).ok_or_else(|| {
        ParseError::new(
            0,
            format!("a {SECTION} section (not built with -fxray-instrument?)"),
        )
    })?;
    let file_offset = section.file_range().map_or(0, |(o, _)| o as usize);
    let bytes = section.data().map_err(|e| {
        ParseError::new(file_offset, format!("the {SECTION} section's bytes ({e})"))
    })?;
    let section_addr = section.address();
    let endian = if file.is_little_endian() {
        Endian::Little
    } else {
        Endian::Big
    };
    let word = if file.is_64() { 8 } else { 4 };
    let entry_len = if file.is_64() { 32 } else { 16 };
    if bytes.len() % entry_len != 0 {
        return Err(ParseError::new(
            file_offset + bytes.len() - bytes.len() % entry_len,
            format!("{SECTION} to be a whole number of {entry_len}-byte entries"),
        ));
    }
    let relocated = relative_relocations(&file, section_addr, bytes.len() as u64);
    let mut sleds = Vec::with_capacity(bytes.len() / entry_len);
    let mut functions: Vec<Function> = Vec::new();
    for (i, entry) in bytes.chunks_exact(entry_len).enumerate() {
        let entry_offset = (i * entry_len) as u64;
        let mut c = Cursor::with_endian(entry, file_offset + i * entry_len, endian);
        let mut read_word = || -> Result<u64, ParseError> {
            if word == 8 {
                c.u64()
            } else {
                c.u32().map(u64::from)
            }
        };
        let mut address = read_word()?;
        let mut function = read_word()?;
        let kind = SledKind::from_code(c.u8()?);
        let always_instrument = c.u8()? != 0;
        let version = c.u8()?;
        let field_addr = section_addr.wrapping_add(entry_offset);
        if version >= 2 {
            address = address.wrapping_add(field_addr);
            function = function.wrapping_add(field_addr + word as u64);
        } else {
            if let Some(&a) = relocated.get(&entry_offset) {
                address = a;
            }
            if let Some(&f) = relocated.get(&(entry_offset + word as u64)) {
                function = f;
            }
        }
        if functions.last().is_none_or(|f| f.address != function) {
            functions.push(Function {
                id: functions.len() as u32 + 1,
                address: function,
                size: 0,
                name: None,
            });
        }
        sleds.push(Sled {
            id: functions.len() as u32,
            address,
            function,
            kind,
            always_instrument,
            version,
        });
    }
    name_functions(&file, &mut functions);
    Ok(InstrMap {
        sleds,
        functions,
        position_independent: file.kind() == object::ObjectKind::Dynamic,
    })
}

/// Values of the section's words that a relative relocation sets at load time, by offset in
/// the section (for version 0/1 sleds of position-independent files).
fn relative_relocations(file: &object::File<'_>, start: u64, len: u64) -> HashMap<u64, u64> {
    let mut values = HashMap::new();
    let Some(relocations) = file.dynamic_relocations() else {
        return values;
    };
    for (offset, relocation) in relocations {
        let inside = offset >= start && offset - start < len;
        // R_*_RELATIVE has no symbol: the word becomes load base + addend (base 0 here).
        if inside && matches!(relocation.target(), RelocationTarget::Absolute) {
            values.insert(offset - start, relocation.addend() as u64);
        }
    }
    values
}

/// Names and sizes from the symbol table (or the dynamic one), matched by exact address.
fn name_functions(file: &object::File<'_>, functions: &mut [Function]) {
    let mut by_address: HashMap<u64, (String, u64)> = HashMap::new();
    let symbols = file.symbols().chain(file.dynamic_symbols());
    for symbol in symbols {
        if symbol.kind() != SymbolKind::Text || symbol.address() == 0 {
            continue;
        }
        let Ok(name) = symbol.name() else { continue };
        if name.is_empty() {
            continue;
        }
        // A global name is preferred over a local alias at the same address.
        let entry = by_address.entry(symbol.address());
        match entry {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert((name.to_string(), symbol.size()));
            }
            std::collections::hash_map::Entry::Occupied(mut o) if symbol.is_global() => {
                o.insert((name.to_string(), symbol.size().max(o.get().1)));
            }
            std::collections::hash_map::Entry::Occupied(_) => {}
        }
    }
    for f in functions {
        if let Some((name, size)) = by_address.get(&f.address) {
            f.name = Some(crate::demangle::demangle(name));
            f.size = *size;
        }
    }
}
