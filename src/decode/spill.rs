//! Streams of fixed-size records written once and read back in order, in memory bounded by a
//! block per stream: each stream fills a block in memory and, once full, appends it to one
//! temporary file (where none can be made, the blocks stay in memory). What a first reading
//! of a capture leaves for a second one, e.g. the call of each poll slice of each thread
//! ([`call_plan`](super::call_plan)).

use std::fs::File;
use std::io;

use super::call_order::temporary;

/// Bytes a stream holds in memory before its block goes to the file.
#[cfg(not(test))]
const BLOCK: usize = 64 << 10;
/// Small in tests, so that theirs go to the file.
#[cfg(test)]
const BLOCK: usize = 256;

/// Streams of records of `size` bytes each.
pub(super) struct Spill {
    size: usize,
    /// The file the full blocks go to, once one was: `None` before, and where none could be
    /// made (the blocks then stay in memory).
    file: Option<File>,
    no_file: bool,
    /// Bytes in the file.
    end: u64,
    streams: Vec<Stream>,
}

#[derive(Default)]
struct Stream {
    /// The block being filled.
    buffer: Vec<u8>,
    /// Its full blocks, in order.
    blocks: Vec<Block>,
}

enum Block {
    /// At this offset in the file, this many bytes.
    File(u64, u32),
    Memory(Vec<u8>),
}

impl Spill {
    /// `streams` empty streams of records of `size` bytes.
    pub(super) fn new(streams: usize, size: usize) -> Self {
        Self {
            size,
            file: None,
            no_file: false,
            end: 0,
            streams: (0..streams).map(|_| Stream::default()).collect(),
        }
    }

    /// Appends `record` (of the streams' size) to stream `stream`.
    pub(super) fn push(&mut self, stream: usize, record: &[u8]) -> io::Result<()> {
        debug_assert_eq!(record.len(), self.size);
        let full = {
            let buffer = &mut self.streams[stream].buffer;
            buffer.extend_from_slice(record);
            buffer.len() + self.size > BLOCK
        };
        if full {
            self.flush(stream)?;
        }
        Ok(())
    }

    /// Moves stream `stream`'s block to the file (or keeps it in memory).
    fn flush(&mut self, stream: usize) -> io::Result<()> {
        let buffer = std::mem::take(&mut self.streams[stream].buffer);
        if buffer.is_empty() {
            return Ok(());
        }
        if self.file.is_none() && !self.no_file {
            self.file = temporary();
            self.no_file = self.file.is_none();
        }
        let block = match &self.file {
            Some(file) => {
                write_at(file, &buffer, self.end)?;
                let block = Block::File(self.end, buffer.len() as u32);
                self.end += buffer.len() as u64;
                block
            }
            None => Block::Memory(buffer),
        };
        self.streams[stream].blocks.push(block);
        Ok(())
    }

    /// Ends the writing: every stream's last block is flushed.
    pub(super) fn finish(&mut self) -> io::Result<()> {
        (0..self.streams.len()).try_for_each(|s| self.flush(s))
    }

    /// How many records a full block holds.
    pub(super) fn per_block(&self) -> usize {
        BLOCK / self.size
    }

    /// Reads block `block` of stream `stream` ([`Spill::finish`]ed) into `bytes`.
    pub(super) fn read_block(
        &self,
        stream: usize,
        block: usize,
        bytes: &mut Vec<u8>,
    ) -> io::Result<()> {
        let block = (self.streams.get(stream))
            .and_then(|s| s.blocks.get(block))
            .ok_or_else(changed)?;
        match block {
            Block::Memory(b) => {
                bytes.clear();
                bytes.extend_from_slice(b);
            }
            &Block::File(offset, len) => {
                let file = self.file.as_ref().ok_or_else(changed)?;
                bytes.resize(len as usize, 0);
                read_at(file, bytes, offset)?;
            }
        }
        Ok(())
    }

    /// A reader of stream `stream` from its first record ([`Spill::finish`]ed).
    pub(super) fn reader(&self, stream: usize) -> Reader<'_> {
        Reader {
            spill: self,
            stream,
            block: 0,
            buffer: Vec::new(),
            at: 0,
        }
    }
}

/// Reads one stream's records in order ([`Spill::reader`]).
pub(super) struct Reader<'s> {
    spill: &'s Spill,
    stream: usize,
    /// The next block to read.
    block: usize,
    buffer: Vec<u8>,
    /// The next record's offset in `buffer`.
    at: usize,
}

impl Reader<'_> {
    /// The next record, `None` past the last.
    pub(super) fn next(&mut self) -> io::Result<Option<&[u8]>> {
        let size = self.spill.size;
        if self.at + size > self.buffer.len() {
            let blocks = self
                .spill
                .streams
                .get(self.stream)
                .map_or(0, |s| s.blocks.len());
            if self.block >= blocks {
                return Ok(None);
            }
            self.spill
                .read_block(self.stream, self.block, &mut self.buffer)?;
            self.block += 1;
            self.at = 0;
            if self.buffer.len() < size {
                return Err(changed());
            }
        }
        let record = &self.buffer[self.at..self.at + size];
        self.at += size;
        Ok(Some(record))
    }
}

/// The error of a block that is not as it was written.
fn changed() -> io::Error {
    io::Error::other("a temporary file was changed while in use")
}

#[cfg(unix)]
fn write_at(file: &File, bytes: &[u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, bytes, offset)
}

#[cfg(unix)]
fn read_at(file: &File, bytes: &mut [u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, bytes, offset)
}

// (`temporary` makes no file on other systems.)
#[cfg(not(unix))]
fn write_at(_: &File, _: &[u8], _: u64) -> io::Result<()> {
    Err(io::Error::other("no temporary file on this system"))
}

#[cfg(not(unix))]
fn read_at(_: &File, _: &mut [u8], _: u64) -> io::Result<()> {
    Err(io::Error::other("no temporary file on this system"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_read_back_in_order() {
        let mut spill = Spill::new(3, 8);
        for i in 0..1000u64 {
            spill.push((i % 3) as usize, &i.to_le_bytes()).unwrap();
        }
        spill.finish().unwrap();
        for stream in 0..3 {
            let mut reader = spill.reader(stream);
            let mut got = Vec::new();
            while let Some(r) = reader.next().unwrap() {
                got.push(u64::from_le_bytes(r.try_into().unwrap()));
            }
            let want: Vec<u64> = (0..1000).filter(|i| i % 3 == stream as u64).collect();
            assert_eq!(got, want);
        }
        // Read twice, the same.
        let mut reader = spill.reader(1);
        assert_eq!(reader.next().unwrap(), Some(&1u64.to_le_bytes()[..]));
        assert!(spill.reader(7).next().unwrap().is_none());
    }
}
