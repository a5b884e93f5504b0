//! The sync slots shared by every unit task (`[daemon] max_concurrent_syncs`), handed out by
//! priority: a unit that has not synced yet in this process first, then a sync something asked
//! for (a push that changed nothing under the unit's path, a poll, a webhook, a retry, drift),
//! then a periodic resync; first come, first served within each class. A resync therefore never
//! starts while a unit waits for its first sync: with thousands of units, the first syncs of the
//! last ones are not queued behind the resyncs of the first (with one fair FIFO queue, 688 of
//! 5,000 units resynced while the last first syncs still waited). Pushes that changed the
//! unit's path take the push lane, not a slot (`daemon::unit::sync`). No fetch holds a slot: a
//! sync asks for one once its fetch found a revision to apply, and the fetch holds a permit of
//! its remote host ([`FetchHosts`]).
//!
//! A slot is held as a [`Slot`]; dropping it hands it to the next waiter at once. A waiter that
//! stops waiting (its future dropped) gives up its place; a slot already handed to it goes on
//! to the next.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

/// Which queue a unit waits in for a slot, served in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SlotClass {
    /// The unit has not synced in this process yet.
    First = 0,
    /// A sync something asked for: a poll, a webhook or push (one that did not take the lane),
    /// SIGHUP, a retry, a self-heal.
    Triggered = 1,
    /// The periodic full resync.
    Resync = 2,
}

/// The slots and their waiters.
#[derive(Debug)]
pub struct Slots {
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Slots no one holds. Positive only while no live waiter is queued.
    free: usize,
    /// Waiters by class ([`SlotClass`] as index), oldest first.
    queues: [VecDeque<oneshot::Sender<Slot>>; 3],
}

impl Inner {
    /// The oldest waiter of the first non-empty class (possibly one that stopped waiting).
    fn next_waiter(&mut self) -> Option<oneshot::Sender<Slot>> {
        self.queues.iter_mut().find_map(VecDeque::pop_front)
    }
}

/// One slot, held until dropped.
#[derive(Debug)]
pub struct Slot {
    /// `None` once handed back without release (given to a waiter that was gone).
    slots: Option<Arc<Slots>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(slots) = self.slots.take() {
            Slots::release(&slots);
        }
    }
}

impl Slots {
    /// `n` slots, none held. `n` is at least 1 (config validation).
    pub fn new(n: usize) -> Arc<Self> {
        Arc::new(Self { inner: Mutex::new(Inner { free: n, queues: Default::default() }) })
    }

    /// Waits for a slot in `class`'s queue: at once when one is free and no unit of this
    /// class or a higher one waits; else after those ahead. `None` only if the slots are gone.
    /// Cancel-safe: dropping the future gives up the place (and a slot handed to it meanwhile
    /// goes to the next waiter).
    pub async fn acquire(self: Arc<Self>, class: SlotClass) -> Option<Slot> {
        let waiter = {
            let mut inner = self.inner.lock().expect("slots lock");
            if inner.free > 0 {
                // Waiters that stopped waiting leave their senders behind; a free slot means
                // every queued one is such.
                inner.queues.iter_mut().for_each(|q| q.retain(|tx| !tx.is_closed()));
            }
            let ahead = inner.queues[..=class as usize].iter().any(|q| !q.is_empty());
            if inner.free > 0 && !ahead {
                inner.free -= 1;
                drop(inner);
                return Some(Slot { slots: Some(self) });
            }
            let (tx, rx) = oneshot::channel();
            inner.queues[class as usize].push_back(tx);
            rx
        };
        waiter.await.ok()
    }

    /// Hands a released slot to the next live waiter, else frees it.
    fn release(this: &Arc<Self>) {
        loop {
            let next = {
                let mut inner = this.inner.lock().expect("slots lock");
                match inner.next_waiter() {
                    Some(tx) => tx,
                    None => {
                        inner.free += 1;
                        return;
                    }
                }
            };
            // Sent outside the lock: a slot dropped unreceived releases itself.
            match next.send(Slot { slots: Some(this.clone()) }) {
                Ok(()) => return,
                Err(mut slot) => {
                    // That waiter was gone: try the next one.
                    slot.slots = None;
                }
            }
        }
    }

    /// Units waiting, by class (waiters that stopped waiting may be counted until the next
    /// acquire purges them).
    #[cfg(test)]
    pub fn waiting(&self) -> [usize; 3] {
        let inner = self.inner.lock().expect("slots lock");
        [inner.queues[0].len(), inner.queues[1].len(), inner.queues[2].len()]
    }
}

/// The fetch permits of each remote host (`[daemon] max_fetches_per_host`): a unit's fetch
/// holds one of its source's host while it runs, and holds no sync slot, so a host that hangs
/// or trickles fills only its own share and never delays a unit of another source. A local
/// repository's fetch takes none.
#[derive(Debug)]
pub struct FetchHosts {
    per_host: usize,
    hosts: Mutex<std::collections::HashMap<String, Arc<tokio::sync::Semaphore>>>,
}

impl FetchHosts {
    /// Hosts of `per_host` permits each (at least 1: config validation), made as first asked for.
    pub fn new(per_host: usize) -> Arc<Self> {
        Arc::new(Self { per_host: per_host.max(1), hosts: Mutex::default() })
    }

    /// The permits of `host` (as [`crate::source::remote_host`] names it), shared by every
    /// unit fetching from it.
    pub fn of(&self, host: &str) -> Arc<tokio::sync::Semaphore> {
        let mut hosts = self.hosts.lock().expect("fetch hosts lock");
        hosts.entry(host.to_owned()).or_insert_with(|| Arc::new(tokio::sync::Semaphore::new(self.per_host))).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    async fn settle() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    /// Spawns a waiter of `class` that pushes its name to `order` once it holds a slot, then
    /// hands the slot back.
    fn waiter(
        slots: &Arc<Slots>,
        class: SlotClass,
        name: &'static str,
        order: &Arc<Mutex<Vec<&'static str>>>,
    ) -> tokio::task::JoinHandle<()> {
        let (slots, order) = (slots.clone(), order.clone());
        tokio::spawn(async move {
            let _slot = slots.acquire(class).await.expect("slot");
            order.lock().unwrap().push(name);
        })
    }

    #[tokio::test]
    async fn first_syncs_go_before_triggered_ones_and_resyncs_last_each_in_arrival_order() {
        let slots = Slots::new(1);
        let order = Arc::new(Mutex::new(Vec::new()));
        let holder = slots.clone().acquire(SlotClass::Triggered).await.unwrap();
        let mut tasks = Vec::new();
        for (class, name) in [
            (SlotClass::Resync, "resync-a"),
            (SlotClass::Triggered, "poll-a"),
            (SlotClass::First, "first-a"),
            (SlotClass::Resync, "resync-b"),
            (SlotClass::First, "first-b"),
        ] {
            tasks.push(waiter(&slots, class, name, &order));
            settle().await;
        }
        assert_eq!(slots.waiting(), [2, 1, 2]);
        assert!(order.lock().unwrap().is_empty(), "none has a slot while it is held");
        drop(holder);
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), ["first-a", "first-b", "poll-a", "resync-a", "resync-b"]);
    }

    #[tokio::test]
    async fn a_free_slot_goes_at_once_unless_an_equal_or_higher_class_waits() {
        let slots = Slots::new(2);
        let a = slots.clone().acquire(SlotClass::Resync).await.unwrap();
        let _b = slots.clone().acquire(SlotClass::Resync).await.unwrap();
        // Full: a first sync waits; once a slot frees it goes to the first sync, not to a
        // resync that asked before the slot freed.
        let order = Arc::new(Mutex::new(Vec::new()));
        let resync = waiter(&slots, SlotClass::Resync, "resync", &order);
        settle().await;
        let first = waiter(&slots, SlotClass::First, "first", &order);
        settle().await;
        assert_eq!(slots.waiting(), [1, 0, 1]);
        drop(a);
        first.await.unwrap();
        resync.await.unwrap();
        assert_eq!(*order.lock().unwrap(), ["first", "resync"]);
        assert_eq!(slots.waiting(), [0, 0, 0]);
    }

    #[tokio::test]
    async fn a_host_that_holds_all_its_fetch_permits_leaves_other_hosts_theirs() {
        let hosts = FetchHosts::new(2);
        let hung = hosts.of("hung:80");
        let _held = (hung.clone().acquire_owned().await.unwrap(), hung.clone().acquire_owned().await.unwrap());
        assert!(hosts.of("hung:80").try_acquire().is_err(), "the hung host's share is full");
        assert!(hosts.of("healthy").try_acquire().is_ok(), "another host's fetch waited for the hung one");
    }

    #[tokio::test]
    async fn a_waiter_that_gave_up_loses_its_place_and_no_slot_is_lost() {
        let slots = Slots::new(1);
        let held = slots.clone().acquire(SlotClass::Triggered).await.unwrap();
        let gave_up = tokio::spawn(slots.clone().acquire(SlotClass::First));
        settle().await;
        gave_up.abort();
        settle().await;
        drop(held);
        // The slot is free again: the aborted waiter did not keep it.
        let again = tokio::time::timeout(Duration::from_secs(1), slots.clone().acquire(SlotClass::Resync)).await;
        assert!(again.is_ok_and(|s| s.is_some()), "the slot was lost to a waiter that gave up");
        assert_eq!(slots.waiting(), [0, 0, 0]);
    }
}
