//! The mirror side of a unit's source: fetching the unit's ref (a git mirror's shared fetch, an
//! OCI artifact pulled and unpacked, a chart's newest allowed version downloaded), and what the
//! mirror tells without a load — whether a push touched the unit's path, the tree at a path,
//! the directories a `[[sync_set]]` glob matches.

use std::sync::Mutex;
use std::time::Instant;

use super::{Origin, Repo, blocking};
use crate::source::artifact::{Artifact, Pulled};
use crate::source::{self, Revision, Signer, Source};
use crate::sync::{Error, Result};

impl Repo {
    /// Fetches the remote and resolves the unit's ref to a revision; for a chart unit, finds the
    /// newest version its range allows and downloads it unless cached (the revision
    /// `<chart>@<version>@sha256:<hex>`,
    /// [`ChartRepo::fetch`](crate::source::chart::ChartRepo::fetch)).
    ///
    /// Errors: [`Error::Source`] (unreachable repository, unknown ref; no matching chart version,
    /// an index that does not parse, a digest mismatch); the mirror and the download cache keep
    /// their previous state.
    pub async fn fetch(&self) -> Result<Revision> {
        self.fetch_since(Instant::now()).await
    }

    /// [`Repo::fetch`], satisfied for a git repository by a fetch of its shared mirror that started
    /// at or after `not_before` ([`Source::fetch_since`](crate::source::Source::fetch_since)): pass
    /// the instant the event asking for it was seen (a webhook, a ref change), and the units of one
    /// repository that saw one push fetch it once. A chart repository or OCI artifact is asked
    /// every time. Who signed the revision, as `[sync.verify]`'s check found them, is kept for
    /// [`Repo::signers`].
    ///
    /// Errors: those of [`Repo::fetch`].
    pub async fn fetch_since(&self, not_before: Instant) -> Result<Revision> {
        let (revision, signers) = self.fetch_verified(not_before).await?;
        self.signed.lock().expect("signed lock").note(&revision, signers);
        Ok(revision)
    }

    /// [`Repo::fetch_since`]'s revision, and who signed it as its verification found them.
    async fn fetch_verified(&self, not_before: Instant) -> Result<(Revision, Vec<Signer>)> {
        let source = match &self.origin {
            Origin::Git(source) => source.clone(),
            Origin::Artifact(artifact, source) => {
                let mirror = source.clone();
                let known = move |r: &Revision| Artifact::commit(&mirror.lock().expect("source lock"), r).is_some();
                let (pulled, signer) = artifact.pull(known).await?;
                let signers = signer.into_iter().collect();
                let (revision, layer) = match pulled {
                    Pulled::Known(revision) => return Ok((revision, signers)),
                    Pulled::New(revision, layer) => (revision, layer),
                };
                let (artifact, source, rev) = (artifact.clone(), source.clone(), revision.clone());
                blocking(move || Ok(artifact.import(&source.lock().expect("source lock"), &rev, &layer)?)).await?;
                return Ok((revision, signers));
            }
            Origin::Chart(chart, values) => {
                let fetched = chart.lock().await.fetch().await?;
                let Some(values) = values.clone() else {
                    return Ok((fetched.revision, fetched.signer.into_iter().collect()));
                };
                let (commit, signer) = blocking(move || fetch_git(&values, not_before)).await?;
                let signers = fetched.signer.into_iter().chain(signer).collect();
                return Ok((Revision(format!("{}+git:{commit}", fetched.revision)), signers));
            }
        };
        let (revision, signer) = blocking(move || fetch_git(&source, not_before)).await?;
        Ok((revision, signer.into_iter().collect()))
    }

    /// Whether the push seen at `not_before` touched the unit's path since `from`, and the
    /// commit it brought, told without reading the mirror (one fetch and one tree diff per push
    /// for every unit of a repository, [`crate::source::PushProbe::touched`]); `None` when it
    /// cannot be told so, for a chart or artifact unit, or before the unit's first sync
    /// (`from` unset).
    pub async fn push_touches(&self, from: Option<&Revision>, not_before: Instant) -> Option<crate::source::Touch> {
        let Origin::Git(source) = &self.origin else { return None };
        let from = from?;
        let probe = source.lock().expect("source lock").push_probe();
        probe.touched(from, not_before).await
    }

    /// The id of the git tree at `path` at `revision` ([`crate::source::Source::path_tree`]),
    /// read off the runtime; `None` for a chart or artifact unit, when nothing or a file is at
    /// `path`, or when the revision cannot be read (the caller then knows nothing of it).
    pub async fn path_tree(&self, revision: &Revision, path: &str) -> Option<String> {
        let Origin::Git(source) = &self.origin else { return None };
        let (source, revision, path) = (source.clone(), revision.clone(), path.to_owned());
        blocking(move || Ok(source.lock().expect("source lock").path_tree(&revision, &path)?)).await.ok().flatten()
    }

    /// The directories of `revision`'s tree that `glob` matches ([`source::matching_dirs`]),
    /// sorted: what a `[[sync_set]]` makes units of. Blocking work off the runtime.
    ///
    /// Errors: [`Error::Source`] when a directory on the way cannot be read, or the unit does
    /// not follow a git repository.
    pub async fn directories(&self, revision: &Revision, glob: &str) -> Result<Vec<String>> {
        let Origin::Git(source) = &self.origin else {
            let message = "a set lists the directories of a git repository".to_owned();
            return Err(
                source::Error::ReadObject { unit: self.unit.name.clone(), path: glob.to_owned(), message }.into()
            );
        };
        let (source, revision, glob) = (source.clone(), revision.clone(), glob.to_owned());
        blocking(move || {
            let source = source.lock().expect("source lock");
            Ok(source::matching_dirs(&source.tree(&revision)?, &glob)?)
        })
        .await
    }
}

/// Fetches `source`'s mirror and resolves its ref ([`Source::fetch_since`]); the revision and
/// who signed it, under the one lock. Blocking.
fn fetch_git(source: &Mutex<Source>, not_before: Instant) -> Result<(Revision, Option<Signer>)> {
    let mut source = source.lock().expect("source lock");
    let revision = source.fetch_since(not_before).map_err(Error::from)?;
    let signer = source.signer(&revision);
    Ok((revision, signer))
}
