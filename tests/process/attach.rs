//! Attaching to this process (`ProfilerBuilder::listen`) through `tickscope::attach`: the capture holds
//! the flight recorder's window and the live window, each record once, and nothing a client
//! does (garbage, another protocol version, leaving mid-transfer) harms the program or its
//! session's numbers. Another user's client is tested by the CLI's tests (`setpriv`).

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::time::Duration;

use tickscope::Capture;
use tickscope::attach::protocol::{
    self, Command, END, End, INFO, Info, MESSAGE_VERSION, Mode, REQUEST, Request,
};
use tickscope::attach::{self, AttachError, Origin};
use tickscope::report::Report;
use tickscope::{Profiler, scope};

// One listener per process, and attaches record every thread: every test takes
// `common::serial()`, one at a time.
use crate::common::serial;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tickscope-attach-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn work(n: u64, name: &'static str) {
    for _ in 0..n {
        match name {
            "before" => drop(scope!("before")),
            "during" => drop(scope!("during")),
            _ => drop(scope!("after")),
        }
    }
}

/// Names and call counts of a trace's table, sorted by name.
fn calls(trace: &tickscope::trace::Trace) -> Vec<(String, u64)> {
    let mut rows: Vec<(String, u64)> = Report::new(trace)
        .rows()
        .iter()
        .map(|r| (r.name.to_string(), r.calls))
        .collect();
    rows.sort();
    rows
}

fn named(rows: &[(&str, u64)]) -> Vec<(String, u64)> {
    rows.iter().map(|&(n, c)| (n.to_owned(), c)).collect()
}

#[test]
fn a_capture_is_the_window_before_then_the_live_one_each_record_once() {
    let _serial = serial();
    let prof = Profiler::builder()
        .flight_recorder(4 << 20)
        .listen(true)
        .start();
    work(100, "before");
    let out = scratch("both.tscope");
    let socket = attach::socket_path(std::process::id()).unwrap();
    let (attached_tx, attached) = mpsc::channel();
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let client = {
        let (out, stop) = (out.clone(), std::sync::Arc::clone(&stop));
        std::thread::spawn(move || {
            attach::record_at(
                &socket,
                Duration::from_secs(600),
                &out,
                &stop,
                &mut |info| {
                    attached_tx.send(info.clone()).unwrap();
                },
            )
        })
    };
    let info = attached.recv().unwrap();
    assert_eq!(
        (info.pid, info.mode, info.flight_bytes),
        (std::process::id(), Mode::Flight, 4 << 20)
    );
    work(100, "during");
    // Past the first live window (a second at most): the rest goes in another.
    std::thread::sleep(Duration::from_millis(1200));
    work(150, "during");
    stop.store(true, std::sync::atomic::Ordering::Release);
    let recorded = client.join().unwrap().unwrap();
    assert!(recorded.stopped);
    assert!(recorded.sessions >= 2, "{} sessions", recorded.sessions);
    work(7, "after");
    prof.stop();

    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(recorded.bytes, bytes.len() as u64);
    let origins: Vec<Option<Origin>> = attach::origins(&bytes)
        .into_iter()
        .map(|o| o.map(|(origin, _)| origin))
        .collect();
    assert_eq!(origins.len(), recorded.sessions as usize);
    assert_eq!(origins[0], Some(Origin::Flight));
    assert!(origins[1..].iter().all(|&o| o == Some(Origin::Live)));
    let captures = Capture::read_all(&out).unwrap();
    assert_eq!(captures.len(), recorded.sessions as usize);
    for capture in &captures {
        assert_eq!(capture.warnings(), &[] as &[String]);
        assert_eq!(capture.process_id(), std::process::id());
    }
    assert_eq!(calls(&captures[0].decode()), named(&[("before", 100)]));
    // The live windows, back to back, hold each record once.
    let live: u64 = captures[1..]
        .iter()
        .flat_map(|c| calls(&c.decode()))
        .map(|(name, n)| {
            assert_eq!(name, "during");
            n
        })
        .sum();
    assert_eq!(live, 250);
    // The program's own session saw everything, once.
    assert_eq!(
        calls(&prof.trace()),
        named(&[("after", 7), ("before", 100), ("during", 250)])
    );
    assert!(!out.with_extension("tscope.part").exists());
}

#[test]
fn duration_zero_is_the_flight_window_alone_and_needs_a_recorder() {
    let _serial = serial();
    let prof = Profiler::builder()
        .flight_recorder(1 << 20)
        .listen(true)
        .start();
    work(42, "before");
    let out = scratch("window.tscope");
    let never = AtomicBool::new(false);
    let recorded = attach::record(std::process::id(), Duration::ZERO, &out, &never).unwrap();
    assert_eq!(recorded.sessions, 1);
    let captures = Capture::read_all(&out).unwrap();
    assert_eq!(captures.len(), 1);
    assert_eq!(calls(&captures[0].decode()), named(&[("before", 42)]));
    prof.stop();
    // The socket goes with the session.
    assert!(!attach::socket_path(std::process::id()).unwrap().exists());

    let prof = Profiler::builder().listen(true).start();
    let e = attach::record(std::process::id(), Duration::ZERO, &out, &never).unwrap_err();
    assert_eq!(
        e.to_string(),
        "the program says: the program runs no flight recorder: a window of 0 s holds nothing"
    );
    assert_eq!(attach::info(std::process::id()).unwrap().mode, Mode::Memory);
    drop(prof);
    let e = attach::info(std::process::id()).unwrap_err();
    assert!(matches!(e, AttachError::NotListening { .. }), "{e}");
}

/// Sends `bytes` as a client and returns the program's answer, up to its closing.
fn exchange(bytes: &[u8]) -> Vec<u8> {
    let path = attach::socket_path(std::process::id()).unwrap();
    let mut stream = UnixStream::connect(path).unwrap();
    stream.write_all(bytes).unwrap();
    stream.shutdown(std::net::Shutdown::Write).unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    answer
}

fn error_of(answer: &[u8]) -> String {
    let (message, used) = protocol::parse(answer).unwrap().unwrap();
    assert_eq!(message.kind, protocol::ERROR);
    assert_eq!(used, answer.len(), "the error is the last message");
    protocol::error_text(&message.content)
}

#[test]
fn misuse_gets_one_line_and_never_harms_the_program() {
    let _serial = serial();
    let prof = Profiler::builder()
        .flight_recorder(1 << 20)
        .listen(true)
        .start();
    work(10, "before");

    assert_eq!(
        error_of(&exchange(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")),
        "bad request: not a tickscope attach message (magic 0x20544547, not 0x50435354)"
    );
    let mut old = Request::new(Command::Info).encode();
    old[0..2].copy_from_slice(&0u16.to_le_bytes());
    let mut message = Vec::new();
    protocol::write_chunk(&mut message, REQUEST, MESSAGE_VERSION, &old).unwrap();
    assert_eq!(
        error_of(&exchange(&message)),
        "protocol version 0 is not supported (the program speaks version 2)"
    );
    let mut stop_first = Vec::new();
    protocol::write_chunk(&mut stop_first, protocol::STOP, MESSAGE_VERSION, &[]).unwrap();
    assert_eq!(
        error_of(&exchange(&stop_first)),
        "bad request: the first message must be a request (type 64), not type 65"
    );
    // A header that announces more than a request may hold.
    let mut huge = Vec::new();
    protocol::write_chunk(&mut huge, REQUEST, MESSAGE_VERSION, &[]).unwrap();
    huge[8..16].copy_from_slice(&(1u64 << 40).to_le_bytes());
    assert_eq!(
        error_of(&exchange(&huge)),
        "bad request: a message of type 64 announces 1099511627776 bytes, more than the \
         4096 allowed"
    );
    // Cut inside the request.
    assert_eq!(
        error_of(&exchange(&message[..20])),
        "bad request: the connection closed inside a message"
    );

    // Clients that leave mid-recording, at every stage.
    let path = attach::socket_path(std::process::id()).unwrap();
    let mut record = Vec::new();
    let request = Request::new(Command::Record {
        duration_ms: 60_000,
    });
    protocol::write_chunk(&mut record, REQUEST, MESSAGE_VERSION, &request.encode()).unwrap();
    for read_first in [0usize, 16, 64] {
        let mut stream = UnixStream::connect(&path).unwrap();
        stream.write_all(&record).unwrap();
        let mut some = vec![0u8; read_first];
        stream.read_exact(&mut some).unwrap();
        drop(stream);
    }
    // Garbage in place of a stop while recording.
    let mut stream = UnixStream::connect(&path).unwrap();
    stream.write_all(&record).unwrap();
    stream.write_all(&[0xAB; 64]).unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    let mut rest = &answer[..];
    let mut last = None;
    while let Ok(Some((message, used))) = protocol::parse(rest) {
        rest = &rest[used..];
        last = Some(message);
    }
    let last = last.unwrap();
    assert_eq!(last.kind, protocol::ERROR);
    assert!(
        protocol::error_text(&last.content).starts_with("bad message: not a tickscope attach"),
        "{}",
        protocol::error_text(&last.content)
    );

    // The program still answers, and its session is exact.
    work(5, "after");
    let info = attach::info(std::process::id()).unwrap();
    assert_eq!(info.mode, Mode::Flight);
    prof.stop();
    assert_eq!(calls(&prof.trace()), named(&[("after", 5), ("before", 10)]));
}

/// A fake program on a socket of its own, answering one client with `answer`.
fn fake_program(name: &str, answer: Vec<u8>) -> (PathBuf, std::thread::JoinHandle<()>) {
    let path = scratch(name);
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path).unwrap();
    let thread = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut request = [0u8; 32];
        stream.read_exact(&mut request).unwrap();
        let _ = stream.write_all(&answer);
    });
    (path, thread)
}

fn info_message(version: u16) -> Vec<u8> {
    let info = Info {
        version,
        mode: Mode::Flight,
        pid: 1,
        start_unix_ns: 0,
        flight_bytes: 1 << 20,
        program: "fake".into(),
    };
    let mut out = Vec::new();
    protocol::write_chunk(&mut out, INFO, MESSAGE_VERSION, &info.encode()).unwrap();
    out
}

#[test]
fn the_client_reports_a_bad_program_in_one_line_and_leaves_no_file() {
    let _serial = serial();
    let out = scratch("never.tscope");
    let never = AtomicBool::new(false);
    let record = |socket: &std::path::Path| {
        attach::record_at(socket, Duration::from_secs(1), &out, &never, &mut |_| {})
            .unwrap_err()
            .to_string()
    };

    let (socket, thread) = fake_program("newer.sock", info_message(3));
    assert_eq!(
        record(&socket),
        "the program speaks protocol version 3, this client version 2"
    );
    thread.join().unwrap();

    // Half a session, then the connection closes.
    let prof = Profiler::builder().current_thread().start();
    drop(scope!("x"));
    prof.stop();
    let mut data = Vec::new();
    prof.capture().write_to(&mut data).unwrap();
    let mut answer = info_message(protocol::PROTOCOL_VERSION);
    answer.extend_from_slice(&data[..data.len() / 2]);
    let (socket, thread) = fake_program("cut.sock", answer);
    let said = record(&socket);
    thread.join().unwrap();
    assert!(
        said == "reading the answer: the connection closed inside a message"
            || said.starts_with("the program closed the connection mid-transfer, after "),
        "{said}"
    );

    // Whole data, but an end that does not match it.
    let mut answer = info_message(protocol::PROTOCOL_VERSION);
    answer.extend_from_slice(&data);
    let end = End {
        sessions: 1,
        bytes: data.len() as u64 + 16,
    };
    protocol::write_chunk(&mut answer, END, MESSAGE_VERSION, &end.encode()).unwrap();
    let (socket, thread) = fake_program("short.sock", answer);
    assert_eq!(
        record(&socket),
        format!(
            "the program sent 1 sessions in {} bytes, 1 in {} arrived",
            data.len() + 16,
            data.len()
        )
    );
    thread.join().unwrap();
    assert!(!out.exists());
    let mut part = out.clone().into_os_string();
    part.push(".part");
    assert!(!PathBuf::from(part).exists());
}

#[test]
fn watched_windows_hold_every_record_once() {
    let _serial = serial();
    let prof = Profiler::builder().listen(true).start();
    let socket = attach::socket_path(std::process::id()).unwrap();
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let (attached_tx, attached) = mpsc::channel();
    let watcher = {
        let stop = std::sync::Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut windows = Vec::new();
            attach::watch_at(
                &socket,
                Duration::from_millis(10),
                &stop,
                &mut |_| attached_tx.send(()).unwrap(),
                &mut |capture| windows.push(calls(&capture.decode())),
            )
            .map(|()| windows)
        })
    };
    attached.recv().unwrap();
    for _ in 0..20 {
        work(50, "during");
        std::thread::sleep(Duration::from_millis(3));
    }
    stop.store(true, std::sync::atomic::Ordering::Release);
    let windows = watcher.join().unwrap().unwrap();
    assert!(windows.len() > 1, "{} windows", windows.len());
    let total: u64 = windows.iter().flatten().map(|(_, calls)| calls).sum();
    assert_eq!(total, 1000);
    prof.stop();
    assert_eq!(calls(&prof.trace()), named(&[("during", 1000)]));
}

/// Records `endpoint` until `stop`, in a thread, once the program answered: the join handle.
fn record_in_thread(
    endpoint: attach::Endpoint,
    out: PathBuf,
    stop: &std::sync::Arc<AtomicBool>,
) -> std::thread::JoinHandle<Result<attach::Recorded, AttachError>> {
    let (attached_tx, attached) = mpsc::channel();
    let stop = std::sync::Arc::clone(stop);
    let client = std::thread::spawn(move || {
        attach::record_from(
            &endpoint,
            Duration::from_secs(600),
            &out,
            &stop,
            &mut |_| attached_tx.send(()).unwrap(),
        )
    });
    attached.recv().unwrap();
    client
}

#[test]
fn tcp_needs_the_token_and_records_exactly() {
    let _serial = serial();
    let prof = Profiler::builder()
        .flight_recorder(1 << 20)
        .listen(false)
        .listen_tcp("127.0.0.1:0")
        .start();
    let addr = prof.listen_addr().unwrap();
    assert!(addr.ip().is_loopback() && addr.port() != 0, "{addr}");
    let token = prof.listen_token().unwrap();
    assert_eq!(token.len(), 32);
    // TCP alone: no Unix socket, but an entry that `list` (`tickscope ps`) finds, with the
    // address and not the token.
    let pid = std::process::id();
    assert!(!attach::socket_path(pid).unwrap().exists());
    let entry = attach::socket_dir().unwrap().join(format!("{pid}.tcp"));
    let listed: Vec<_> = attach::list()
        .unwrap()
        .into_iter()
        .filter(|p| p.info.as_ref().is_ok_and(|i| i.pid == pid))
        .collect();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].path, entry);
    assert_eq!(listed[0].tcp, Some(addr));
    let info = listed[0].info.as_ref().unwrap();
    assert_eq!(
        (info.mode, info.flight_bytes),
        (attach::protocol::Mode::Flight, 1 << 20)
    );
    let content = std::fs::read(&entry).unwrap();
    assert!(content.starts_with(format!("{addr}\n").as_bytes()));
    assert!(!content.windows(32).any(|w| w == token.as_bytes()));
    work(40, "before");

    // The flight recorder's window, then a live window, through TCP with the token.
    let endpoint = attach::Endpoint::Tcp {
        addr: addr.to_string(),
        token: token.clone(),
    };
    let out = scratch("tcp.tscope");
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let client = record_in_thread(endpoint, out.clone(), &stop);
    work(25, "during");
    stop.store(true, std::sync::atomic::Ordering::Release);
    let recorded = client.join().unwrap().unwrap();
    let captures = Capture::read_all(&out).unwrap();
    assert_eq!(captures.len(), recorded.sessions as usize);
    assert_eq!(calls(&captures[0].decode()), named(&[("before", 40)]));
    let live: u64 = captures[1..]
        .iter()
        .flat_map(|c| calls(&c.decode()))
        .map(|(name, n)| {
            assert_eq!(name, "during");
            n
        })
        .sum();
    assert_eq!(live, 25);

    // Watched through TCP (what `tickscope top --tcp` does): every record once.
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let (attached_tx, attached) = mpsc::channel();
    let watcher = {
        let stop = std::sync::Arc::clone(&stop);
        let endpoint = attach::Endpoint::Tcp {
            addr: addr.to_string(),
            token: token.clone(),
        };
        std::thread::spawn(move || {
            let mut windows = Vec::new();
            attach::watch_from(
                &endpoint,
                Duration::from_millis(10),
                &stop,
                &mut |_| attached_tx.send(()).unwrap(),
                &mut |capture| windows.push(calls(&capture.decode())),
            )
            .map(|()| windows)
        })
    };
    attached.recv().unwrap();
    for _ in 0..5 {
        work(6, "during");
        std::thread::sleep(Duration::from_millis(3));
    }
    stop.store(true, std::sync::atomic::Ordering::Release);
    let windows = watcher.join().unwrap().unwrap();
    let watched: u64 = windows.iter().flatten().map(|(_, calls)| calls).sum();
    assert_eq!(watched, 30);

    // A wrong token: one line, no file.
    let never = AtomicBool::new(false);
    let wrong = scratch("wrong.tscope");
    let e = attach::record_from(
        &attach::Endpoint::Tcp {
            addr: addr.to_string(),
            token: "0".repeat(32),
        },
        Duration::ZERO,
        &wrong,
        &never,
        &mut |_| {},
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "the program says: wrong token");
    assert!(!wrong.exists());
    // The token cut short, or longer, is as wrong.
    for bad in [&token[..31], &format!("{token}0")] {
        let e = attach::record_from(
            &attach::Endpoint::Tcp {
                addr: addr.to_string(),
                token: bad.to_owned(),
            },
            Duration::ZERO,
            &wrong,
            &never,
            &mut |_| {},
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "the program says: wrong token");
    }
    // No token: a request first.
    let mut request = Vec::new();
    let info = Request::new(Command::Info);
    protocol::write_chunk(&mut request, REQUEST, MESSAGE_VERSION, &info.encode()).unwrap();
    let tcp_exchange = |bytes: &[u8]| {
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        stream.write_all(bytes).unwrap();
        stream.shutdown(std::net::Shutdown::Write).unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).unwrap();
        answer
    };
    assert_eq!(
        error_of(&tcp_exchange(&request)),
        "token required: a TCP client sends the token the program printed first (type 69), \
         not type 64"
    );
    // Nothing at all, and garbage.
    assert_eq!(tcp_exchange(b""), b"");
    assert_eq!(
        error_of(&tcp_exchange(b"GET / HTTP/1.1\r\n\r\n")),
        "bad request: not a tickscope attach message (magic 0x20544547, not 0x50435354)"
    );
    // The right token, then the request: the program's info.
    let mut both = Vec::new();
    protocol::write_chunk(
        &mut both,
        protocol::TOKEN,
        MESSAGE_VERSION,
        token.as_bytes(),
    )
    .unwrap();
    both.extend_from_slice(&request);
    let answer = tcp_exchange(&both);
    let (message, used) = protocol::parse(&answer).unwrap().unwrap();
    assert_eq!((message.kind, used), (INFO, answer.len()));
    assert_eq!(
        Info::decode(&message.content).unwrap().pid,
        std::process::id()
    );

    // The program's own session is exact.
    work(5, "after");
    prof.stop();
    assert_eq!(prof.listen_addr(), None);
    assert!(!entry.exists());
    assert!(
        attach::list()
            .unwrap()
            .iter()
            .all(|p| p.info.as_ref().map_or(true, |i| i.pid != pid))
    );
    assert_eq!(
        calls(&prof.trace()),
        named(&[("after", 5), ("before", 40), ("during", 55)])
    );
}

#[test]
fn tcp_is_loopback_only_unless_widened() {
    let _serial = serial();
    for wide in ["0.0.0.0:0", "[::]:0"] {
        let prof = Profiler::builder()
            .current_thread()
            .listen(false)
            .listen_tcp(wide)
            .start();
        assert_eq!(prof.listen_addr(), None, "{wide}");
        assert_eq!(prof.listen_token(), None, "{wide}");
        prof.stop();
    }
    let prof = Profiler::builder()
        .flight_recorder(1 << 20)
        .listen(false)
        .listen_tcp_any("0.0.0.0:0")
        .start();
    let addr = prof.listen_addr().unwrap();
    assert!(addr.ip().is_unspecified(), "{addr}");
    work(3, "before");
    let out = scratch("any.tscope");
    let recorded = attach::record_from(
        &attach::Endpoint::Tcp {
            addr: format!("127.0.0.1:{}", addr.port()),
            token: prof.listen_token().unwrap(),
        },
        Duration::ZERO,
        &out,
        &AtomicBool::new(false),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(recorded.sessions, 1);
    let captures = Capture::read_all(&out).unwrap();
    assert_eq!(calls(&captures[0].decode()), named(&[("before", 3)]));
    prof.stop();
    assert_eq!(calls(&prof.trace()), named(&[("before", 3)]));
}
