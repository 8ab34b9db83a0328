//! `tickscope top --pid N`: a live table of a running program that listens, refreshed at
//! each window the program sends (every 0.5 s by default).

use std::collections::{BTreeSet, HashMap};
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use crate::{Context, Failure};

/// Show a live table of a running program, refreshed every 0.5 s
///
/// Of a program that listens (see `tickscope ps`): per name, calls per
/// second, average, p50, p99, self share and threads, over the last window or since the
/// attach. Keys: 1-7 sort by a column (again: reverse), `/` filter (Enter keeps, Esc clears),
/// `w` last window / since attach, `p` pause, `q` quit.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    target: crate::attach::Target,
    /// How often the table is refreshed: `500ms`, `1s` (at least 10 ms).
    #[arg(long, default_value = "500ms", value_parser = crate::attach::parse_duration)]
    interval: Duration,
}

/// The figures of one name over a span of time.
#[derive(Debug, Default, Clone)]
struct Figures {
    calls: u64,
    total_ns: u64,
    self_ns: u64,
    p50_ns: u64,
    p99_ns: u64,
    threads: usize,
}

/// Durations in buckets of 1/8 of an octave (about 9 % wide): percentiles since the attach
/// in fixed memory.
#[derive(Debug, Default, Clone)]
struct Histogram {
    buckets: Vec<u64>,
    count: u64,
}

impl Histogram {
    fn add(&mut self, ns: u64) {
        let bucket = bucket_of(ns);
        if self.buckets.len() <= bucket {
            self.buckets.resize(bucket + 1, 0);
        }
        self.buckets[bucket] += 1;
        self.count += 1;
    }

    /// The `q` quantile (0 to 1): the middle of its bucket.
    fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((self.count as f64 * q).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (bucket, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return middle_of(bucket);
            }
        }
        middle_of(self.buckets.len().saturating_sub(1))
    }
}

fn bucket_of(ns: u64) -> usize {
    if ns == 0 {
        0
    } else {
        ((ns as f64).log2() * 8.0).floor() as usize + 1
    }
}

fn middle_of(bucket: usize) -> u64 {
    if bucket == 0 {
        0
    } else {
        2f64.powf((bucket as f64 - 0.5) / 8.0).round() as u64
    }
}

/// A name's figures since the attach: sums, durations, and the threads that called it (by
/// process and thread id).
type Since = (Figures, Histogram, BTreeSet<(u32, u64)>);

/// What the table knows: the last window, and everything since the attach.
#[derive(Debug, Default)]
struct State {
    last: HashMap<&'static str, Figures>,
    last_ns: u64,
    since: HashMap<&'static str, Since>,
    since_ns: u64,
    windows: u64,
}

impl State {
    fn add(&mut self, capture: &tickscope::Capture) {
        let trace = capture.decode();
        let report = tickscope::report::Report::new(&trace);
        let mut threads: HashMap<&'static str, BTreeSet<(u32, u64)>> = HashMap::new();
        for thread in &trace.threads {
            for span in &thread.spans {
                let name = span.callsite.name();
                threads
                    .entry(name)
                    .or_default()
                    .insert((thread.process, thread.id));
                let ns = span
                    .end_ns
                    .saturating_sub(span.start_ns)
                    .saturating_sub(span.overhead_ns);
                self.since.entry(name).or_default().1.add(ns);
            }
        }
        self.last.clear();
        for row in report.rows() {
            let seen = threads.remove(row.name).unwrap_or_default();
            let figures = Figures {
                calls: row.calls,
                total_ns: row.total_ns,
                self_ns: row.self_ns,
                p50_ns: row.p50_ns,
                p99_ns: row.p99_ns,
                threads: seen.len(),
            };
            let since = self.since.entry(row.name).or_default();
            since.0.calls += row.calls;
            since.0.total_ns += row.total_ns;
            since.0.self_ns += row.self_ns;
            since.2.extend(seen);
            self.last.insert(row.name, figures);
        }
        self.last_ns = trace.end_ns.saturating_sub(trace.start_ns);
        self.since_ns += self.last_ns;
        self.windows += 1;
    }

    /// The rows of one view, unsorted: name, figures, and the span of time in ns.
    fn rows(&self, since: bool) -> (Vec<(&'static str, Figures)>, u64) {
        if !since {
            let rows = self.last.iter().map(|(&n, f)| (n, f.clone())).collect();
            return (rows, self.last_ns);
        }
        let rows = self
            .since
            .iter()
            .filter(|(_, (f, _, _))| f.calls > 0)
            .map(|(&name, (f, hist, threads))| {
                let figures = Figures {
                    p50_ns: hist.quantile(0.5),
                    p99_ns: hist.quantile(0.99),
                    threads: threads.len(),
                    ..f.clone()
                };
                (name, figures)
            })
            .collect();
        (rows, self.since_ns)
    }
}

/// The table's columns, as the keys 1 to 7 sort them.
const COLUMNS: [&str; 7] = ["NAME", "CALLS/S", "AVG", "P50", "P99", "SELF %", "THREADS"];

/// One row of text, and the numbers it sorts by.
struct Line {
    cells: [String; 7],
    keys: [f64; 7],
    name: &'static str,
}

fn lines(rows: Vec<(&'static str, Figures)>, span_ns: u64) -> Vec<Line> {
    let self_total: u64 = rows.iter().map(|(_, f)| f.self_ns).sum();
    let seconds = span_ns as f64 / 1e9;
    rows.into_iter()
        .map(|(name, f)| {
            let rate = if seconds > 0.0 {
                f.calls as f64 / seconds
            } else {
                0.0
            };
            let avg = f.total_ns.checked_div(f.calls).unwrap_or(0);
            let share = if self_total > 0 {
                f.self_ns as f64 * 100.0 / self_total as f64
            } else {
                0.0
            };
            let ns = tickscope::table::format_ns;
            Line {
                cells: [
                    name.to_owned(),
                    format!("{rate:.1}"),
                    ns(avg),
                    ns(f.p50_ns),
                    ns(f.p99_ns),
                    format!("{share:.1}"),
                    f.threads.to_string(),
                ],
                keys: [
                    0.0,
                    rate,
                    avg as f64,
                    f.p50_ns as f64,
                    f.p99_ns as f64,
                    share,
                    f.threads as f64,
                ],
                name,
            }
        })
        .collect()
}

/// What the connection's thread tells the screen.
enum Event {
    Attached(tickscope::attach::protocol::Info),
    Window(Box<tickscope::Capture>),
    Ended(Result<(), String>),
}

#[cfg(unix)]
pub(crate) fn run(_cx: &Context, args: Args) -> Result<ExitCode, Failure> {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;
    use std::sync::mpsc;

    let endpoint = args.target.endpoint()?;
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let connection = {
        let stop = Arc::clone(&stop);
        let interval = args.interval;
        std::thread::spawn(move || {
            let (info_tx, window_tx) = (tx.clone(), tx.clone());
            let result = tickscope::attach::watch_from(
                &endpoint,
                interval,
                &stop,
                &mut |info| {
                    let _ = info_tx.send(Event::Attached(info.clone()));
                },
                &mut |capture| {
                    let _ = window_tx.send(Event::Window(Box::new(capture)));
                },
            );
            let _ = tx.send(Event::Ended(result.map_err(|e| e.to_string())));
        })
    };
    // Nothing is drawn before the program answers: a program that is not there is an error
    // on a terminal left as it was.
    let info = match rx.recv() {
        Ok(Event::Attached(info)) => info,
        Ok(Event::Ended(Err(e))) => return Err(Failure(e)),
        _ => return Err(Failure("the program ended the connection".to_owned())),
    };
    let result = match ratatui::try_init() {
        Ok(mut terminal) => {
            let result = screen(&mut terminal, &info, &rx);
            ratatui::restore();
            result
        }
        Err(e) => {
            // Raw mode may be half set: put the terminal back as it was.
            ratatui::restore();
            Err(Failure(format!("top needs a terminal: {e}")))
        }
    };
    stop.store(true, Ordering::Release);
    let _ = connection.join();
    result.map(|()| ExitCode::SUCCESS)
}

#[cfg(not(unix))]
pub(crate) fn run(_cx: &Context, _args: Args) -> Result<ExitCode, Failure> {
    Err(Failure(
        "attaching needs Unix domain sockets: not on this platform".to_owned(),
    ))
}

/// The screen's state besides the figures.
struct View {
    sort: usize,
    descending: bool,
    filter: String,
    typing: bool,
    paused: bool,
    since: bool,
}

#[cfg(unix)]
fn screen(
    terminal: &mut ratatui::DefaultTerminal,
    info: &tickscope::attach::protocol::Info,
    rx: &std::sync::mpsc::Receiver<Event>,
) -> Result<(), Failure> {
    use ratatui::crossterm::event::{self, KeyCode, KeyEventKind, KeyModifiers};

    let mut state = State::default();
    let mut view = View {
        sort: 1,
        descending: true,
        filter: String::new(),
        typing: false,
        paused: false,
        since: false,
    };
    let mut ended: Option<String> = None;
    let mut shown: Option<(Vec<Line>, u64)> = None;
    loop {
        while let Ok(message) = rx.try_recv() {
            match message {
                Event::Window(capture) => state.add(&capture),
                Event::Ended(result) => {
                    ended = Some(match result {
                        Ok(()) => "the program's session ended".to_owned(),
                        Err(e) => e,
                    });
                }
                Event::Attached(_) => {}
            }
        }
        if !view.paused || shown.is_none() {
            let (rows, span) = state.rows(view.since);
            shown = Some((lines(rows, span), span));
        }
        let (all, span) = shown.as_ref().map_or((&[][..], 0), |(l, s)| (&l[..], *s));
        let mut visible: Vec<&Line> = all
            .iter()
            .filter(|l| view.filter.is_empty() || l.name.contains(&view.filter))
            .collect();
        visible.sort_by(|a, b| {
            let order = if view.sort == 0 {
                a.name.cmp(b.name)
            } else {
                a.keys[view.sort].total_cmp(&b.keys[view.sort])
            };
            let order = if view.descending {
                order.reverse()
            } else {
                order
            };
            order.then_with(|| a.name.cmp(b.name))
        });
        let title = format!(
            " tickscope top: pid {} ({}, {}) | {} {:.1} s | sort {} {} | {} windows{}{} ",
            info.pid,
            info.program,
            info.mode.name(),
            if view.since {
                "since attach"
            } else {
                "last window"
            },
            span as f64 / 1e9,
            COLUMNS[view.sort],
            if view.descending { "desc" } else { "asc" },
            state.windows,
            if view.paused { " | PAUSED" } else { "" },
            ended
                .as_ref()
                .map(|e| format!(" | {e}"))
                .unwrap_or_default(),
        );
        let help = if view.typing {
            format!("filter: {}_   (Enter keeps, Esc clears)", view.filter)
        } else {
            format!(
                "1-7 sort (again: reverse)  / filter{}  w last/since  p pause  q quit",
                if view.filter.is_empty() {
                    String::new()
                } else {
                    format!(" [{}]", view.filter)
                }
            )
        };
        terminal
            .draw(|frame| draw(frame, &title, &help, &visible))
            .map_err(|e| Failure(format!("cannot draw: {e}")))?;
        if !event::poll(Duration::from_millis(100)).map_err(|e| Failure(e.to_string()))? {
            continue;
        }
        let event::Event::Key(key) = event::read().map_err(|e| Failure(e.to_string()))? else {
            continue;
        };
        if key.kind != KeyEventKind::Press {
            continue;
        }
        if view.typing {
            match key.code {
                KeyCode::Enter => view.typing = false,
                KeyCode::Esc => {
                    view.typing = false;
                    view.filter.clear();
                }
                KeyCode::Backspace => {
                    view.filter.pop();
                }
                KeyCode::Char(c) => view.filter.push(c),
                _ => {}
            }
            continue;
        }
        match key.code {
            KeyCode::Char('q') | KeyCode::Esc => return Ok(()),
            KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => return Ok(()),
            KeyCode::Char('p') | KeyCode::Char(' ') => view.paused = !view.paused,
            KeyCode::Char('w') | KeyCode::Tab => {
                view.since = !view.since;
                shown = None;
            }
            KeyCode::Char('/') => view.typing = true,
            KeyCode::Char(c @ '1'..='7') => {
                let column = c as usize - '1' as usize;
                if view.sort == column {
                    view.descending = !view.descending;
                } else {
                    view.sort = column;
                    view.descending = column != 0;
                }
            }
            _ => {}
        }
    }
}

#[cfg(unix)]
fn draw(frame: &mut ratatui::Frame<'_>, title: &str, help: &str, lines: &[&Line]) {
    use ratatui::layout::{Constraint, Layout};
    use ratatui::style::{Modifier, Style};
    use ratatui::widgets::{Block, Borders, Paragraph, Row, Table};

    let [body, footer] =
        Layout::vertical([Constraint::Min(3), Constraint::Length(1)]).areas(frame.area());
    let header = Row::new(COLUMNS).style(Style::default().add_modifier(Modifier::BOLD));
    let rows = lines.iter().map(|l| Row::new(l.cells.clone()));
    let widths = [
        Constraint::Min(16),
        Constraint::Length(12),
        Constraint::Length(11),
        Constraint::Length(11),
        Constraint::Length(11),
        Constraint::Length(7),
        Constraint::Length(8),
    ];
    let table = Table::new(rows, widths).header(header).block(
        Block::default()
            .borders(Borders::ALL)
            .title(title.to_owned()),
    );
    frame.render_widget(table, body);
    frame.render_widget(Paragraph::new(help.to_owned()), footer);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_quantiles_within_a_bucket() {
        let mut h = Histogram::default();
        for ns in 1..=1000u64 {
            h.add(ns * 100);
        }
        let within = |got: u64, want: f64| (got as f64 / want - 1.0).abs() < 0.05;
        assert!(within(h.quantile(0.5), 50_000.0), "{}", h.quantile(0.5));
        assert!(within(h.quantile(0.99), 99_000.0), "{}", h.quantile(0.99));
        assert_eq!(Histogram::default().quantile(0.5), 0);
        h.add(0);
        assert_eq!(h.count, 1001);
    }

    #[test]
    fn rows_of_a_window_and_since_the_attach() {
        let prof = tickscope::Profiler::builder().current_thread().start();
        for _ in 0..40 {
            let _outer = tickscope::scope!("outer");
            drop(tickscope::scope!("inner"));
        }
        prof.stop();
        let mut state = State::default();
        state.add(&prof.capture());
        state.add(&prof.capture());
        let (last, _) = state.rows(false);
        let (since, since_ns) = state.rows(true);
        let calls = |rows: &[(&str, Figures)], name: &str| {
            rows.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, f)| (f.calls, f.threads))
        };
        assert_eq!(calls(&last, "outer"), Some((40, 1)));
        assert_eq!(calls(&since, "inner"), Some((80, 1)));
        assert_eq!(since_ns, 2 * state.last_ns);
        let shown = lines(since, since_ns);
        let share: f64 = shown.iter().map(|l| l.keys[5]).sum();
        assert!((share - 100.0).abs() < 1e-6);
    }
}
