//! An OCI artifact as a unit's source: `repo = "oci://host/path:tag"` (or `@sha256:<hex>`),
//! a manifest whose layer is a tar+gzip of the manifests, as `flux push artifact` writes it
//! (layer `application/vnd.cncf.flux.content.v1.tar+gzip`, config
//! `application/vnd.cncf.flux.config.v1+json`; a plain `application/vnd.oci.image.layer.v1.tar+gzip`
//! layer is taken too).
//!
//! The layer is unpacked into the unit's bare mirror as a commit with no parent, named by the
//! ref `refs/artifacts/<manifest digest hex>`, so listing, [`super::Tree`] and the render
//! sandbox read it exactly as a git revision. The unit's revision is `<tag>@sha256:<hex>` (the
//! manifest digest); [`Artifact::commit`] maps it back to the commit. Only the refs of the two
//! revisions imported last are kept (the one in flight and the one before it); older ones are
//! dropped at each import. Entries that would leave
//! the tree are refused by the door ([`super::door`]), naming the entry: a name git refuses
//! (`..`, `.git`), an absolute path, a symbolic link whose resolution leaves the tree, hard
//! links, devices and FIFOs; so is a layer whose gzip or tar stream is truncated or corrupt.
//! The unpacked size is capped by `[render] max_tree_bytes`: a layer past it is refused, never
//! cut short.
//!
//! Credentials as for OCI charts: `[sync.git] username` with `token_file` as its password,
//! sent to the registry's origin only; a loopback registry is spoken to over plain HTTP, and
//! must be listed in `[render] chart_repositories` (`chart::registry`). The manifest is read
//! within 4 MiB and the layer within `max_tree_bytes`, each checked against its digest.

mod referrer;

use std::time::Duration;

pub use super::chart::registry::{Attached, Referrer};

use super::chart::registry::Registry;
use super::chart::{ChartSpec, oci};
use super::verify::cosign;
use super::{Error, Result, Revision, Signer, Source};
use crate::config::{ChartRepositories, ChartSource};
use crate::telemetry::url::redact;

/// The layer media types taken as the artifact's content, in order of preference.
pub const LAYER_MEDIA_TYPES: [&str; 2] =
    ["application/vnd.cncf.flux.content.v1.tar+gzip", "application/vnd.oci.image.layer.v1.tar+gzip"];

/// What an artifact unit pulls, and the limits of a pull.
#[derive(Debug, Clone)]
pub struct ArtifactSpec {
    /// The sync unit: the subject of every error.
    pub unit: String,
    /// `oci://host[:port]/path:tag` or `oci://host[:port]/path@sha256:<hex>`; no tag means
    /// `latest`.
    pub url: String,
    /// The user name sent with `password_file` (HTTP Basic). Default none.
    pub username: Option<String>,
    /// A file holding the password (or token); its trailing newline is dropped.
    pub password_file: Option<std::path::PathBuf>,
    /// The largest layer downloaded and the most bytes unpacked from it (`[render]
    /// max_tree_bytes`).
    pub max_bytes: u64,
    /// How long one pull (manifest and layer) may take in all (`[render] timeout`).
    pub timeout: Duration,
    /// `[sync.verify] cosign_public_key_file`: the manifest must carry a cosign signature by
    /// this key (module `verify::cosign`), checked at every pull, before anything of it is
    /// read. Default none: no signature is checked.
    pub cosign_public_key_file: Option<std::path::PathBuf>,
    /// `[render] chart_repositories`: a loopback, link-local or metadata registry must be
    /// listed there.
    pub chart_repositories: ChartRepositories,
}

/// One unit's artifact: where it is and how to reach it.
#[derive(Debug, Clone)]
pub struct Artifact {
    spec: ArtifactSpec,
    chart: ChartSpec,
    registry: String,
    userinfo: Option<String>,
    repository: String,
    tag: Option<String>,
    digest: Option<String>,
}

/// What [`Artifact::pull`] found.
pub enum Pulled {
    /// The manifest's revision is already unpacked in the mirror.
    Known(Revision),
    /// A new revision and its layer (tar+gzip bytes), to [`Artifact::import`].
    New(Revision, Vec<u8>),
}

impl Artifact {
    /// Parses `spec.url`.
    ///
    /// Errors: [`Error::Artifact`] when it is not `oci://host/path[:tag|@sha256:<hex>]`.
    pub fn new(spec: ArtifactSpec) -> Result<Self> {
        let bad = |message: &str| Error::Artifact {
            unit: spec.unit.clone(),
            url: redact(&spec.url),
            message: message.into(),
        };
        if !spec.url.starts_with("oci://") {
            return Err(bad("not an oci:// URL"));
        }
        let (registry, rest, userinfo) = oci::split(&spec.url);
        if rest.is_empty() {
            return Err(bad("no repository path after the host"));
        }
        let (repository, tag, digest) = match rest.split_once('@') {
            Some((repository, digest)) => (repository, None, Some(digest.to_owned())),
            None => match rest.rsplit_once(':').filter(|(_, tag)| !tag.contains('/')) {
                Some((repository, tag)) => (repository, Some(tag.to_owned()), None),
                None => (rest.as_str(), Some("latest".to_owned()), None),
            },
        };
        if repository.is_empty() || digest.as_deref().is_some_and(|d| !d.starts_with("sha256:")) {
            return Err(bad("expected oci://host/path:tag or oci://host/path@sha256:<hex>"));
        }
        let any = crate::config::VersionConstraint::parse("").expect("the empty constraint parses");
        let source = ChartSource {
            username: spec.username.clone(),
            password_file: spec.password_file.clone(),
            ..ChartSource::anonymous(&spec.url, "", any)
        };
        let chart = ChartSpec {
            unit: spec.unit.clone(),
            source,
            max_bytes: spec.max_bytes,
            timeout: spec.timeout,
            cosign_public_key_file: None,
            chart_repositories: spec.chart_repositories.clone(),
        };
        let repository = repository.to_owned();
        Ok(Self { spec, chart, registry, userinfo, repository, tag, digest })
    }

    /// Reads the tag's (or digest's) manifest; when its revision is not in `known`'s mirror
    /// yet, downloads the content layer. Bounded by the spec's timeout. With a cosign key,
    /// also who signed the manifest.
    ///
    /// Errors: [`Error::FetchFailed`] (unreachable, timeout), [`Error::Credentials`],
    /// [`Error::Artifact`] (a manifest that does not parse or has no content layer, naming the
    /// URL), [`Error::FileTooLarge`].
    pub async fn pull(&self, known: impl Fn(&Revision) -> bool) -> Result<(Pulled, Option<Signer>)> {
        match tokio::time::timeout(self.spec.timeout, self.pull_once(known)).await {
            Ok(pulled) => pulled,
            Err(_) => Err(Error::FetchFailed {
                unit: self.spec.unit.clone(),
                repo: redact(&self.spec.url),
                message: format!("timed out after {:?}", self.spec.timeout),
            }),
        }
    }

    /// The client of this artifact's registry: the unit's allow-list, credentials and
    /// transport, and its own repository checked against the allow-list.
    ///
    /// Errors: [`Error::Artifact`] (a refused address), as [`oci::net`].
    fn net(&self) -> Result<super::chart::net::Net> {
        let own = crate::config::artifact_repository(&self.spec.url);
        let net = oci::net(&self.chart, &own, &self.registry, self.userinfo.clone())?;
        net.allowed(&own).map_err(|message| Error::Artifact {
            unit: self.spec.unit.clone(),
            url: redact(&self.spec.url),
            message,
        })?;
        Ok(net)
    }

    async fn pull_once(&self, known: impl Fn(&Revision) -> bool) -> Result<(Pulled, Option<Signer>)> {
        let spec = &self.spec;
        let shown = redact(&spec.url);
        let net = self.net()?;
        let registry = Registry::new(&net, &spec.unit, &self.registry, &shown);
        let reference = self.digest.clone().or_else(|| self.tag.clone()).unwrap_or_else(|| "latest".into());
        let (manifest, digest) = registry.manifest(&self.repository, &reference).await.map_err(as_artifact)?;
        let revision = match &self.tag {
            Some(tag) if self.digest.is_none() => Revision(format!("{tag}@{digest}")),
            _ => Revision(digest.clone()),
        };
        let is_known = known(&revision);
        let mut signed_by = None;
        if let Some(key) = &spec.cosign_public_key_file {
            let signed = cosign::Signed { registry: &registry, repository: &self.repository, digest: &digest };
            let verified = cosign::verify(key, &signed).await;
            let signer = verified.map_err(|failure| as_artifact(failure.into_error(&spec.unit, &revision)))?;
            if !is_known {
                tracing::info!(unit = %spec.unit, %revision, signer = %signer, "revision verified");
            }
            signed_by = Some(signer);
        }
        if is_known {
            return Ok((Pulled::Known(revision), signed_by));
        }
        let refused = |message: String| Error::Artifact { unit: spec.unit.clone(), url: shown.clone(), message };
        let layer = LAYER_MEDIA_TYPES.iter().find_map(|t| manifest.layers.iter().find(|l| l.media_type == *t));
        let Some(layer) = layer else {
            let found: Vec<&str> = manifest.layers.iter().map(|l| l.media_type.as_str()).collect();
            return Err(refused(format!(
                "the manifest {digest} has no content layer ({}; found: {})",
                LAYER_MEDIA_TYPES.join(" or "),
                if found.is_empty() { "none".to_owned() } else { found.join(", ") }
            )));
        };
        let bytes = registry.blob(&self.repository, layer, spec.max_bytes).await.map_err(as_artifact)?;
        tracing::info!(unit = %spec.unit, url = %shown, %revision, "artifact downloaded");
        Ok((Pulled::New(revision, bytes), signed_by))
    }

    /// Unpacks `layer` (tar+gzip) into `source`'s mirror as the commit of `revision`.
    /// Blocking.
    ///
    /// Errors: [`Error::Artifact`] naming the entry that would leave the tree, or a layer that
    /// is not tar+gzip; [`Error::FileTooLarge`] when the files unpack to more than
    /// `max_bytes`; [`Error::Git`] when the mirror cannot be written.
    pub fn import(&self, source: &Source, revision: &Revision, layer: &[u8]) -> Result<()> {
        let files = unpack(&self.spec, layer)?;
        let repo = source.handle()?;
        let unit = self.spec.unit.as_str();
        let git = |step: &'static str| move |e: git2::Error| Error::git(unit, step, &e);
        let mut index = git2::Index::new().map_err(git("index"))?;
        for file in files {
            let id = repo.blob(&file.bytes).map_err(git("write blob"))?;
            let time = git2::IndexTime::new(0, 0);
            let path = file.path.into_bytes();
            index
                .add(&git2::IndexEntry {
                    ctime: time,
                    mtime: time,
                    dev: 0,
                    ino: 0,
                    mode: file.mode,
                    uid: 0,
                    gid: 0,
                    file_size: u32::try_from(file.bytes.len()).unwrap_or(u32::MAX),
                    id,
                    flags: u16::try_from(path.len().min(0xfff)).unwrap_or(0xfff),
                    flags_extended: 0,
                    path,
                })
                .map_err(git("index add"))?;
        }
        let tree = index.write_tree_to(&repo).map_err(git("write tree"))?;
        let tree = repo.find_tree(tree).map_err(git("read tree"))?;
        let signature =
            git2::Signature::new("gitward", "gitward@localhost", &git2::Time::new(0, 0)).map_err(git("signature"))?;
        let message = format!("{}\n\n{revision}\n", redact(&self.spec.url));
        let commit = repo.commit(None, &signature, &signature, &message, &tree, &[]).map_err(git("write commit"))?;
        repo.reference(&ref_name(revision), commit, true, "artifact").map_err(git("write ref"))?;
        let removed = collect(&repo, commit).map_err(git("collect old revisions"))?;
        if removed > 0 {
            tracing::debug!(unit, removed, "old artifact revisions dropped");
        }
        Ok(())
    }

    /// The commit `revision` was unpacked to ([`Artifact::import`]), `None` when it was not.
    pub fn commit(source: &Source, revision: &Revision) -> Option<Revision> {
        let repo = source.handle().ok()?;
        let reference = repo.find_reference(&ref_name(revision)).ok()?;
        reference.peel_to_commit().ok().map(|c| Revision(c.id().to_string()))
    }
}

/// `refs/artifacts/<hex>` of the revision's manifest digest.
fn ref_name(revision: &Revision) -> String {
    let hex = revision.0.rsplit_once("sha256:").map_or(revision.0.as_str(), |(_, hex)| hex);
    format!("refs/artifacts/{hex}")
}

/// The ref naming the commit of the revision imported last, so that the next import knows
/// which revision came before it (the commits carry no time: the same layer gives the same
/// commit).
const NEWEST_REF: &str = "refs/gitward/newest-artifact";

/// Drops the refs of all but the two revisions imported last: `newest`, just imported (the
/// revision in flight), and the one imported before it (the revision applied, or the one a
/// sync still reads). Without this every revision a CI pushes stays in the mirror for good.
/// Nothing runs `git gc` on mirrors, so the objects stay on disk; what is dropped is the ref,
/// and with it the revision ([`Artifact::commit`] answers `None`: it is pulled again if asked
/// for). Returns how many refs were deleted.
///
/// Errors: a ref that cannot be read, written or deleted.
fn collect(repo: &git2::Repository, newest: git2::Oid) -> std::result::Result<usize, git2::Error> {
    let previous = repo.find_reference(NEWEST_REF).ok().and_then(|r| r.target());
    repo.reference(NEWEST_REF, newest, true, "newest artifact")?;
    let mut stale = Vec::new();
    for reference in repo.references_glob("refs/artifacts/*")? {
        let reference = reference?;
        let target = reference.target();
        if target != Some(newest) && (previous.is_none() || target != previous) {
            stale.push(reference);
        }
    }
    for reference in &mut stale {
        reference.delete()?;
    }
    Ok(stale.len())
}

/// One file of an artifact: its tree path, git mode and bytes (a link's target for 0o120000).
struct File {
    path: String,
    mode: u32,
    bytes: Vec<u8>,
}

/// The files of a tar+gzip layer, read whole through the door ([`super::door::archive`]):
/// every entry's name and kind checked, links resolved inside the layer, the gzip and tar
/// streams complete. The tar stream may inflate to at most twice `max_bytes` and 1 MiB, the
/// files may total at most `max_bytes`; past either the layer is refused, never cut.
fn unpack(spec: &ArtifactSpec, layer: &[u8]) -> Result<Vec<File>> {
    use super::door::Kind;
    use super::door::archive::{ArchiveError, read_tar_gz};
    let max_stream = spec.max_bytes.saturating_mul(2).saturating_add(1 << 20);
    let deadline = Some(super::door::Deadline::after(spec.timeout));
    let door = read_tar_gz(layer, max_stream, spec.max_bytes, deadline).map_err(|e| {
        let message = match e {
            ArchiveError::FilesTooLarge { path, .. } => {
                let (unit, limit) = (spec.unit.clone(), spec.max_bytes);
                return Error::FileTooLarge { unit, path: format!("{}: {path}", spec.url), size: limit + 1, limit };
            }
            ArchiveError::Entry(refusal) => format!("tar entry {:?}: refused: {}", refusal.path, refusal.reason),
            other => format!("the layer is refused: {other}"),
        };
        Error::Artifact { unit: spec.unit.clone(), url: spec.url.clone(), message }
    })?;
    let files = door.entries().filter_map(|(path, kind, bytes)| {
        let mode = match kind {
            Kind::Dir => return None,
            Kind::File { executable: true } => 0o100755,
            Kind::File { executable: false } => 0o100644,
            Kind::Symlink { .. } => 0o120000,
        };
        Some(File { path: path.to_owned(), mode, bytes: bytes.cloned().unwrap_or_default() })
    });
    Ok(files.collect())
}

/// A registry client's error as an artifact's: [`Error::Chart`] names the artifact.
fn as_artifact(e: Error) -> Error {
    match e {
        Error::Chart { unit, url, message } => Error::Artifact { unit, url, message },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ArtifactSpec {
        ArtifactSpec {
            unit: "u".into(),
            url: "oci://127.0.0.1:5000/manifests/app:v1".into(),
            username: None,
            password_file: None,
            max_bytes: 1 << 20,
            timeout: Duration::from_secs(1),
            cosign_public_key_file: None,
            chart_repositories: ChartRepositories::default(),
        }
    }

    /// A tar+gzip of (path, kind, content-or-target), headers written raw so bad paths stay.
    fn layer(entries: &[(&str, tar::EntryType, &str)]) -> Vec<u8> {
        let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast()));
        for (path, kind, content) in entries {
            let mut header = tar::Header::new_gnu();
            header.as_gnu_mut().unwrap().name[..path.len()].copy_from_slice(path.as_bytes());
            header.set_entry_type(*kind);
            header.set_mode(0o644);
            if *kind == tar::EntryType::Symlink {
                header.set_size(0);
                header.as_gnu_mut().unwrap().linkname[..content.len()].copy_from_slice(content.as_bytes());
                header.set_cksum();
                builder.append(&header, std::io::empty()).unwrap();
            } else {
                header.set_size(content.len() as u64);
                header.set_cksum();
                builder.append(&header, content.as_bytes()).unwrap();
            }
        }
        builder.into_inner().unwrap().finish().unwrap()
    }

    #[test]
    fn urls_give_registry_repository_and_tag_or_digest() {
        let a = Artifact::new(spec()).unwrap();
        assert_eq!(
            (a.registry.as_str(), a.repository.as_str(), a.tag.as_deref()),
            ("127.0.0.1:5000", "manifests/app", Some("v1"))
        );
        let mut pinned = spec();
        pinned.url = "oci://r.example/app@sha256:abcd".into();
        let a = Artifact::new(pinned).unwrap();
        assert_eq!((a.repository.as_str(), a.digest.as_deref()), ("app", Some("sha256:abcd")));
        let mut bare = spec();
        bare.url = "oci://r.example:5000/a/b".into();
        assert_eq!(Artifact::new(bare).unwrap().tag.as_deref(), Some("latest"));
    }

    #[test]
    fn entries_leaving_the_tree_are_refused_by_name() {
        use tar::EntryType as T;
        let ok = unpack(&spec(), &layer(&[("./app/cm.yaml", T::Regular, "a: 1"), ("app/l", T::Symlink, "cm.yaml")]))
            .unwrap();
        assert_eq!(ok.iter().map(|f| f.path.as_str()).collect::<Vec<_>>(), ["app/cm.yaml", "app/l"]);
        for (entries, named) in [
            (vec![("app/../../x.yaml", T::Regular, "a: 1")], "app/../../x.yaml"),
            (vec![("/etc/x.yaml", T::Regular, "a: 1")], "/etc/x.yaml"),
            (vec![("app/l", T::Symlink, "../../etc")], "app/l"),
            (vec![("app/l", T::Symlink, "/etc/passwd")], "app/l"),
            (vec![("dev", T::Char, "")], "dev"),
        ] {
            let error = unpack(&spec(), &layer(&entries)).err().expect("refused").to_string();
            assert!(error.contains(&format!("{named:?}")), "{error}");
        }
        let mut small = spec();
        small.max_bytes = 4;
        let error = unpack(&small, &layer(&[("a.yaml", T::Regular, "a: 12345")])).err().unwrap();
        assert!(matches!(error, Error::FileTooLarge { .. }), "{error}");
    }

    /// A layer cut anywhere, or one whose tar stream inflates past the cap, is an error:
    /// before, the stream was read through `take()` and what fit was taken as the tree.
    #[test]
    fn a_truncated_layer_or_one_past_the_cap_is_refused_never_cut_short() {
        use tar::EntryType as T;
        let whole = layer(&[("app/a.yaml", T::Regular, "a: 1"), ("app/b.yaml", T::Regular, "b: 2")]);
        assert_eq!(unpack(&spec(), &whole).unwrap().len(), 2);
        for cut in [whole.len() - 1, whole.len() - 8, whole.len() / 2, 20] {
            let error = unpack(&spec(), &whole[..cut]).err().unwrap_or_else(|| panic!("cut at {cut} accepted"));
            assert!(error.to_string().contains("the layer is refused"), "{error}");
        }
        // A complete gzip of a tar cut at an entry boundary (no end-of-archive block).
        let mut tar = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        header.set_path("app/a.yaml").unwrap();
        header.set_size(4);
        header.set_cksum();
        tar.append(&header, &b"a: 1"[..]).unwrap();
        let mut cut = tar.into_inner().unwrap();
        cut.truncate(1024);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &cut).unwrap();
        let error = unpack(&spec(), &gz.finish().unwrap()).err().expect("a tar without its end is refused");
        assert!(error.to_string().contains("truncated"), "{error}");
        // Past the cap: many small files whose headers alone pass twice the cap.
        let mut small = spec();
        small.max_bytes = 1 << 10;
        let names: Vec<String> = (0..2200).map(|i| format!("f{i}")).collect();
        let many: Vec<(&str, T, &str)> = names.iter().map(|n| (n.as_str(), T::Regular, "")).collect();
        let error = unpack(&small, &layer(&many)).err().expect("past the cap");
        assert!(error.to_string().contains("inflates to more than"), "{error}");
    }
}
