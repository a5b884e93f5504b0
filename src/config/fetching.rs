//! The `[daemon]` keys that bound units' fetches ([`super::Fetching`]) and the daemon's sync
//! slots: counts of at least one, timeouts longer than zero.

use super::raw::HumanDuration;
use toml::Spanned;

use super::resolve::Resolver;
use super::{Fetching, Result};

/// The longest timeout libgit2 takes: it counts milliseconds in a C `int`.
const MAX_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

impl Resolver<'_> {
    /// `max_fetches_per_host`, `fetch_connect_timeout` and `fetch_idle_timeout`, each
    /// defaulted when absent.
    ///
    /// Errors: [`super::Error::Invalid`] at the value: a count of 0, a timeout of zero or
    /// over a day.
    pub(super) fn fetching(
        &self,
        max_per_host: Option<Spanned<usize>>,
        connect: Option<Spanned<HumanDuration>>,
        idle: Option<Spanned<HumanDuration>>,
    ) -> Result<Fetching> {
        let default = Fetching::default();
        Ok(Fetching {
            max_per_host: self
                .at_least_one(max_per_host, "daemon.max_fetches_per_host")?
                .unwrap_or(default.max_per_host),
            connect_timeout: self.timeout(connect, "daemon.fetch_connect_timeout")?.unwrap_or(default.connect_timeout),
            idle_timeout: self.timeout(idle, "daemon.fetch_idle_timeout")?.unwrap_or(default.idle_timeout),
        })
    }

    /// A count that must be at least 1.
    pub(super) fn at_least_one(&self, raw: Option<Spanned<usize>>, key: &str) -> Result<Option<usize>> {
        match raw {
            Some(value) if *value.get_ref() == 0 => Err(self.invalid(Some(value.span()), key, "must be at least 1")),
            other => Ok(other.map(Spanned::into_inner)),
        }
    }

    /// A timeout longer than zero and at most a day.
    fn timeout(&self, raw: Option<Spanned<HumanDuration>>, key: &str) -> Result<Option<std::time::Duration>> {
        match raw {
            Some(value) if value.get_ref().0 > MAX_TIMEOUT => {
                Err(self.invalid(Some(value.span()), key, "must be at most 24h"))
            }
            other => self.duration(other, key),
        }
    }
}
