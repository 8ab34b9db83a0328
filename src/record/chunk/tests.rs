//! Chunks made resident: `populate` and `touch`, checked with `mincore`.

use super::*;

const PAGE: usize = 4096;

/// How many of the `pages` pages from `address` (page-aligned) are resident.
fn resident(address: usize, pages: usize) -> usize {
    let mut vec = vec![0u8; pages];
    // SAFETY: the range is mapped by the caller; `vec` has a byte per page.
    let done =
        unsafe { libc::mincore(address as *mut libc::c_void, pages * PAGE, vec.as_mut_ptr()) };
    assert_eq!(done, 0, "{}", std::io::Error::last_os_error());
    vec.iter().filter(|&&b| b & 1 == 1).count()
}

#[test]
fn populate_makes_fresh_pages_resident_without_writing() {
    let pages = 16;
    // SAFETY: a new private anonymous mapping, unmapped below.
    let map = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            pages * PAGE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(map, libc::MAP_FAILED);
    let base = map as usize;
    assert_eq!(resident(base, pages), 0);
    // Off page boundaries at both ends: only the 14 whole pages inside are populated.
    let covered = populate(base + 100, pages * PAGE - 200);
    assert_eq!(covered, base + PAGE..base + (pages - 1) * PAGE);
    assert_eq!(resident(base, pages), pages - 2);
    // SAFETY: the mapping is readable; populated pages read as zero.
    let bytes = unsafe { std::slice::from_raw_parts(map.cast::<u8>(), pages * PAGE) };
    assert!(bytes.iter().all(|&b| b == 0));
    assert_eq!(populate(base + 100, 200), 0..0);
    // SAFETY: the mapping made above, no longer used.
    assert_eq!(unsafe { libc::munmap(map, pages * PAGE) }, 0);
}

#[test]
fn touched_chunks_are_resident_and_keep_their_header() {
    let mut chunk = ChunkBox::alloc();
    chunk.touch();
    // SAFETY: in bounds of the chunk; no reference is created.
    let slots = unsafe { std::ptr::addr_of!((*chunk.0.as_ptr()).slots) } as usize;
    let first = slots & !(PAGE - 1);
    let end = (slots + CHUNK_BYTES).next_multiple_of(PAGE);
    let pages = (end - first) / PAGE;
    assert_eq!(resident(first, pages), pages);
    let chunk = chunk.get_mut();
    assert_eq!(chunk.header.magic, CHUNK_MAGIC);
    assert_eq!(chunk.published(), 0);
}

#[test]
fn chunks_touched_together_are_resident_and_keep_their_headers() {
    let mut chunks: Vec<ChunkBox> = (0..9).map(|_| ChunkBox::alloc()).collect();
    ChunkBox::touch_all(&mut chunks);
    assert_eq!(chunks.len(), 9);
    for chunk in &mut chunks {
        let (slots, len) = chunk.slot_bytes();
        let first = slots & !(PAGE - 1);
        let pages = ((slots + len).next_multiple_of(PAGE) - first) / PAGE;
        assert_eq!(resident(first, pages), pages);
        let chunk = chunk.get_mut();
        assert_eq!(chunk.header.magic, CHUNK_MAGIC);
        assert_eq!(chunk.published(), 0);
    }
}
