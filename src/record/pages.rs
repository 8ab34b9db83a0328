//! Large buffers of post-processing backed by transparent huge pages, where the system
//! offers them on request.
//!
//! Decoding a large capture writes hundreds of MB of fresh memory (the file's bytes, the
//! spans), and with 4 KiB pages the page faults cost as much as the work: on the 2-vCPU VM,
//! `tickscope table` on a 10 M-event capture spent half its time in the kernel. Linux
//! distributions ship transparent huge pages in `madvise` mode; a 2 MiB page faults in once
//! for 512 small ones. Nothing here changes what a buffer holds, only how it is backed.

/// Buffers smaller than this are left alone: they hold no whole huge page worth the call.
#[cfg(any(test, all(target_os = "linux", feature = "enabled")))]
const FROM_BYTES: usize = 4 << 20;

/// Asks the kernel to back the `len` bytes from `address` (memory the caller allocated and
/// owns, such as a `Vec`'s capacity) with huge pages when it faults them in. A no-op on
/// small buffers, on systems without transparent huge pages or with them off, and off Linux.
#[cfg(all(target_os = "linux", feature = "enabled"))]
pub(crate) fn prefer_huge_pages(address: usize, len: usize) {
    const PAGE: usize = 4096;
    if len < FROM_BYTES {
        return;
    }
    // madvise takes whole pages: the ones that lie entirely inside the buffer.
    let start = address.next_multiple_of(PAGE);
    let end = (address + len) & !(PAGE - 1);
    if end <= start {
        return;
    }
    // SAFETY: `MADV_HUGEPAGE` changes how the kernel backs the pages of the range when they
    // fault in, never their content or whether they are mapped; the range lies inside memory
    // the caller owns (whole pages only, rounded inwards). A failure (no THP support) leaves
    // the memory as it was and is ignored.
    unsafe {
        libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
    }
}

/// Off Linux (or without `enabled`, which brings libc): nothing to ask.
#[cfg(not(all(target_os = "linux", feature = "enabled")))]
pub(crate) fn prefer_huge_pages(_address: usize, _len: usize) {}

/// [`prefer_huge_pages`] for the capacity of `buffer`.
pub(crate) fn prefer_huge_pages_for<T>(buffer: &Vec<T>) {
    prefer_huge_pages(
        buffer.as_ptr() as usize,
        buffer.capacity() * std::mem::size_of::<T>(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advised_buffers_keep_their_content() {
        let mut buffer: Vec<u64> = Vec::with_capacity(FROM_BYTES);
        prefer_huge_pages_for(&buffer);
        buffer.extend(0..FROM_BYTES as u64);
        assert!(buffer.iter().enumerate().all(|(i, &x)| x == i as u64));
        // A buffer that starts and ends off page boundaries: only its whole pages are
        // advised, and it keeps its content.
        let odd: Vec<u8> = (0..FROM_BYTES + 12_345).map(|i| (i % 251) as u8).collect();
        prefer_huge_pages(odd.as_ptr() as usize + 1, odd.len() - 1);
        assert!(odd.iter().enumerate().all(|(i, &x)| x == (i % 251) as u8));
        let small = vec![1u8; 100];
        prefer_huge_pages_for(&small);
        assert_eq!(small, vec![1u8; 100]);
    }
}
