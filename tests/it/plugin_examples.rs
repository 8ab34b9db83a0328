//! The example plug-ins, built by these tests: examples/plugins/c_sampler (C, with the
//! system `cc`) and examples/plugins/sim_device (a Rust `cdylib` against the C ABI only,
//! with cargo), loaded into sessions and checked in the trace and the Chrome export.
#![cfg(all(feature = "enabled", feature = "plugins", target_os = "linux"))]

use std::path::{Path, PathBuf};
use std::process::Command;

use tickscope::{Profiler, scope};

use crate::common::cbuild;
use cbuild::ROOT;

/// A folder of this test's own (`test` names it) for what it builds: the tests run in
/// parallel, and each removes its folder when done.
fn out_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "tickscope-plugin-examples-{}-{test}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// examples/plugins/c_sampler built into `dir`.
fn c_sampler(dir: &Path) -> PathBuf {
    cbuild::shared_object(
        dir,
        "c_sampler",
        "examples/plugins/c_sampler/c_sampler.c",
        &["-O2", "-pthread"],
    )
}

/// examples/plugins/sim_device built with cargo (a target folder of its own).
fn sim_device() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| Path::new(ROOT).join("target"), PathBuf::from)
        .join("plugin-examples");
    let out = Command::new(env!("CARGO"))
        .args([
            "build",
            "--quiet",
            "-p",
            "tickscope-sim-device",
            "--manifest-path",
        ])
        .arg(format!("{ROOT}/Cargo.toml"))
        .arg("--target-dir")
        .arg(&target)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    target.join("debug/libtickscope_sim_device.so")
}

/// This process's user plus system CPU time and minor page faults, from /proc/self/stat.
fn proc_stat() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    let num = |i: usize| fields[i].parse::<u64>().unwrap();
    // After the command: state is field 3, minflt 10, utime 14, stime 15 (1-based, man 5 proc).
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    ((num(11) + num(12)) * (1_000_000_000 / hz), num(7))
}

/// Maps `len` bytes of fresh anonymous memory, writes a byte of each 4 KiB page (a page
/// fault each, as the pages are not backed yet), and unmaps them.
fn touch_fresh_pages(len: usize) {
    // SAFETY: an anonymous private mapping of `len` bytes that nothing else knows of; its
    // result is checked before use.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(base, libc::MAP_FAILED, "mmap of {len} bytes");
    for offset in (0..len).step_by(4096) {
        // SAFETY: `offset < len`, inside the mapping, which is readable and writable.
        unsafe { std::ptr::write_volatile(base.cast::<u8>().add(offset), 1) };
    }
    // SAFETY: the mapping made above, of `len` bytes, unmapped once; nothing points into it.
    assert_eq!(unsafe { libc::munmap(base, len) }, 0);
}

#[test]
fn c_sampler_records_procstat_samples_with_their_counters() {
    let dir = out_dir("c_sampler");
    let lib = c_sampler(&dir);
    let prof = Profiler::builder().current_thread().plugin(&lib).start();
    let (cpu0, faults0) = proc_stat();
    {
        let _g = scope!("work");
        // Page faults: touch 16 MiB of fresh memory; CPU: spin until /proc shows 20 ms more.
        // Mapped here, not allocated: malloc may hand out any size from memory other tests
        // of the process touched and freed (a 40 MiB block came from the heap's free top,
        // already faulted in: 2 faults for 16 MiB).
        touch_fresh_pages(16 << 20);
        while proc_stat().0 < cpu0 + 20_000_000 {
            std::hint::black_box((0..1000u64).sum::<u64>());
        }
    }
    let (cpu1, faults1) = proc_stat();
    prof.stop();
    assert_eq!(prof.errors(), []);
    let trace = prof.trace();
    let track = trace
        .threads
        .iter()
        .find(|t| t.name.as_deref() == Some("procstat"))
        .expect("a procstat track");
    assert_eq!(trace.processes[track.process as usize].name, "procstat");
    // At least the interval from the start's reading to the stop's, one sample a reading.
    assert!(!track.spans.is_empty());
    let mut sums = std::collections::HashMap::new();
    for (i, span) in track.spans.iter().enumerate() {
        assert_eq!(span.name(), "sample");
        assert_eq!(span.depth, 0);
        if let Some(next) = track.spans.get(i + 1) {
            assert_eq!(span.end_ns, next.start_ns, "samples follow each other");
        }
        let args = track.args_of(i as u32);
        let keys: Vec<&str> = args.iter().map(|a| a.key).collect();
        assert_eq!(
            keys,
            ["cpu_ns", "minor_faults", "major_faults", "ctx_switches"]
        );
        for a in args {
            let v: u64 = a.value.to_string().parse().unwrap();
            *sums.entry(a.key).or_insert(0u64) += v;
        }
    }
    // The samples span the window: they saw at least what was measured inside it.
    assert!(sums["cpu_ns"] >= cpu1 - cpu0, "{sums:?} vs {}", cpu1 - cpu0);
    assert!(
        sums["minor_faults"] >= faults1 - faults0,
        "{sums:?} vs {}",
        faults1 - faults0
    );
    assert!(
        faults1 - faults0 >= 4096,
        "16 MiB touched: {} faults",
        faults1 - faults0
    );
    println!(
        "c_sampler: {} samples, {sums:?} (measured by the test: {} ns, {} faults)",
        track.spans.len(),
        cpu1 - cpu0,
        faults1 - faults0
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// How far a kernel's start may lie outside the host scope that launched it, in µs: the error
/// of the two clocks' calibrations (each a pair of reads back to back) on a busy machine.
const ALIGNMENT_US: f64 = 250.0;

#[test]
fn sim_device_kernels_line_up_with_the_host_scopes_that_launched_them() {
    let lib = sim_device();
    // The same library tickscope loads (dlopen gives the one already loaded).
    // SAFETY: our own example plug-in; its initialisers do nothing.
    let library = unsafe { libloading::Library::new(&lib) }.unwrap();
    // SAFETY: the signature of `tsp_sim_device_launch` in its source.
    let launch = unsafe {
        library.get::<unsafe extern "C" fn(*const std::ffi::c_char, u64)>(b"tsp_sim_device_launch")
    }
    .unwrap();
    let prof = Profiler::builder().current_thread().plugin(&lib).start();
    for _ in 0..5 {
        let _g = scope!("launch");
        // SAFETY: a NUL-terminated name.
        unsafe { launch(c"gemm".as_ptr(), 5_000) };
        // The host waits for the kernel (5 µs) before the next launch: the device's queue
        // never delays a kernel past its launch.
        let t = std::time::Instant::now();
        while t.elapsed() < std::time::Duration::from_micros(20) {
            std::hint::spin_loop();
        }
    }
    prof.stop();
    assert_eq!(prof.errors(), []);
    let trace = prof.trace();
    let queue = trace
        .threads
        .iter()
        .find(|t| t.name.as_deref() == Some("queue 0"))
        .unwrap();
    assert_eq!(trace.processes[queue.process as usize].name, "sim-device");
    assert_eq!(queue.spans.len(), 5);
    assert!(
        queue
            .spans
            .iter()
            .all(|s| s.name() == "gemm" && s.duration_ns() >= 5_000)
    );

    // In the Chrome trace, each kernel starts within its launch scope, up to the calibration.
    let dir = out_dir("sim_device");
    let path = dir.join("sim_device.json");
    prof.write_chrome_trace(&path).unwrap();
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let spans = |name: &str| -> Vec<(f64, f64)> {
        json["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "X" && e["name"] == name)
            .map(|e| (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap()))
            .collect()
    };
    let (launches, kernels) = (spans("launch"), spans("gemm"));
    assert_eq!((launches.len(), kernels.len()), (5, 5));
    for ((l_ts, l_dur), (k_ts, _)) in launches.iter().zip(&kernels) {
        println!("launch at {l_ts:.3} µs for {l_dur:.3} µs: kernel at {k_ts:.3} µs");
        assert!(
            *k_ts >= l_ts - ALIGNMENT_US && *k_ts <= l_ts + l_dur + ALIGNMENT_US,
            "kernel at {k_ts} µs, launched in {l_ts}..{} µs",
            l_ts + l_dur
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
