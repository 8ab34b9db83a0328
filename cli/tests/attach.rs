//! `tickscope ps` and `tickscope record --pid` against a child program that listens: this test
//! binary run again as the child (`child_program`, with `TICKSCOPE_ATTACH_TEST_CHILD` set),
//! which records the scopes the test asks for on its stdin and says what it did.
#![cfg(unix)]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;

use tickscope::Capture;
use tickscope::attach::Origin;
use tickscope::report::Report;
use tickscope::{Profiler, scope};

const CHILD: &str = "TICKSCOPE_ATTACH_TEST_CHILD";
/// Set for a child that listens on TCP too: `listen_tcp` of its value.
const CHILD_TCP: &str = "TICKSCOPE_ATTACH_TEST_TCP";
/// Set for a child that opens no Unix socket (`listen(false)`): with [`CHILD_TCP`], a program
/// that listens on TCP only.
const CHILD_NO_SOCKET: &str = "TICKSCOPE_ATTACH_TEST_NO_SOCKET";

/// The child: a flight recorder that listens; `NAME N` on stdin records N scopes `NAME`
/// (`before` or `during`) and answers `did NAME N`; `quit` stops and prints its own calls;
/// `exit` calls `std::process::exit` with the session running.
#[test]
fn child_program() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let mut builder = Profiler::builder()
        .flight_recorder(4 << 20)
        .listen(std::env::var_os(CHILD_NO_SOCKET).is_none());
    if let Ok(addr) = std::env::var(CHILD_TCP) {
        builder = builder.listen_tcp(addr);
    }
    let prof = builder.start();
    println!("\nready {}", std::process::id());
    for line in std::io::stdin().lock().lines() {
        let line = line.unwrap();
        if line == "exit" {
            // No destructor runs: the socket goes through `atexit`.
            std::process::exit(0);
        }
        let Some((name, n)) = line.split_once(' ') else {
            break;
        };
        let n: u64 = n.parse().unwrap();
        for _ in 0..n {
            match name {
                "before" => drop(scope!("handle_before")),
                _ => drop(scope!("handle_during")),
            }
        }
        println!("did {name} {n}");
    }
    prof.stop();
    let report = prof.report();
    let mut rows: Vec<_> = report.rows().iter().map(|r| (r.name, r.calls)).collect();
    rows.sort();
    println!("own {rows:?}");
}

/// The child, its stdin, and its stdout's lines.
struct Program {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    pid: u32,
}

impl Program {
    fn start(runtime: &Path) -> Self {
        Self::start_with(runtime, &mut Command::new(std::env::current_exe().unwrap()))
    }

    fn start_with(runtime: &Path, command: &mut Command) -> Self {
        let mut child = command
            .args([
                "--exact",
                "child_program",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD, "1")
            .env("XDG_RUNTIME_DIR", runtime)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let lines = lines_of(child.stdout.take().unwrap());
        let ready = wait_for(&lines, "ready ");
        let pid = ready["ready ".len()..].trim().parse().unwrap();
        Self {
            child,
            stdin,
            lines,
            pid,
        }
    }

    /// Asks for `n` scopes `name` and waits until they are recorded.
    fn work(&mut self, name: &str, n: u64) {
        writeln!(self.stdin, "{name} {n}").unwrap();
        wait_for(&self.lines, &format!("did {name} {n}"));
    }

    /// Stops the child and returns its own session's calls.
    fn quit(mut self) -> String {
        writeln!(self.stdin, "quit").unwrap();
        let own = wait_for(&self.lines, "own ");
        assert!(self.child.wait().unwrap().success());
        own
    }
}

fn lines_of(r: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(r).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// The first line from `lines` that holds `token`, from the token on.
fn wait_for(lines: &mpsc::Receiver<String>, token: &str) -> String {
    loop {
        let line = lines
            .recv()
            .unwrap_or_else(|_| panic!("the output ended before `{token}`"));
        if let Some(at) = line.find(token) {
            return line[at..].to_owned();
        }
    }
}

fn runtime_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tickscope-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::DirBuilder::new().mode(0o700).create(&dir).unwrap();
    dir
}

/// The first line of `tickscope ps`.
const PS_HEADER: &str =
    "     PID  PROGRAM                   STARTED (UTC)         MODE       WINDOW  TCP";

fn tickscope(runtime: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tickscope"));
    command.env("XDG_RUNTIME_DIR", runtime);
    command
}

/// The names and calls of a capture session, sorted.
fn calls(capture: &Capture) -> Vec<(String, u64)> {
    let trace = capture.decode();
    let mut rows: Vec<_> = Report::new(&trace)
        .rows()
        .iter()
        .map(|r| (r.name.to_owned(), r.calls))
        .collect();
    rows.sort();
    rows
}

fn named(rows: &[(&str, u64)]) -> Vec<(String, u64)> {
    rows.iter().map(|&(n, c)| (n.to_owned(), c)).collect()
}

#[test]
fn ps_and_record_pid_capture_what_the_program_did() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let runtime = runtime_dir("record");
    let mut program = Program::start(&runtime);
    program.work("before", 100);

    let ps = tickscope(&runtime).arg("ps").output().unwrap();
    assert!(ps.status.success());
    let ps = String::from_utf8(ps.stdout).unwrap();
    let lines: Vec<&str> = ps.lines().collect();
    assert_eq!(lines.len(), 2, "{ps}");
    let fields: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(fields[0], program.pid.to_string());
    assert!(fields[1].starts_with("attach-"), "{ps}");
    assert_eq!(lines[0], PS_HEADER);
    assert_eq!(fields[4..], ["flight", "4", "MiB", "-"], "{ps}");

    // A live window ended by Ctrl-C.
    let out = runtime.join("run.tscope");
    let mut record = tickscope(&runtime)
        .args([
            "record",
            "--pid",
            &program.pid.to_string(),
            "--duration",
            "10m",
            "-o",
        ])
        .arg(&out)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let said = lines_of(record.stderr.take().unwrap());
    let attached = wait_for(&said, "attached to pid");
    assert!(attached.ends_with("recording for 600.0 s (Ctrl-C ends it early)"));
    program.work("during", 250);
    let kill = Command::new("kill")
        .args(["-INT", &record.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    assert!(record.wait().unwrap().success());
    let summary = wait_for(&said, "run.tscope: ");
    assert!(
        summary.contains(" sessions, ") && summary.contains("window ended early by Ctrl-C"),
        "{summary}"
    );

    let bytes = std::fs::read(&out).unwrap();
    let origins: Vec<_> = tickscope::attach::origins(&bytes)
        .into_iter()
        .map(|o| o.map(|(origin, _)| origin))
        .collect();
    assert!(origins.len() >= 2, "{origins:?}");
    assert_eq!(origins[0], Some(Origin::Flight));
    assert!(origins[1..].iter().all(|&o| o == Some(Origin::Live)));
    let captures = Capture::read_all(&out).unwrap();
    assert_eq!(captures.len(), origins.len());
    assert_eq!(calls(&captures[0]), named(&[("handle_before", 100)]));
    let mut live = 0;
    for capture in &captures[1..] {
        for (name, n) in calls(capture) {
            assert_eq!(name, "handle_during");
            live += n;
        }
    }
    assert_eq!(live, 250);
    // An ordinary capture file for every command.
    let table = tickscope(&runtime).arg("table").arg(&out).output().unwrap();
    assert!(table.status.success());
    let table = String::from_utf8(table.stdout).unwrap();
    assert!(
        table.contains("handle_before") && table.contains("handle_during"),
        "{table}"
    );
    for command in ["info", "convert"] {
        let mut run = tickscope(&runtime);
        run.arg(command).arg(&out);
        if command == "convert" {
            run.arg("-o").arg(runtime.join("run.json"));
        }
        assert!(run.output().unwrap().status.success(), "{command}");
    }

    // `--duration 0`: the flight recorder's window alone, which holds both.
    let window = runtime.join("window.tscope");
    let zero = tickscope(&runtime)
        .args([
            "record",
            "--pid",
            &program.pid.to_string(),
            "--duration",
            "0",
            "-o",
        ])
        .arg(&window)
        .output()
        .unwrap();
    assert!(zero.status.success());
    let captures = Capture::read_all(&window).unwrap();
    assert_eq!(captures.len(), 1);
    assert_eq!(
        calls(&captures[0]),
        named(&[("handle_before", 100), ("handle_during", 250)])
    );

    // Merged, the two attaches' sessions keep their origins: which window, which attach.
    let merged = runtime.join("merged.tscope");
    let merge = tickscope(&runtime)
        .args(["merge", "-q"])
        .args([&out, &window])
        .arg("-o")
        .arg(&merged)
        .output()
        .unwrap();
    assert!(merge.status.success());
    let mut expected = tickscope::attach::origins(&std::fs::read(&out).unwrap());
    let second = tickscope::attach::origins(&std::fs::read(&window).unwrap());
    assert_eq!(second.len(), 1);
    let (first_at, second_at) = (expected[0].unwrap().1, second[0].unwrap().1);
    assert!(first_at < second_at, "{expected:?} {second:?}");
    assert!(
        expected
            .iter()
            .all(|o| o.is_some_and(|(_, at)| at == first_at))
    );
    expected.extend(second);
    let merged_origins = tickscope::attach::origins(&std::fs::read(&merged).unwrap());
    assert_eq!(merged_origins, expected);
    let back: Vec<_> = Capture::read_all(&merged)
        .unwrap()
        .iter()
        .map(Capture::origin)
        .collect();
    assert_eq!(back, expected);

    let socket = tickscope::attach::socket_path(program.pid);
    let own = program.quit();
    assert_eq!(
        own,
        r#"own [("handle_before", 100), ("handle_during", 250)]"#
    );
    // The socket went with the session; `ps` lists nothing.
    drop(socket);
    assert_eq!(
        std::fs::read_dir(runtime.join("tickscope"))
            .unwrap()
            .count(),
        0
    );
    let ps = tickscope(&runtime).arg("ps").output().unwrap();
    assert_eq!(String::from_utf8(ps.stdout).unwrap().lines().count(), 1);
    let _ = std::fs::remove_dir_all(&runtime);
}

#[test]
fn exit_removes_the_socket() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let runtime = runtime_dir("exit");
    let mut program = Program::start(&runtime);
    let socket = runtime.join(format!("tickscope/{}.sock", program.pid));
    assert!(socket.exists());
    writeln!(program.stdin, "exit").unwrap();
    assert!(program.child.wait().unwrap().success());
    assert!(!socket.exists());
    let _ = std::fs::remove_dir_all(&runtime);
}

#[test]
fn ps_removes_the_socket_of_a_killed_program_and_record_names_a_missing_one() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let runtime = runtime_dir("stale");
    let mut program = Program::start(&runtime);
    program.child.kill().unwrap();
    program.child.wait().unwrap();
    let socket = runtime.join(format!("tickscope/{}.sock", program.pid));
    assert!(socket.exists());
    let ps = tickscope(&runtime).arg("ps").output().unwrap();
    assert!(ps.status.success());
    assert_eq!(String::from_utf8(ps.stdout).unwrap().lines().count(), 1);
    assert!(!socket.exists());
    let record = tickscope(&runtime)
        .args(["record", "--pid", &program.pid.to_string(), "-o"])
        .arg(runtime.join("x.tscope"))
        .output()
        .unwrap();
    assert_eq!(record.status.code(), Some(2));
    assert_eq!(
        String::from_utf8(record.stderr).unwrap(),
        format!(
            "error: {}: no program listens there (is it running, with listen(true) or \
             TICKSCOPE_LISTEN=1, as this user?)\n",
            socket.display()
        )
    );
    let _ = std::fs::remove_dir_all(&runtime);
}

/// Another user's client is refused by the socket's permissions: the client runs as `nobody`
/// through `setpriv`, which needs root (skipped otherwise, or without `setpriv`).
#[test]
fn another_user_is_refused() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let root = std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
        .unwrap_or(false);
    let setpriv = Command::new("setpriv").arg("--version").output();
    if !root || !setpriv.is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: needs root and setpriv");
        return;
    }
    let runtime = runtime_dir("nobody");
    let mut program = Program::start(&runtime);
    program.work("before", 3);
    let socket = runtime.join(format!("tickscope/{}.sock", program.pid));
    let out = std::env::temp_dir().join(format!("nobody-{}.tscope", program.pid));
    let refused = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            env!("CARGO_BIN_EXE_tickscope"),
            "record",
            "--duration",
            "1s",
            "--socket",
        ])
        .arg(&socket)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8(refused.stderr).unwrap();
    if stderr.starts_with("setpriv:") {
        // `nobody` cannot run the binary where it was built (a private home): nothing to test.
        eprintln!("skipped: {stderr}");
    } else {
        assert_eq!(refused.status.code(), Some(2), "{stderr}");
        assert_eq!(
            stderr,
            format!(
                "error: {}: permission denied (the program runs as another user)\n",
                socket.display()
            )
        );
    }
    assert!(!out.exists());
    program.work("during", 4);
    assert_eq!(
        program.quit(),
        r#"own [("handle_before", 3), ("handle_during", 4)]"#
    );
    let _ = std::fs::remove_dir_all(&runtime);
}

#[test]
fn record_tcp_with_the_printed_token() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let runtime = runtime_dir("tcp");
    let mut program = Program::start_with(
        &runtime,
        Command::new(std::env::current_exe().unwrap())
            .env(CHILD_TCP, "127.0.0.1:0")
            .stderr(Stdio::piped()),
    );
    let stderr = lines_of(program.child.stderr.take().unwrap());
    let listening = wait_for(&stderr, "tickscope: listening on ");
    let (addr, token) = listening["tickscope: listening on ".len()..]
        .split_once(", token ")
        .unwrap();
    assert!(addr.starts_with("127.0.0.1:"), "{listening}");
    assert_eq!(token.len(), 32, "{listening}");
    program.work("before", 30);

    // `ps` lists the program once, with its address and not its token.
    let ps = tickscope(&runtime).arg("ps").output().unwrap();
    assert!(ps.status.success());
    let ps = String::from_utf8(ps.stdout).unwrap();
    let lines: Vec<&str> = ps.lines().collect();
    assert_eq!(lines.len(), 2, "{ps}");
    assert_eq!(lines[0], PS_HEADER);
    let fields: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(fields[0], program.pid.to_string());
    assert_eq!(fields[4..], ["flight", "4", "MiB", addr], "{ps}");
    assert!(!ps.contains(token), "{ps}");
    let entry = runtime.join(format!("tickscope/{}.tcp", program.pid));
    assert!(
        !std::fs::read(&entry)
            .unwrap()
            .windows(token.len())
            .any(|w| w == token.as_bytes())
    );

    let out = runtime.join("tcp.tscope");
    let record = tickscope(&runtime)
        .args([
            "record",
            "--tcp",
            addr,
            "--token",
            token,
            "--duration",
            "0",
            "-o",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        record.status.success(),
        "{}",
        String::from_utf8_lossy(&record.stderr)
    );
    let captures = Capture::read_all(&out).unwrap();
    assert_eq!(captures.len(), 1);
    assert_eq!(calls(&captures[0]), named(&[("handle_before", 30)]));

    // The token from the environment; a wrong one is one line, and no file.
    let wrong = runtime.join("wrong.tscope");
    let refused = tickscope(&runtime)
        .args(["record", "--tcp", addr, "--duration", "0", "-o"])
        .arg(&wrong)
        .env("TICKSCOPE_TOKEN", "0".repeat(32))
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert_eq!(
        String::from_utf8(refused.stderr).unwrap(),
        "error: the program says: wrong token\n"
    );
    assert!(!wrong.exists());

    program.work("during", 5);
    let own = program.quit();
    assert_eq!(own, r#"own [("handle_before", 30), ("handle_during", 5)]"#);
    // Its socket and its TCP entry went with the session.
    assert!(!entry.exists());
    assert_eq!(
        std::fs::read_dir(runtime.join("tickscope"))
            .unwrap()
            .count(),
        0
    );
    // The token was printed once: no other line names it.
    assert_eq!(
        stderr
            .iter()
            .filter(|l| l.contains(token) || l.contains("listening on"))
            .count(),
        0
    );
    let _ = std::fs::remove_dir_all(&runtime);
}

#[test]
fn a_wide_tcp_address_is_refused_in_one_line() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let runtime = runtime_dir("tcp-wide");
    let mut program = Program::start_with(
        &runtime,
        Command::new(std::env::current_exe().unwrap())
            .env(CHILD_TCP, "0.0.0.0:0")
            .stderr(Stdio::piped()),
    );
    let stderr = lines_of(program.child.stderr.take().unwrap());
    program.work("before", 2);
    let own = program.quit();
    assert_eq!(own, r#"own [("handle_before", 2)]"#);
    // The one line; the session ran (and listened on its socket) without TCP.
    let said: Vec<String> = stderr.iter().collect();
    assert_eq!(
        said,
        [
            "tickscope: not listening on TCP: 0.0.0.0:0 is not a loopback address \
             (listen_tcp_any lets clients of other machines in)"
        ]
    );
    let _ = std::fs::remove_dir_all(&runtime);
}

#[test]
fn ps_lists_a_program_that_listens_on_tcp_only() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let runtime = runtime_dir("tcp-only");
    let start = |runtime: &Path| {
        let mut program = Program::start_with(
            runtime,
            Command::new(std::env::current_exe().unwrap())
                .env(CHILD_TCP, "127.0.0.1:0")
                .env(CHILD_NO_SOCKET, "1")
                .stderr(Stdio::piped()),
        );
        let stderr = lines_of(program.child.stderr.take().unwrap());
        let listening = wait_for(&stderr, "tickscope: listening on ");
        let (addr, token) = listening["tickscope: listening on ".len()..]
            .split_once(", token ")
            .unwrap();
        (program, addr.to_owned(), token.to_owned())
    };
    let (mut program, addr, token) = start(&runtime);
    program.work("before", 7);
    let dir = runtime.join("tickscope");
    let pid = program.pid;
    let entries = |dir: &Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    };
    assert_eq!(entries(&dir), [format!("{pid}.tcp")]);

    let ps = tickscope(&runtime).arg("ps").output().unwrap();
    assert!(ps.status.success());
    let ps = String::from_utf8(ps.stdout).unwrap();
    let lines: Vec<&str> = ps.lines().collect();
    assert_eq!(lines.len(), 2, "{ps}");
    assert_eq!(lines[0], PS_HEADER);
    let fields: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(fields.len(), 8, "{ps}");
    assert_eq!(fields[0], pid.to_string());
    assert!(fields[1].starts_with("attach-"), "{ps}");
    assert_eq!(fields[4..], ["flight", "4", "MiB", &addr], "{ps}");
    assert!(!ps.contains(&token), "{ps}");
    // The address `ps` shows takes an attach, with the token.
    let out = runtime.join("tcp-only.tscope");
    let record = tickscope(&runtime)
        .args([
            "record",
            "--tcp",
            &addr,
            "--token",
            &token,
            "--duration",
            "0",
            "-o",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        record.status.success(),
        "{}",
        String::from_utf8_lossy(&record.stderr)
    );
    assert_eq!(
        calls(&Capture::read_all(&out).unwrap()[0]),
        named(&[("handle_before", 7)])
    );
    std::fs::remove_file(&out).unwrap();

    // Stopped: the entry is gone, `ps` lists nothing.
    assert_eq!(program.quit(), r#"own [("handle_before", 7)]"#);
    assert_eq!(entries(&dir), Vec::<String>::new());
    let ps = tickscope(&runtime).arg("ps").output().unwrap();
    assert_eq!(
        String::from_utf8(ps.stdout).unwrap(),
        format!("{PS_HEADER}\n")
    );

    // `exit` with the session running: the entry goes at exit.
    let (mut program, _, _) = start(&runtime);
    assert_eq!(entries(&dir), [format!("{}.tcp", program.pid)]);
    writeln!(program.stdin, "exit").unwrap();
    assert!(program.child.wait().unwrap().success());
    assert_eq!(entries(&dir), Vec::<String>::new());

    // Killed: the entry stays, until `ps` finds nothing listening there and removes it.
    let (mut program, _, _) = start(&runtime);
    let pid = program.pid;
    program.child.kill().unwrap();
    program.child.wait().unwrap();
    assert_eq!(entries(&dir), [format!("{pid}.tcp")]);
    let ps = tickscope(&runtime).arg("ps").output().unwrap();
    assert_eq!(
        String::from_utf8(ps.stdout).unwrap(),
        format!("{PS_HEADER}\n")
    );
    assert_eq!(entries(&dir), Vec::<String>::new());
    let _ = std::fs::remove_dir_all(&runtime);
}
