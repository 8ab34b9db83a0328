use std::io;
use std::net::SocketAddr;

use super::TcpEndpoint;
use super::write::write_session;
use crate::attach::{Origin, origins};
use crate::capture::Capture;
use crate::capture::format::{CHUNK_HEADER, ORIGIN_LEN};

#[test]
fn tcp_is_loopback_only_unless_widened() {
    let prof = crate::Profiler::builder().current_thread().start();
    for wide in ["10.0.0.1:0", "0.0.0.0:7000", "[::]:0"] {
        let addr: SocketAddr = wide.parse().unwrap();
        let e = TcpEndpoint::open(&prof, &[addr], false).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
        assert_eq!(
            e.to_string(),
            format!(
                "{addr} is not a loopback address (listen_tcp_any lets clients of other \
                 machines in)"
            )
        );
    }
    // One wide address among loopback ones is refused too.
    let mixed: Vec<SocketAddr> = vec![
        "127.0.0.1:0".parse().unwrap(),
        "10.0.0.1:0".parse().unwrap(),
    ];
    assert!(TcpEndpoint::open(&prof, &mixed, false).is_err());
    assert_eq!(
        TcpEndpoint::open(&prof, &[], false)
            .unwrap_err()
            .to_string(),
        "the address resolves to nothing"
    );
    let open = TcpEndpoint::open(&prof, &["127.0.0.1:0".parse().unwrap()], false).unwrap();
    assert!(open.addr().ip().is_loopback() && open.addr().port() != 0);
    assert_eq!(open.token().len(), 32);
    assert!(!format!("{open:?}").contains(open.token()));
}

#[test]
fn origin_follows_each_header() {
    let prof = crate::Profiler::builder().current_thread().start();
    for _ in 0..3 {
        let _g = crate::scope!("step");
    }
    prof.stop();
    let capture = prof.capture();
    let mut plain = Vec::new();
    capture.write_to(&mut plain).unwrap();
    let mut bytes = Vec::new();
    write_session(&capture, Origin::Flight, 11, &mut bytes).unwrap();
    write_session(&capture, Origin::Live, 12, &mut bytes).unwrap();
    bytes.extend_from_slice(&plain);
    assert_eq!(
        bytes.len(),
        plain.len() * 3 + 2 * (CHUNK_HEADER + ORIGIN_LEN)
    );
    assert_eq!(
        origins(&bytes),
        vec![Some((Origin::Flight, 11)), Some((Origin::Live, 12)), None]
    );
    let read = Capture::from_bytes(&bytes).unwrap();
    assert_eq!(read.len(), 3);
    for session in &read {
        assert_eq!(session.warnings(), &[] as &[String]);
        assert_eq!(session.record_count(), 6);
    }
}
