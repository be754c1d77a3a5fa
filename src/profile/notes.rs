//! Notes grouped for reading: one line per kind of problem rather than one per binary
//! (`25 binaries have no symbols …: a (120), b (33), …`), and a note repeated word for word
//! said once with its count.

use std::collections::BTreeMap;

/// How many members a grouped line names before `… and N more`.
const NAMED: usize = 8;

/// A per-binary note the symbolizer writes:
/// `{count} frames shown as [unknown] ({module}+0x...): {why}`.
struct UnknownFrames<'a> {
    count: u64,
    module: &'a str,
    why: &'a str,
}

fn unknown_frames(note: &str) -> Option<UnknownFrames<'_>> {
    let (count, rest) = note.split_once(" frames shown as [unknown] (")?;
    let (module, why) = rest.split_once("+0x...): ")?;
    Some(UnknownFrames {
        count: count.parse().ok()?,
        module,
        why,
    })
}

/// The kinds of per-binary notes told in one line when several binaries have them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// The binary was read but has no symbol covering the sampled addresses (stripped).
    NoSymbols,
    /// The binary could not be read and the recording has no symbols for it.
    Unreadable,
}

fn kind(why: &str) -> Option<Kind> {
    if why.ends_with(" has no symbol for these addresses") {
        Some(Kind::NoSymbols)
    } else if why.starts_with("cannot read ") && why.contains("the recording has no symbols") {
        Some(Kind::Unreadable)
    } else {
        None
    }
}

/// `notes` for reading: per-binary notes of one kind become one line when there are several;
/// a repeated note is said once (`(3 times)`). The order is that of each group's first note.
pub fn group<'a>(notes: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    enum Slot<'a> {
        Text(&'a str, usize),
        Group(Kind),
    }
    let mut slots: Vec<Slot<'a>> = Vec::new();
    let mut groups: BTreeMap<Kind, Vec<UnknownFrames<'a>>> = BTreeMap::new();
    let mut seen: BTreeMap<&'a str, usize> = BTreeMap::new();
    for note in notes {
        if let Some(u) = unknown_frames(note) {
            if let Some(k) = kind(u.why) {
                let members = groups.entry(k).or_default();
                if members.is_empty() {
                    slots.push(Slot::Group(k));
                }
                members.push(u);
                continue;
            }
        }
        match seen.get(note) {
            Some(&i) => {
                if let Slot::Text(_, n) = &mut slots[i] {
                    *n += 1;
                }
            }
            None => {
                seen.insert(note, slots.len());
                slots.push(Slot::Text(note, 1));
            }
        }
    }
    let mut out = Vec::new();
    for slot in slots {
        match slot {
            Slot::Text(note, 1) => out.push(note.to_string()),
            Slot::Text(note, n) => out.push(format!("{note} ({n} times)")),
            Slot::Group(k) => {
                let members = &groups[&k];
                if let [one] = members.as_slice() {
                    out.push(format!(
                        "{} frames shown as [unknown] ({}+0x...): {}",
                        one.count, one.module, one.why
                    ));
                } else {
                    out.push(group_line(k, members));
                }
            }
        }
    }
    out
}

/// One line for several binaries with the same kind of note, the most sampled first.
fn group_line(kind: Kind, members: &[UnknownFrames<'_>]) -> String {
    let mut by_count: Vec<&UnknownFrames<'_>> = members.iter().collect();
    by_count.sort_by(|a, b| (b.count, a.module).cmp(&(a.count, b.module)));
    let frames: u64 = members.iter().map(|m| m.count).sum();
    let mut named: Vec<String> = by_count
        .iter()
        .take(NAMED)
        .map(|m| format!("{} ({})", m.module, m.count))
        .collect();
    if by_count.len() > NAMED {
        named.push(format!("… and {} more", by_count.len() - NAMED));
    }
    let what = match kind {
        Kind::NoSymbols => "binaries have no symbols for the addresses sampled in them",
        Kind::Unreadable => {
            "binaries could not be read and the recording has no symbols for them \
             (see --search-dir; record with symbols embedded, the default)"
        }
    };
    format!(
        "{} {what}; {frames} frames shown as [unknown] (binary+0x...), by binary: {}",
        members.len(),
        named.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stripped(n: u64, name: &str) -> String {
        format!(
            "{n} frames shown as [unknown] ({name}+0x...): /usr/lib/{name} has no symbol for \
             these addresses"
        )
    }

    #[test]
    fn binaries_without_symbols_are_one_line() {
        let mut notes = vec!["weights: samples".to_string()];
        for i in 0..10 {
            notes.push(stripped(10 + i, &format!("lib{i}.so")));
        }
        notes.push("kernel frames unavailable".into());
        notes.push("kernel frames unavailable".into());
        let grouped = group(notes.iter().map(String::as_str));
        assert_eq!(
            grouped,
            vec![
                "weights: samples".to_string(),
                "10 binaries have no symbols for the addresses sampled in them; 145 frames \
                 shown as [unknown] (binary+0x...), by binary: lib9.so (19), lib8.so (18), \
                 lib7.so (17), lib6.so (16), lib5.so (15), lib4.so (14), lib3.so (13), \
                 lib2.so (12), … and 2 more"
                    .to_string(),
                "kernel frames unavailable (2 times)".to_string(),
            ]
        );
    }

    #[test]
    fn a_single_binary_and_other_notes_stay_as_they_are() {
        let notes = [
            stripped(3, "libz.so"),
            "1 frames shown as [unknown] ([vdso]+0x...): anonymous memory no runtime named"
                .to_string(),
            "4 frames shown as [unknown] (a.out+0x...): cannot read /x/a.out (No such file) \
             and the recording has no symbols for it"
                .to_string(),
        ];
        let grouped = group(notes.iter().map(String::as_str));
        assert_eq!(grouped, notes.to_vec());
    }
}
