//! HotSpot's interpreted Java frames. The template interpreter keeps a frame pointer, and every
//! interpreter frame holds its `Method*` three words below it (x86_64
//! `frame::interpreter_frame_method_offset = -3`, in JDK 17 and 25 alike). jprof's agent names
//! every `Method*` (JPROF_METHOD_NAMES), so a frame in the `Interpreter` code whose frame
//! pointer lies in the sample's stack copy is named by the method it runs. Anything less sure
//! (a frame outside the copy, a `Method*` the agent never named) stays `Interpreter`: never a
//! wrong name.

/// HotSpot's name for its template interpreter's code (a DynamicCodeGenerated blob).
pub(super) const INTERPRETER: &str = "Interpreter";
/// Bytes below an interpreter frame's frame pointer where its `Method*` is.
pub const METHOD_BELOW_FP: u64 = 24;

/// For each entry of `user` (the sample's user stack, innermost first), the `Method*` of the
/// interpreted frame it is, where the walk of the stack copy (`walked`: address and frame
/// pointer of each frame, in the same order) reached that frame. `interpreted(i)` says whether
/// entry `i` is in the interpreter's code; `read` reads a word of the stack copy.
pub fn methods(
    user: &[u64],
    walked: &[(u64, u64)],
    interpreted: impl Fn(usize) -> bool,
    read: impl Fn(u64) -> Option<u64>,
) -> Vec<Option<u64>> {
    let mut out = vec![None; user.len()];
    let mut next = 0;
    for (i, &addr) in user.iter().enumerate() {
        // The walk and the stack agree frame by frame where both reach; a frame the walk did
        // not see (past the copy) ends the matching.
        let Some(k) = walked[next.min(walked.len())..]
            .iter()
            .position(|&(a, _)| a == addr)
            .map(|k| k + next)
        else {
            break;
        };
        next = k + 1;
        if interpreted(i) {
            let fp = walked[k].1;
            out[i] = fp
                .checked_sub(METHOD_BELOW_FP)
                .and_then(&read)
                .filter(|&m| m != 0);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn method_pointers_of_interpreted_frames_in_the_copy() {
        // Frames: native leaf, two interpreted frames (fp 0x1100, 0x1200), then one past the copy.
        let user = [0x10, 0x20, 0x20, 0x30];
        let walked = [(0x10, 0x1000), (0x20, 0x1100), (0x20, 0x1200)];
        let read = |addr: u64| match addr {
            0x10e8 => Some(0xaaa),
            0x11e8 => Some(0xbbb),
            _ => None,
        };
        let got = methods(&user, &walked, |i| user[i] == 0x20, read);
        assert_eq!(got, vec![None, Some(0xaaa), Some(0xbbb), None]);
    }

    #[test]
    fn a_stack_the_walk_does_not_match_gets_nothing() {
        let got = methods(&[0x10, 0x20], &[(0x99, 0x1000)], |_| true, |_| Some(1));
        assert_eq!(got, vec![None, None]);
    }
}
