//! The steps of a session ([`Profiler::step`]) and the windows a schedule hands over.

use std::cell::RefCell;

use crate::record::scope::ScopeGuard;
use crate::schedule::{Action, Callback, ScheduledWindow};

use super::Profiler;
#[cfg(doc)]
use super::ProfilerBuilder;

thread_local! {
    /// The `ProfilerStep#N` scope open on this thread, by session id.
    static STEP_SCOPES: RefCell<Vec<(u64, ScopeGuard)>> = const { RefCell::new(Vec::new()) };
}

impl Profiler {
    /// Ends step N and begins step N + 1 (the first step, 0, begins at start): marks the
    /// steps in the trace (a `ProfilerStep#N` scope on this thread while the session records)
    /// and, for a scheduled session ([`ProfilerBuilder::schedule`]), starts and stops recording as the
    /// schedule says, handing each window of active steps to [`ProfilerBuilder::on_trace_ready`] as it
    /// ends. Returns what that callback returned, or why a streaming session's file could
    /// not be opened when recording started again (the window then keeps a bounded amount
    /// in memory, as at [`ProfilerBuilder::start`]). Call it from
    /// one thread.
    pub fn step(&self) -> std::io::Result<()> {
        self.close_step_scope();
        let (done, ended, first) = {
            let mut state = self.inner.state();
            let done = state.steps.current;
            state.steps.current += 1;
            (done, state.steps.ended, state.steps.first_active)
        };
        let step = done + 1;
        let Some(schedule) = self.inner.config.schedule else {
            if self.is_running() {
                self.open_step_scope(step);
            }
            return Ok(());
        };
        if ended {
            return Ok(());
        }
        let (was, now) = (schedule.action(done), schedule.action(step));
        let running = self.is_running();
        let mut result = Ok(());
        let active = |a: Action| matches!(a, Action::Record | Action::RecordAndHand);
        match was {
            Action::RecordAndHand => {
                self.stop_window();
                if running {
                    result = self.hand(first..step);
                }
            }
            Action::Record if !active(now) => {
                self.stop_window();
                if running {
                    result = self.hand(first..step);
                }
            }
            // The warmup is thrown away: the next stop replaces it.
            Action::Warmup if now != Action::Warmup => self.stop_window(),
            _ => {}
        }
        if active(now) && was != Action::Record {
            self.inner.state().steps.first_active = step;
        }
        if now.records() {
            if !self.is_running() {
                result = result.and(self.try_restart(true));
            }
            self.open_step_scope(step);
        }
        result
    }

    /// Starts recording at the session's start: at once, or when its schedule says.
    /// `fallback` as in [`Profiler::try_restart`].
    pub(super) fn begin(&self, fallback: bool) -> std::io::Result<()> {
        match self.inner.config.schedule {
            None => self.try_restart(fallback),
            Some(schedule) if schedule.action(0).records() => {
                let result = self.try_restart(fallback);
                self.open_step_scope(0);
                result
            }
            Some(_) => Ok(()),
        }
    }

    /// Hands the window just stopped, of `steps`, to [`ProfilerBuilder::on_trace_ready`].
    pub(super) fn hand(&self, steps: std::ops::Range<u64>) -> std::io::Result<()> {
        let index = {
            let mut state = self.inner.state();
            state.steps.handed += 1;
            state.steps.handed - 1
        };
        match &self.inner.config.on_trace_ready {
            Some(Callback(callback)) => {
                callback(&ScheduledWindow::new(index, steps, self.capture()))
            }
            None => Ok(()),
        }
    }

    /// Opens this thread's `ProfilerStep#step` scope for this session.
    fn open_step_scope(&self, step: u64) {
        let guard = ScopeGuard::enter_dynamic(&format!("ProfilerStep#{step}"));
        let _ = STEP_SCOPES.try_with(|scopes| scopes.borrow_mut().push((self.inner.id, guard)));
    }

    /// Closes this thread's `ProfilerStep#N` scope of this session, if one is open.
    pub(super) fn close_step_scope(&self) {
        let id = self.inner.id;
        let guard = STEP_SCOPES.try_with(|scopes| {
            let mut scopes = scopes.borrow_mut();
            let at = scopes.iter().position(|(session, _)| *session == id)?;
            Some(scopes.remove(at).1)
        });
        // Dropped outside the borrow: closing a scope may call observers.
        drop(guard);
    }
}
