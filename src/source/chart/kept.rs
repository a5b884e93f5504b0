//! The last good answer of a chart repository's `index.yaml`, kept so that a repository that
//! is down does not fail every sync of a chart that has not changed: after each index read
//! that parses, the wanted chart's entries ([`Entry`]: only that chart's, as [`super::index`]
//! keeps them) are written to `<state_dir>/charts/index/<key>.json`, the key a SHA-256 of the
//! scope (a chart unit, or a trust domain's dependency cache: [`super::deps::trust_domain`]),
//! the repository URL and the chart, so no unit reads an answer another scope's credentials
//! fetched. While the repository cannot be reached ([`super::net::Failed::down`]) an answer at
//! most `[render] max_index_age` old stands in for the index; an older one is not used, and
//! answers past that age are removed when the next answer is written.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use sha2::Digest as _;

use super::index::Entry;

/// The kept answers of one scope.
#[derive(Debug, Clone)]
pub(super) struct Kept {
    /// `<state_dir>/charts/index`.
    dir: PathBuf,
    /// `units/<unit>` or `dependencies/<trust domain>`: part of each answer's key.
    scope: String,
    /// `[render] max_index_age`: the oldest answer used.
    max_age: Duration,
}

/// What one file holds.
#[derive(serde::Serialize, serde::Deserialize)]
struct Answer {
    /// The repository URL as configured (the key's input, checked on reading).
    repository: String,
    /// The chart (the key's input, checked on reading).
    chart: String,
    /// When the index was read: seconds since the Unix epoch.
    read_at: u64,
    /// The chart's entries in the index.
    entries: Vec<Entry>,
}

impl Kept {
    /// The kept answers of `scope` under `state_dir`, used up to `max_age` old. Nothing is
    /// created until an answer is stored.
    pub fn new(state_dir: &Path, scope: String, max_age: Duration) -> Self {
        Self { dir: state_dir.join("charts").join("index"), scope, max_age }
    }

    /// The file of `chart`'s answer from `repository`.
    fn file(&self, repository: &str, chart: &str) -> PathBuf {
        let key = sha2::Sha256::digest(format!("{}\n{repository}\n{chart}\n", self.scope));
        self.dir.join(format!("{}.json", hex::encode(key)))
    }

    /// Keeps `entries`, just read from `repository`'s index, as its last good answer for
    /// `chart`, and removes answers older than the age limit. Nothing is kept when the limit
    /// is zero. A failure is logged, not returned: the fetch it follows succeeded.
    pub fn store(&self, unit: &str, repository: &str, chart: &str, entries: &[Entry]) {
        if self.max_age.is_zero() {
            return;
        }
        let read_at = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_secs();
        let answer =
            Answer { repository: repository.to_owned(), chart: chart.to_owned(), read_at, entries: entries.to_vec() };
        let write = || -> std::io::Result<()> {
            std::fs::create_dir_all(&self.dir)?;
            std::fs::set_permissions(&self.dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))?;
            let mut file = tempfile::NamedTempFile::new_in(&self.dir)?;
            serde_json::to_writer(&mut file, &answer)?;
            file.persist(self.file(repository, chart)).map_err(|e| e.error)?;
            Ok(())
        };
        if let Err(e) = write() {
            let shown = crate::telemetry::url::redact(repository);
            tracing::warn!(unit, repository = %shown, error = %e, "cannot keep the chart repository's index answer");
        }
        self.collect();
    }

    /// The last good answer for `chart` from `repository` and its age, if one is kept and at
    /// most the age limit old.
    pub fn load(&self, repository: &str, chart: &str) -> Option<(Vec<Entry>, Duration)> {
        if self.max_age.is_zero() {
            return None;
        }
        let bytes = std::fs::read(self.file(repository, chart)).ok()?;
        let answer: Answer = serde_json::from_slice(&bytes).ok()?;
        if answer.repository != repository || answer.chart != chart {
            return None;
        }
        let read_at = SystemTime::UNIX_EPOCH + Duration::from_secs(answer.read_at);
        let age = SystemTime::now().duration_since(read_at).unwrap_or_default();
        (age <= self.max_age).then_some((answer.entries, age))
    }

    /// Removes the answers (and stray temporary files) of every scope last written longer
    /// ago than the age limit: none of them can be used any more.
    fn collect(&self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return };
        let now = SystemTime::now();
        for entry in entries.flatten() {
            let modified = entry.metadata().and_then(|m| m.modified());
            let age = modified.ok().and_then(|m| now.duration_since(m).ok()).unwrap_or_default();
            if age > self.max_age {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(version: &str) -> Entry {
        Entry { version: version.into(), digest: Some("sha256:ab".into()), urls: vec![format!("demo-{version}.tgz")] }
    }

    #[test]
    fn an_answer_is_kept_per_scope_repository_and_chart_and_used_within_the_age() {
        let state = tempfile::tempdir().unwrap();
        let kept = Kept::new(state.path(), "units/a".into(), Duration::from_secs(3600));
        assert!(kept.load("http://r", "demo").is_none(), "nothing kept yet");
        kept.store("a", "http://r", "demo", &[entry("0.1.0"), entry("0.2.0")]);
        let (entries, age) = kept.load("http://r", "demo").expect("kept");
        assert_eq!(entries, [entry("0.1.0"), entry("0.2.0")]);
        assert!(age < Duration::from_secs(60), "{age:?}");
        assert!(kept.load("http://r", "other").is_none() && kept.load("http://s", "demo").is_none());
        let other = Kept::new(state.path(), "units/b".into(), Duration::from_secs(3600));
        assert!(other.load("http://r", "demo").is_none(), "another scope does not read it");
    }

    #[test]
    fn an_answer_past_the_age_is_not_used_and_a_zero_age_keeps_nothing() {
        let state = tempfile::tempdir().unwrap();
        let kept = Kept::new(state.path(), "units/a".into(), Duration::from_secs(3600));
        kept.store("a", "http://r", "demo", &[entry("0.1.0")]);
        let file = kept.file("http://r", "demo");
        let mut answer: Answer = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        answer.read_at -= 7200;
        std::fs::write(&file, serde_json::to_vec(&answer).unwrap()).unwrap();
        assert!(kept.load("http://r", "demo").is_none(), "two hours old, the limit is one");

        let off = Kept::new(state.path(), "units/c".into(), Duration::ZERO);
        off.store("c", "http://r", "demo", &[entry("0.1.0")]);
        assert!(!off.file("http://r", "demo").exists() && off.load("http://r", "demo").is_none());
    }
}
