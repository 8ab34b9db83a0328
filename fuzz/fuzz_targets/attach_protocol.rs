//! Arbitrary bytes read as the attach protocol's messages (`docs/PROTOCOL.md`), as the
//! program reads a client's and the client the program's: every message parsed, each control
//! message's content decoded, the capture's origins scanned. Nothing may panic (the build has
//! debug assertions, so an arithmetic overflow panics), and what parses writes back the same.
//!
//! `cargo +nightly fuzz run attach_protocol` (seeds in `corpus/attach_protocol`; see `.ci/run`).

#![no_main]

use libfuzzer_sys::fuzz_target;
use tickscope::attach::protocol::{self, End, Info, Request};

fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    while let Ok(Some((message, used))) = protocol::parse(rest) {
        assert!(used > 0 && used <= rest.len());
        rest = &rest[used..];
        match message.kind {
            protocol::REQUEST => {
                if let Ok(request) = Request::decode(&message.content) {
                    assert_eq!(Request::decode(&request.encode()), Ok(request));
                }
            }
            protocol::INFO => {
                if let Ok(info) = Info::decode(&message.content) {
                    // A name read lossily writes back as read.
                    assert_eq!(Info::decode(&info.encode()), Ok(info));
                }
            }
            protocol::END => {
                if let Ok(end) = End::decode(&message.content) {
                    assert_eq!(End::decode(&end.encode()), Ok(end));
                }
            }
            protocol::ERROR => {
                std::hint::black_box(protocol::error_text(&message.content));
            }
            _ => {}
        }
        let bytes = message.to_bytes();
        let again = protocol::parse(&bytes).expect("a message written back parses");
        assert_eq!(again, Some((message, bytes.len())));
    }
    // The blocking reader agrees with the parser on the first message.
    let read = protocol::read_message(&mut &data[..]);
    match (protocol::parse(data), read) {
        (Ok(Some((message, _))), Ok(Some(read))) => assert_eq!(message, read),
        (Ok(Some(_)), other) => panic!("parsed, but read {other:?}"),
        _ => {}
    }
    std::hint::black_box(tickscope::attach::origins(data));
});
