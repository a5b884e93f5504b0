//! What the driver listens to in each phase ([`Listen`], [`State::listen`]).

use super::{Busy, Doing, Phase, State, suspend};

/// Which event sources the driver listens to in a state (the effects it started are always
/// polled).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(in crate::daemon::unit) struct Listen {
    /// The trigger channel.
    pub(in crate::daemon::unit) triggers: bool,
    /// The poll tick.
    pub(in crate::daemon::unit) poll: bool,
    /// The resync tick.
    pub(in crate::daemon::unit) resync: bool,
    /// Drift events and due self-heals.
    pub(in crate::daemon::unit) drift: bool,
    /// The retry deadline.
    pub(in crate::daemon::unit) retry: Option<tokio::time::Instant>,
    /// The sync slot asked for.
    pub(in crate::daemon::unit) slot: bool,
    /// The end of the health wait.
    pub(in crate::daemon::unit) wait_end: bool,
    /// A change of a dependency's record (`depends_on`).
    pub(in crate::daemon::unit) depends: bool,
}

impl State {
    /// What the driver listens to now.
    pub(in crate::daemon::unit) fn listen(&self) -> Listen {
        let listen = self.listen_active();
        if self.suspended { suspend::listen(self, listen) } else { listen }
    }

    /// What the driver listens to now, unless suspended.
    fn listen_active(&self) -> Listen {
        let open = !self.stopping;
        let idle = Listen { triggers: open, poll: true, resync: true, drift: true, ..Listen::default() };
        match &self.phase {
            Phase::Idle => idle,
            Phase::BackingOff(at) => Listen { retry: Some(*at), ..idle },
            Phase::SlotWait(job) => match job.doing {
                Doing::Untouched(_) => Listen { triggers: open, slot: true, ..Listen::default() },
                Doing::RestSlot => Listen { triggers: open && job.fetching.is_none(), slot: true, ..Listen::default() },
                Doing::Slot | Doing::EarlySlot => Listen { slot: true, ..Listen::default() },
                _ => Listen::default(),
            },
            Phase::Applying(job) if matches!(job.doing, Doing::Rest) => {
                Listen { triggers: open && job.fetching.is_none() && job.next.is_none(), ..Listen::default() }
            }
            Phase::Health(h) if matches!(h.busy, Busy::Nothing) => {
                Listen { triggers: open, poll: true, drift: true, wait_end: true, ..Listen::default() }
            }
            Phase::Blocked(_) => Listen { triggers: open, drift: true, depends: true, ..Listen::default() },
            _ => Listen::default(),
        }
    }
}
