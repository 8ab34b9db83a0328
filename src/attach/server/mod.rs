//! The program's side: a listening thread that answers one client at a time.
//!
//! Nothing here runs on the recording path. The thread sleeps in `accept` until a client
//! connects; a recording it serves is a nested session of its own (all threads), started and
//! stopped by the thread, beside the program's session, which goes on as if nothing
//! happened.
//!
//! The same serving code answers on the Unix domain socket ([`Listener`]) and on a TCP
//! endpoint ([`TcpEndpoint`]), where the client must first send the endpoint's token. The
//! two endpoints of a process serve one client at a time between them.

mod endpoint;
mod serve;
#[cfg(test)]
mod tests;
mod write;

pub(crate) use endpoint::{Listener, TcpEndpoint};
