//! The process's memory allocator: jemalloc, except for the store's cached
//! pages, which glibc's malloc keeps.
//!
//! jemalloc (through `tikv-jemallocator`) spends less CPU per allocation
//! than glibc's malloc on kobo's request path, which allocates and frees
//! many small buffers across threads (docs/performance.md, "jemalloc").
//! But jemalloc rounds a request up to a size class, four to each doubling
//! (4 KiB, 5 KiB, 6 KiB, 7 KiB, 8 KiB, ...), and the store's page cache
//! holds every page in an `Arc<[u8]>`: a page (4 KiB times a power of two)
//! after the `Arc`'s two counters, 4,112 bytes for one page. jemalloc would
//! round that up to 5 KiB, so the default 160 MiB cache would take 200 MiB.
//! glibc keeps such a block in 4,128 bytes. So an allocation with a cached
//! page's size and alignment ([`is_cached_page`]) goes to glibc, every other
//! one to jemalloc. The test is by size, not by type: any other block of
//! exactly that size (rare: 16 bytes past a power of two from 4 KiB up)
//! goes to glibc too, which costs nothing.
//!
//! Invariant: a block is freed by the allocator that made it. Rust frees
//! and reallocates with the layout it allocated with, and the choice is a
//! function of the layout alone, so both calls reach the same allocator; a
//! reallocation that crosses from one kind of layout to the other moves the
//! bytes to a new block of the other allocator.

use std::alloc::{GlobalAlloc, Layout, System};

use tikv_jemallocator::Jemalloc;

/// The store's page size (redb's default).
const PAGE: usize = 4096;

/// What an `Arc<[u8]>` puts before its bytes: the strong and weak counts.
const ARC_COUNTERS: usize = 2 * std::mem::size_of::<usize>();

/// The alignment glibc's malloc gives every block (on 64-bit targets), so
/// a block sent to it needs no more than this.
const MALLOC_ALIGNMENT: usize = 16;

/// jemalloc's settings, read once at its start (`_RJEM_MALLOC_CONF` in the
/// environment still overrides them, for measurements). Two arenas, not
/// eight (four per core): the request threads and the store writer share
/// two cores, and each arena keeps freed pages of its own. Freed pages go
/// back to the kernel over about a second (jemalloc's decay), not ten,
/// from jemalloc's own background thread rather than from the threads that
/// free them. At 1,000,000 intents with ~12,000 live actors these settings
/// and the cached pages in glibc keep the resident set at glibc's (282
/// against 274 MiB); returning pages from the freeing threads instead cost
/// 4-6% of throughput (docs/performance.md, "jemalloc").
#[used]
#[export_name = "_rjem_malloc_conf"]
static JEMALLOC_SETTINGS: &[u8; 53] = b"narenas:2,background_thread:true,dirty_decay_ms:1000\0";

/// jemalloc for everything but the store's cached pages (module docs).
pub struct Allocator;

/// Whether `layout` has the size and alignment of an `Arc<[u8]>` holding a
/// power of two of whole pages: the store cache's blocks (word-aligned,
/// within what glibc's malloc aligns to).
#[inline]
pub fn is_cached_page(layout: &Layout) -> bool {
    let bytes = layout.size().wrapping_sub(ARC_COUNTERS);
    layout.align() <= MALLOC_ALIGNMENT && bytes >= PAGE && bytes.is_power_of_two()
}

// SAFETY: every call is passed to one of two allocators that uphold
// `GlobalAlloc`'s contract, chosen by the layout alone, so a block is always
// freed or grown by the allocator that made it (module docs); the crossing
// reallocation copies what both blocks can hold and frees the old block
// only after the copy.
unsafe impl GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_cached_page(&layout) {
            unsafe { System.alloc(layout) }
        } else {
            unsafe { Jemalloc.alloc(layout) }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_cached_page(&layout) {
            unsafe { System.alloc_zeroed(layout) }
        } else {
            unsafe { Jemalloc.alloc_zeroed(layout) }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if is_cached_page(&layout) {
            unsafe { System.dealloc(ptr, layout) }
        } else {
            unsafe { Jemalloc.dealloc(ptr, layout) }
        }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller promises `new_size`, rounded up to the
        // alignment, does not overflow `isize`.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (is_cached_page(&layout), is_cached_page(&new_layout)) {
            (false, false) => unsafe { Jemalloc.realloc(ptr, layout, new_size) },
            (true, true) => unsafe { System.realloc(ptr, layout, new_size) },
            _ => {
                let moved = unsafe { self.alloc(new_layout) };
                if !moved.is_null() {
                    unsafe {
                        std::ptr::copy_nonoverlapping(ptr, moved, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                }
                moved
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    #[test]
    fn a_cached_page_is_an_arc_of_a_power_of_two_pages() {
        // `Arc<[u8]>`'s block: the two counts, then the bytes (std's
        // `ArcInner`, `repr(C)`), as redb's cache allocates it.
        let arc_of_page = Layout::new::<[usize; 2]>()
            .extend(Layout::array::<u8>(PAGE).unwrap())
            .unwrap()
            .0
            .pad_to_align();
        assert_eq!(arc_of_page.size(), 4112);
        assert!(is_cached_page(&arc_of_page));
        for order in 0..6 {
            assert!(is_cached_page(&layout((PAGE << order) + 16, 8)));
        }
        // Neighbours and other shapes stay with jemalloc.
        for size in [4096, 4111, 4113, 4128, 6160, 8192, 16, 0, 2064] {
            assert!(!is_cached_page(&layout(size, 8)), "{size}");
        }
        assert!(!is_cached_page(&layout(4112, 32)));
    }

    #[test]
    fn reallocation_across_the_two_allocators_keeps_the_bytes() {
        let a = Allocator;
        unsafe {
            // jemalloc -> glibc -> glibc -> jemalloc, each step keeping the
            // bytes both blocks hold.
            let small = layout(100, 8);
            let p = a.alloc(small);
            assert!(!p.is_null());
            for i in 0..100 {
                *p.add(i) = i as u8;
            }
            let q = a.realloc(p, small, 4112);
            assert!(!q.is_null());
            let page = layout(4112, 8);
            for i in 0..100 {
                assert_eq!(*q.add(i), i as u8);
            }
            *q.add(4111) = 7;
            // glibc -> glibc: one page grows to two.
            let q = a.realloc(q, page, 8208);
            assert!(!q.is_null());
            assert_eq!(*q.add(4111), 7);
            let page = layout(8208, 8);
            let r = a.realloc(q, page, 9000);
            assert!(!r.is_null());
            for i in 0..100 {
                assert_eq!(*r.add(i), i as u8);
            }
            assert_eq!(*r.add(4111), 7);
            a.dealloc(r, layout(9000, 8));
        }
    }

    #[test]
    fn zeroed_blocks_of_either_kind_read_as_zero() {
        let a = Allocator;
        for size in [4112, 5000] {
            let l = layout(size, 8);
            unsafe {
                // A block of the same layout written and freed first, so
                // the zeroed one is likely that block again, not memory
                // fresh (and so already zero) from the kernel.
                let dirty = a.alloc(l);
                assert!(!dirty.is_null());
                std::ptr::write_bytes(dirty, 0xff, size);
                a.dealloc(dirty, l);
                let p = a.alloc_zeroed(l);
                assert!(!p.is_null());
                assert!((0..size).all(|i| *p.add(i) == 0));
                a.dealloc(p, l);
            }
        }
    }

    /// One of jemalloc's settings as it runs.
    fn setting<T: Default>(name: &str) -> T {
        let name = std::ffi::CString::new(name).unwrap();
        let mut value = T::default();
        let mut len = std::mem::size_of::<T>();
        let rc = unsafe {
            tikv_jemalloc_sys::mallctl(
                name.as_ptr(),
                (&mut value as *mut T).cast(),
                &mut len,
                std::ptr::null_mut(),
                0,
            )
        };
        assert_eq!(rc, 0, "mallctl {name:?}");
        value
    }

    #[test]
    fn jemalloc_runs_with_kobos_settings() {
        // The settings reach jemalloc only through a symbol of the right
        // name; a wrong one would be ignored without a word.
        if std::env::var_os("_RJEM_MALLOC_CONF").is_some() {
            return;
        }
        assert_eq!(setting::<u32>("opt.narenas"), 2);
        assert_eq!(setting::<isize>("opt.dirty_decay_ms"), 1000);
        assert!(setting::<bool>("opt.background_thread"));
    }
}
