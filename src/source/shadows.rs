//! Whether a short reference is shadowed by another ref, read once per fetch of a mirror for
//! all the units that follow it ([`super::shared::Shared::shadowed`], asked by
//! [`super::probe`]).

/// Short references → whether a ref `git rev-parse` takes before the branch names them, as read
/// at one fetch count and generation of a mirror: the refs change only with those.
#[derive(Default)]
pub(super) struct Shadows {
    at: (u64, u64),
    names: std::collections::HashMap<String, bool>,
}

impl Shadows {
    /// The answer for `name` read at `at`, else `read`'s, kept for `at`.
    pub(super) fn answer(
        shadows: &std::sync::Mutex<Self>,
        at: (u64, u64),
        name: &str,
        read: impl FnOnce() -> bool,
    ) -> bool {
        {
            let shadows = shadows.lock().expect("mirror shadows lock");
            if let Some(known) = shadows.names.get(name).filter(|_| shadows.at == at) {
                return *known;
            }
        }
        let value = read();
        let mut shadows = shadows.lock().expect("mirror shadows lock");
        if shadows.at != at {
            *shadows = Shadows { at, names: Default::default() };
        }
        shadows.names.insert(name.to_owned(), value);
        value
    }
}
