//! A new revision waiting for the units it depends on ([`Phase::Blocked`]): no permit held,
//! nothing fetched while it waits. A change of a dependency's record runs the kept trigger
//! again — a fresh fetch (the branch may have moved meanwhile) and the gate once more. A
//! trigger from the channel does the same at once, coalesced with the kept one. Drift is
//! noted, and a due self-heal runs (it re-applies the revision last applied, which its
//! dependencies were ready for), the kept trigger queued behind it. Polls and resyncs are not
//! listened to: the change of a dependency's record is the signal, never a timer.

use super::{Action, Event, Job, Phase, State, Trigger, TriggerKind, begin_sync, keep, start};

/// An event while blocked, holding `kept`.
pub(super) fn blocked(state: &mut State, kept: Trigger, event: Event, actions: &mut Vec<Action>) -> Phase {
    match event {
        Event::DependencyChanged => begin_sync(state, Job::new(kept, None, false), actions),
        Event::Trigger(Some(t)) => {
            // Merged: the more urgent says what runs (a push probes), at the later instant.
            let mut trigger = kept;
            trigger.merge(t);
            start(state, Job::new(trigger, None, false), actions)
        }
        Event::Drift(events) => {
            actions.push(Action::NoteDrift(events));
            Phase::Blocked(kept)
        }
        Event::HealDue(objects, at) if !objects.is_empty() => {
            keep(&mut state.queued, kept);
            let trigger = Trigger::new(TriggerKind::Drift, at);
            start(state, Job::new(trigger, Some(objects), false), actions)
        }
        _ => Phase::Blocked(kept),
    }
}
