//! How the C allocator gives memory back. glibc raises its mmap threshold each time a large
//! block is freed, after which megabyte buffers (decompressed record chunks, stack copies,
//! file reads) come from the heap and their freed space stays resident: a report or the
//! recorder's symbol embedding then held twice the memory it used at any one time.

/// Blocks at least this large are mapped on their own and unmapped when freed.
const MMAP_THRESHOLD: i32 = 256 * 1024;

/// Fixes glibc's mmap threshold at 256 KiB (`MMAP_THRESHOLD`), which also stops it from moving.
pub fn return_large_blocks() {
    // SAFETY: mallopt only sets an allocator tunable; it is called before any other thread
    // exists (first thing in main) and with a documented parameter and a valid value.
    #[cfg(target_env = "gnu")]
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
    }
}

/// Hands the allocator's free pages back to the kernel (all arenas, also those of threads that
/// have ended), e.g. between the recording and the symbol embedding.
pub fn trim() {
    // SAFETY: malloc_trim only releases memory the allocator holds free; it takes its own
    // locks and is safe to call from any thread at any time.
    #[cfg(target_env = "gnu")]
    unsafe {
        libc::malloc_trim(0);
    }
}
