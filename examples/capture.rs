//! Records a small workload on two threads and writes its capture, `run.tscope`, into the
//! current directory (or the directory given as the first argument); then reads it back and
//! prints the table decoded from the file, which is the table the session prints.
//!
//! `cargo run --release --example capture [OUT_DIR]`, then for instance
//! `tickscope table run.tscope` or `tickscope convert run.tscope -o run.json`.

use std::path::Path;

use tickscope::{Capture, Profiler, scope};

fn checksum(data: &[u8]) -> u64 {
    let _g = scope!("checksum", bytes = data.len());
    data.iter()
        .fold(0u64, |h, &b| h.rotate_left(5) ^ u64::from(b))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out_dir = std::env::args().nth(1).unwrap_or_else(|| ".".to_owned());
    let prof = Profiler::start();
    let worker = std::thread::Builder::new()
        .name("worker".into())
        .spawn(|| {
            let _g = scope!("worker");
            (0..200)
                .map(|i| checksum(&vec![i as u8; 1024]))
                .sum::<u64>()
        })?;
    {
        let _g = scope!("main");
        for i in 0..100u32 {
            checksum(&i.to_le_bytes().repeat(64));
        }
    }
    worker.join().expect("worker panicked");
    prof.stop();

    let path = Path::new(&out_dir).join("run.tscope");
    prof.write_capture(&path)?;
    let bytes = std::fs::metadata(&path)?.len();
    let capture = Capture::read(&path)?;
    println!(
        "wrote {} ({bytes} bytes, {} records, {:.1} bytes per record)",
        path.display(),
        capture.record_count(),
        bytes as f64 / capture.record_count() as f64
    );
    let from_file = tickscope::table::Table::new(std::sync::Arc::new(capture.decode()));
    assert_eq!(from_file.to_string(), prof.table().to_string());
    print!("{from_file}");
    Ok(())
}
