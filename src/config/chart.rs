//! `[sync.helm] repo_url`: a unit whose source is a chart in a chart repository (an
//! `index.yaml` over https or http) or an OCI registry (`oci://`), instead of a git path
//! ([`ChartSource`]).

use std::path::PathBuf;

use toml::Spanned;

use super::Result;
use super::constraint::VersionConstraint;
use super::raw::RawHelm;
use super::resolve::Resolver;

/// Where a chart unit's chart comes from and which versions it takes (`repo_url`, `chart`,
/// `version` and the credential files of `[sync.helm]`). Credentials are file paths, read at
/// each fetch and never kept; a `repo_url` may still carry userinfo, so it is shown only
/// through [`crate::telemetry::url::redact`] (and its secrets are masked in every line
/// gitward writes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChartSource {
    /// `https://…` or `http://…` (a chart repository: `<repo_url>/index.yaml`), or
    /// `oci://host[:port]/path` (a registry; the chart is the repository `<path>/<chart>`,
    /// its tags the versions, as `helm push` writes them). Kept as written, no trailing `/`.
    /// The unit's own repository counts as listed in `[render] chart_repositories`, unless it
    /// is a loopback, link-local or metadata address ([`super::allow`]); userinfo
    /// (`https://user:password@host/…`) is sent as Basic credentials to this origin only.
    pub repo_url: String,
    /// The chart's name in the repository's index, or the last part of its OCI repository.
    pub chart: String,
    /// Which versions may be taken (Helm's constraint syntax, `version` in the file); the
    /// newest that matches is. Default: every release (`*`), never a pre-release.
    pub version: VersionConstraint,
    /// The user name sent with `password_file` (HTTP Basic, also for registries). Default none.
    pub username: Option<String>,
    /// A file holding the password (or token) for `username`; its trailing newline is
    /// dropped. Default none.
    pub password_file: Option<PathBuf>,
    /// PEM certificates trusted for the repository besides the system roots. Default none.
    pub ca_file: Option<PathBuf>,
    /// For `oci://`: a Docker `config.json` (`auths.<host>.auth`, base64 `user:password`, or
    /// `username` and `password`) to take the registry's credentials from. Credential helpers
    /// are not run. Default none.
    pub docker_config_file: Option<PathBuf>,
}

impl ChartSource {
    /// `chart` from `repo_url`, whose versions `version` allows, with no credentials and no
    /// extra CA.
    pub fn anonymous(repo_url: &str, chart: &str, version: VersionConstraint) -> Self {
        Self {
            repo_url: repo_url.to_owned(),
            chart: chart.to_owned(),
            version,
            username: None,
            password_file: None,
            ca_file: None,
            docker_config_file: None,
        }
    }

    /// Whether the chart comes from an OCI registry (`oci://`).
    pub fn is_oci(&self) -> bool {
        self.repo_url.starts_with("oci://")
    }
}

impl Resolver<'_> {
    /// `sync[index].helm`'s chart source keys: `None` without `repo_url`; with it, `chart` is
    /// required and the other keys are checked. Without `repo_url` the chart keys are refused,
    /// since they would do nothing.
    pub(super) fn chart_source(&self, index: usize, raw: &mut RawHelm) -> Result<Option<ChartSource>> {
        let key = |field: &str| format!("sync[{index}].helm.{field}");
        let Some(repo_url) = raw.repo_url.take() else {
            let stray = [("chart", &raw.chart), ("version", &raw.version), ("username", &raw.username)];
            if let Some((name, value)) = stray.into_iter().find(|(_, v)| v.is_some()) {
                let span = value.as_ref().map(Spanned::span);
                return Err(self.invalid(span, &key(name), "needs `repo_url`: it chooses a chart from a repository"));
            }
            return Ok(None);
        };
        let span = repo_url.span();
        let url = repo_url.into_inner().trim_end_matches('/').to_owned();
        let scheme_ok = ["https://", "http://", "oci://"].iter().any(|s| url.starts_with(s) && url.len() > s.len());
        if !scheme_ok {
            let message = format!("`{url}` is not an https://, http:// or oci:// URL");
            return Err(self.invalid(Some(span), &key("repo_url"), message));
        }
        let Some(chart) = raw.chart.take() else {
            return Err(self.invalid(Some(span), &key("chart"), "is required with `repo_url`"));
        };
        let chart = self.check(chart, &key("chart"), chart_name)?;
        let version = match raw.version.take() {
            Some(text) => {
                let span = text.span();
                VersionConstraint::parse(text.get_ref()).map_err(|m| self.invalid(Some(span), &key("version"), m))?
            }
            None => VersionConstraint::parse("").expect("the empty constraint parses"),
        };
        let file = |raw: Option<Spanned<String>>, name: &str| raw.map(|p| self.file(p, &key(name))).transpose();
        let source = ChartSource {
            username: raw.username.take().map(Spanned::into_inner),
            password_file: file(raw.password_file.take(), "password_file")?,
            ca_file: file(raw.ca_file.take(), "ca_file")?,
            docker_config_file: file(raw.docker_config_file.take(), "docker_config_file")?,
            repo_url: url,
            chart,
            version,
        };
        if source.username.is_some() != source.password_file.is_some() {
            return Err(self.invalid(Some(span), &key("username"), "and `password_file` go together"));
        }
        Ok(Some(source))
    }
}

/// A chart name: what `helm create` allows, lower-case letters, digits, `-`, `_` and `.`.
fn chart_name(value: &str) -> std::result::Result<(), String> {
    let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.');
    if value.is_empty() || !value.chars().all(ok) || value.starts_with('.') {
        return Err(format!("`{value}` is not a chart name (lower-case letters, digits, `-`, `_`, `.`)"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::tests::parse;

    const CHART: &str = "[[sync]]\nname = \"cm\"\n[sync.helm]\nrepo_url = \"https://charts.example.com/\"\n";

    #[test]
    fn a_chart_unit_needs_no_repo_and_reads_its_range() {
        let config = parse(&format!("{CHART}chart = \"cert-manager\"\nversion = \">=1.19.0 <1.20.0\"\n")).unwrap();
        let chart = config.units[0].helm.chart.clone().unwrap();
        assert_eq!(chart.repo_url, "https://charts.example.com");
        assert_eq!(chart.version.as_str(), ">=1.19.0 <1.20.0");
        assert!(!chart.is_oci());
        assert_eq!(config.units[0].repo, "");
    }

    #[test]
    fn chart_keys_are_checked_with_their_line() {
        let err = parse(CHART).unwrap_err().to_string();
        assert!(err.contains("line 4: sync[0].helm.chart: is required with `repo_url`"), "{err}");
        let err = parse(&format!("{CHART}chart = \"c\"\nversion = \">=x.y\"\n")).unwrap_err().to_string();
        assert!(err.contains("line 6: sync[0].helm.version: `x.y` is not a version"), "{err}");
        let err = parse(&format!("{CHART}chart = \"c\"\nusername = \"u\"\n")).unwrap_err().to_string();
        assert!(err.contains("`password_file` go together"), "{err}");
        let err = parse("[[sync]]\nname = \"cm\"\n[sync.helm]\nchart = \"c\"\n").unwrap_err().to_string();
        assert!(err.contains("sync[0].helm.chart: needs `repo_url`"), "{err}");
        let err = parse("[[sync]]\nname = \"cm\"\n").unwrap_err().to_string();
        assert!(err.contains("sync[0].repo"), "{err}");
        let both = "[[sync]]\nname = \"cm\"\nrepo = \"https://g/x.git\"\n[sync.helm]\nrepo_url = \"oci://r.example/c\"\n\
                    chart = \"c\"\nvalues_files = [\"values/prod.yaml\"]\n";
        let unit = parse(both).unwrap().units[0].clone();
        assert_eq!(
            (unit.repo.as_str(), unit.helm.values_files.as_slice()),
            ("https://g/x.git", &["values/prod.yaml".to_owned()][..])
        );
        let err = parse(&format!("{CHART}chart = \"c\"\nvalues_files = [\"v.yaml\"]\n")).unwrap_err().to_string();
        assert!(err.contains("sync[0].helm.values_files: needs a git repository"), "{err}");
    }
}
