//! The connections the attach protocol runs over, Unix domain sockets and TCP, behind one
//! small trait, so that the program's serving code and the client are written once.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// A connected stream: what the serving loop and the client need of a socket.
pub(crate) trait Stream: Send + Sync {
    /// As [`UnixStream::set_read_timeout`].
    fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()>;
    /// As [`UnixStream::set_write_timeout`].
    fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()>;
    /// Shuts the writing half down.
    #[cfg(feature = "enabled")]
    fn shutdown_write(&self) -> io::Result<()>;
    /// Reads some bytes (as [`Read::read`] through a shared reference).
    fn read_bytes(&self, buf: &mut [u8]) -> io::Result<usize>;
    /// Writes some bytes (as [`Write::write`] through a shared reference).
    fn write_bytes(&self, buf: &[u8]) -> io::Result<usize>;
}

macro_rules! stream {
    ($type:ty) => {
        impl Stream for $type {
            fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
                <$type>::set_read_timeout(self, timeout)
            }
            fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
                <$type>::set_write_timeout(self, timeout)
            }
            #[cfg(feature = "enabled")]
            fn shutdown_write(&self) -> io::Result<()> {
                self.shutdown(std::net::Shutdown::Write)
            }
            fn read_bytes(&self, buf: &mut [u8]) -> io::Result<usize> {
                (&*self).read(buf)
            }
            fn write_bytes(&self, buf: &[u8]) -> io::Result<usize> {
                (&*self).write(buf)
            }
        }
    };
}

stream!(UnixStream);
stream!(TcpStream);

impl Read for &dyn Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_bytes(buf)
    }
}

impl Write for &dyn Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_bytes(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        // Both sockets send what is written at once.
        Ok(())
    }
}

#[cfg(feature = "enabled")]
/// Compares two byte strings in time that depends on their lengths alone, not on where they
/// differ (for the TCP endpoint's token).
pub(crate) fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

#[cfg(feature = "enabled")]
/// A new token for a TCP endpoint: 16 bytes of `/dev/urandom`, in hexadecimal.
pub(crate) fn new_token() -> io::Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| io::Error::new(e.kind(), format!("/dev/urandom: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(all(test, feature = "enabled"))]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_new_hex_and_compared_whole() {
        let (a, b) = (new_token().unwrap(), new_token().unwrap());
        assert_eq!(a.len(), 32);
        assert!(
            a.bytes()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_ne!(a, b);
        assert!(same_bytes(a.as_bytes(), a.clone().as_bytes()));
        assert!(!same_bytes(a.as_bytes(), b.as_bytes()));
        assert!(!same_bytes(a.as_bytes(), &a.as_bytes()[..31]));
        assert!(!same_bytes(b"", b"x"));
        assert!(same_bytes(b"", b""));
    }
}
