//! The process's allocator: the system's, with the bytes each thread holds counted in a
//! thread-local cell (no contention; a few instructions per allocation). Middleware steps
//! run on one thread each and are stopped when what they allocated, less what they freed,
//! passes their bound (`converger_core::middleware`).
//!
//! A count is a thread's: memory allocated on one thread and freed on another lowers the
//! second thread's count. A bound over a stretch of one thread's work (`live_bytes` at its
//! end less at its start) is what it is for.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    static LIVE: Cell<i64> = const { Cell::new(0) };
}

fn add(n: usize, sign: i64) {
    let n = i64::try_from(n).unwrap_or(i64::MAX);
    // `try_with`: never fails for a const cell without a destructor, but an allocator must
    // not panic whatever happens.
    let _ = LIVE.try_with(|c| c.set(c.get().saturating_add(sign.saturating_mul(n))));
}

/// Bytes allocated less bytes freed by this thread so far (negative when it freed more than
/// it allocated, e.g. what another thread made).
pub fn live_bytes() -> i64 {
    LIVE.try_with(Cell::get).unwrap_or(0)
}

/// Whether this allocator is the process's (a count that never moves means it is not).
pub fn is_installed() -> bool {
    let before = live_bytes();
    let b = std::hint::black_box(Box::new([0u8; 64]));
    let after = live_bytes();
    drop(b);
    after > before
}

/// The system allocator, counting.
pub struct Counting;

#[allow(unsafe_code)]
// SAFETY: every call forwards to `System` with the caller's own arguments, unchanged; the
// counting touches only a thread-local `Cell` and allocates nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        add(layout.size(), 1);
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract for `layout`.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        add(layout.size(), 1);
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        add(layout.size(), -1);
        // SAFETY: `ptr` was allocated by `System` (through this wrapper) with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size >= layout.size() {
            add(new_size - layout.size(), 1);
        } else {
            add(layout.size() - new_size, -1);
        }
        // SAFETY: `ptr` was allocated by `System` with `layout`; the caller upholds the rest.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Installed for every binary that links the project's crates (through `converger-core`).
#[global_allocator]
static ALLOCATOR: Counting = Counting;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_threads_live_bytes_follow_what_it_holds() {
        assert!(is_installed());
        let start = live_bytes();
        let mut v: Vec<u8> = Vec::with_capacity(1 << 20);
        assert!(live_bytes() - start >= 1 << 20);
        v.resize(4 << 20, 1);
        assert!(live_bytes() - start >= 4 << 20);
        v.truncate(10);
        v.shrink_to_fit();
        assert!(live_bytes() - start < 1 << 20);
        drop(v);
        // Another thread's allocations are its own.
        let start = live_bytes();
        std::thread::spawn(|| std::hint::black_box(vec![0u8; 8 << 20]))
            .join()
            .ok();
        assert!(live_bytes() - start < 1 << 20);
    }
}
