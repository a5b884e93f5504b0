//! Keys a unit's kind does not read: refused as an unknown key is, naming the key and the
//! kind, instead of being silently ignored.

use super::Result;
use super::raw::RawSyncUnit;
use super::resolve::Resolver;
use toml::Spanned;

impl Resolver<'_> {
    /// Refuses a key the unit's kind does not read, as an unknown key is refused: a chart unit
    /// (`[sync.helm] repo_url`) reads no `path`, `render` or `allow_remote_bases`, and without
    /// `repo` no `ref` or `[sync.git]`; an OCI artifact unit (`repo = "oci://…"`) reads
    /// `[sync.git] username` and `token_file` as its registry's credentials, not `ssh_key_file`
    /// or `known_hosts_file` (its `ref` is refused where it is read). Such a key was silently
    /// ignored, so a `path` that looked as if it chose a subdirectory chose nothing.
    pub(super) fn refuse_unread(&self, index: usize, raw: &RawSyncUnit, chart: bool, repo: &str) -> Result<()> {
        let span = |v: &Option<Spanned<String>>| v.as_ref().map(|v| (Some(v.span()), true)).unwrap_or((None, false));
        let git = &raw.git;
        let (kind, unread) = if chart {
            // Keys of a git remote: unread only when there is no `repo` (values files come from it).
            let without_repo = |v: &Option<Spanned<String>>| if repo.is_empty() { span(v) } else { (None, false) };
            let keys = [
                (
                    "path",
                    span(&raw.path),
                    "the chart is `chart` from `repo_url`; `values_files` are named from the repository root",
                ),
                ("render", (None, raw.render.is_some()), "a chart renders with Helm"),
                ("allow_remote_bases", (None, raw.allow_remote_bases.is_some()), "it is kustomize's"),
                ("ref", without_repo(&raw.reference), "with no `repo`, there is no git revision to choose"),
                ("git.ssh_key_file", without_repo(&git.ssh_key_file), "with no `repo`, there is no git remote"),
                ("git.known_hosts_file", without_repo(&git.known_hosts_file), "with no `repo`, there is no git remote"),
                (
                    "git.token_file",
                    without_repo(&git.token_file),
                    "the chart repository's credentials are `[sync.helm] username` and `password_file`",
                ),
                (
                    "git.username",
                    without_repo(&git.username),
                    "the chart repository's credentials are `[sync.helm] username` and `password_file`",
                ),
            ];
            ("a chart unit ([sync.helm] repo_url)", keys.to_vec())
        } else if repo.starts_with("oci://") {
            let keys = [
                (
                    "git.ssh_key_file",
                    span(&git.ssh_key_file),
                    "a registry is spoken to over HTTPS: its credentials are `[sync.git] username` and `token_file`",
                ),
                ("git.known_hosts_file", span(&git.known_hosts_file), "a registry is spoken to over HTTPS, not SSH"),
            ];
            ("an OCI artifact unit (repo = \"oci://…\")", keys.to_vec())
        } else {
            return Ok(());
        };
        match unread.into_iter().find(|(_, (_, set), _)| *set) {
            Some((key, (span, _), why)) => {
                let message = format!("{kind} does not read it ({why}): remove it");
                Err(self.invalid(span, &format!("sync[{index}].{key}"), message))
            }
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::tests::parse;

    #[test]
    fn keys_a_chart_or_artifact_unit_does_not_read_are_refused_naming_the_key_and_the_kind() {
        let chart = |keys: &str| {
            format!(
                "[[sync]]\nname = \"cm\"\n{keys}\n[sync.helm]\nrepo_url = \"https://charts.example.com\"\nchart = \"c\"\n"
            )
        };
        let err = parse(&chart("path = \"apps\"")).unwrap_err().to_string();
        assert!(
            err.contains(
                "line 3: sync[0].path: a chart unit ([sync.helm] repo_url) does not read it (the chart is `chart` \
                 from `repo_url`; `values_files` are named from the repository root): remove it"
            ),
            "{err}"
        );
        let err = parse(&chart("ref = \"main\"")).unwrap_err().to_string();
        assert!(err.contains("line 3: sync[0].ref: a chart unit ([sync.helm] repo_url) does not read it"), "{err}");
        let err = parse(&chart("render = \"kustomize\"")).unwrap_err().to_string();
        assert!(err.contains("sync[0].render: a chart unit ([sync.helm] repo_url) does not read it"), "{err}");
        // With `repo` (its values files), `ref` chooses their commit.
        assert!(parse(&chart("repo = \"https://g/x.git\"\nref = \"v1\"")).is_ok());
        let artifact = "[[sync]]\nname = \"a\"\nrepo = \"oci://r.example.com/m:v1\"\npath = \"apps\"\n\
                        [sync.git]\nssh_key_file = \"/k\"\n";
        let err = parse(artifact).unwrap_err().to_string();
        assert!(
            err.contains(
                "line 6: sync[0].git.ssh_key_file: an OCI artifact unit (repo = \"oci://…\") does not read it"
            ),
            "{err}"
        );
        assert!(parse(&artifact.replace("ssh_key_file = \"/k\"", "token_file = \"/t\"")).is_ok(), "path is read");
    }
}
