//! CLUSTER MIGRATION's tasks ([`super::migration`]): what STATUS
//! reports and CANCEL stops, kept apart from the moving itself so that
//! the replication state can hold them.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64};

use parking_lot::Mutex;

use crate::util::now_ms;

/// Finished tasks STATUS keeps (the oldest go first).
const FINISHED_KEPT: usize = 32;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Import,
    Export,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Connecting,
    Copying,
    Streaming,
    Switching,
    Completed,
    Failed,
    Cancelled,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Connecting => "connecting",
            Phase::Copying => "copying",
            Phase::Streaming => "streaming",
            Phase::Switching => "switching",
            Phase::Completed => "completed",
            Phase::Failed => "failed",
            Phase::Cancelled => "cancelled",
        }
    }

    pub(super) fn finished(self) -> bool {
        matches!(self, Phase::Completed | Phase::Failed | Phase::Cancelled)
    }
}

/// One slot move, as this node sees it.
pub struct Task {
    pub id: String,
    pub operation: Operation,
    /// Sorted, each once.
    pub slots: Vec<u16>,
    pub source: String,
    pub dest: String,
    /// The phase and the last error.
    pub(super) phase: Mutex<(Phase, String)>,
    pub(super) cancel: AtomicBool,
    /// On the target: the client id of the source's link (0: none yet).
    pub(super) link_client: AtomicU64,
    /// Keys copied (on the source).
    pub keys: AtomicU64,
    pub created_ms: u64,
    pub ended_ms: AtomicU64,
    /// How long the source held its clients for the switch.
    pub pause_ms: AtomicU64,
    /// The backlog pin of an export (the stream it still has to send).
    pub(super) pin: u64,
}

impl Task {
    pub(super) fn new(
        id: String,
        operation: Operation,
        slots: Vec<u16>,
        source: String,
        dest: String,
    ) -> Task {
        static PINS: AtomicU64 = AtomicU64::new(0);
        Task {
            id,
            operation,
            slots,
            source,
            dest,
            phase: Mutex::new((Phase::Connecting, String::new())),
            cancel: AtomicBool::new(false),
            link_client: AtomicU64::new(0),
            keys: AtomicU64::new(0),
            created_ms: now_ms(),
            ended_ms: AtomicU64::new(0),
            pause_ms: AtomicU64::new(0),
            // Client ids count up from 1: these never meet one.
            pin: u64::MAX - PINS.fetch_add(1, Relaxed),
        }
    }

    pub fn phase(&self) -> (Phase, String) {
        self.phase.lock().clone()
    }

    pub(super) fn set_phase(&self, phase: Phase) {
        let mut current = self.phase.lock();
        if !current.0.finished() {
            current.0 = phase;
        }
    }

    /// Ends the task (once): completed, or failed with `why`.
    pub(super) fn end(&self, outcome: Result<(), String>) {
        let mut current = self.phase.lock();
        if current.0.finished() {
            return;
        }
        *current = match outcome {
            Ok(()) => (Phase::Completed, String::new()),
            Err(_) if self.cancel.load(Relaxed) => (Phase::Cancelled, "cancelled".into()),
            Err(why) => (Phase::Failed, why),
        };
        self.ended_ms.store(now_ms(), Relaxed);
    }

    pub(super) fn cancelled(&self) -> Result<(), String> {
        match self.cancel.load(Relaxed) {
            true => Err("cancelled".into()),
            false => Ok(()),
        }
    }

    /// The slots as `first-last` ranges, space separated.
    pub fn ranges(&self) -> String {
        let mut out = Vec::new();
        for (first, last) in ranges(&self.slots) {
            out.push(match first == last {
                true => first.to_string(),
                false => format!("{first}-{last}"),
            });
        }
        out.join(" ")
    }
}

/// Runs of consecutive slots in sorted `slots`, as (first, last).
pub(super) fn ranges(slots: &[u16]) -> Vec<(u16, u16)> {
    let mut out: Vec<(u16, u16)> = Vec::new();
    for &slot in slots {
        match out.last_mut() {
            Some((_, last)) if *last + 1 == slot => *last = slot,
            _ => out.push((slot, slot)),
        }
    }
    out
}

/// This node's tasks: those running and the last finished ones.
#[derive(Default)]
pub struct Tasks {
    list: Mutex<Vec<Arc<Task>>>,
}

impl Tasks {
    /// Notes `task` unless a running task moves one of its slots.
    pub(super) fn start(&self, task: Task) -> Result<Arc<Task>, String> {
        let mut list = self.list.lock();
        for other in list.iter().filter(|t| !t.phase().0.finished()) {
            if let Some(slot) = task
                .slots
                .iter()
                .find(|s| other.slots.binary_search(s).is_ok())
            {
                return Err(format!(
                    "ERR Slot {slot} is already being moved by task {}",
                    other.id
                ));
            }
        }
        let finished = list.iter().filter(|t| t.phase().0.finished()).count();
        if finished >= FINISHED_KEPT
            && let Some(oldest) = list.iter().position(|t| t.phase().0.finished())
        {
            list.remove(oldest);
        }
        let task = Arc::new(task);
        list.push(task.clone());
        Ok(task)
    }

    pub(super) fn find(&self, id: &str) -> Option<Arc<Task>> {
        self.list.lock().iter().find(|t| t.id == id).cloned()
    }

    /// Every task noted, oldest first.
    pub fn all(&self) -> Vec<Arc<Task>> {
        self.list.lock().clone()
    }

    /// CANCEL: asks the running tasks named (`id`, or all) to stop;
    /// answers how many.
    pub fn cancel(&self, id: Option<&str>) -> usize {
        let list = self.list.lock();
        let running = list.iter().filter(|t| !t.phase().0.finished());
        let mut count = 0;
        for task in running.filter(|t| id.is_none_or(|id| t.id == id)) {
            task.cancel.store(true, Relaxed);
            count += 1;
        }
        count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_read_as_ranges() {
        assert_eq!(ranges(&[1, 2, 3, 7, 9, 10]), vec![(1, 3), (7, 7), (9, 10)]);
        assert_eq!(ranges(&[]), vec![]);
    }
}
