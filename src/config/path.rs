//! A unit's directory in its repository, normalised once.

/// A unit's directory in its repository (`path` in the config): relative, `/`-separated,
/// without empty or `.` segments and without a leading or trailing `/`; `""` is the root.
/// Normalised once, where it is made ([`UnitPath::parse`] for the config, which also refuses
/// an absolute path and `..`; `From<&str>` for callers that build a source by hand, which
/// ignores leading and trailing `/` as git's tree paths do), and then only read: the listing,
/// the push probe, the render and the sync all join file names to the same string.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UnitPath(String);

impl UnitPath {
    /// `value` normalised (`./deploy//prod/` → `deploy/prod`).
    ///
    /// Errors: a leading `/` (the path is relative to the repository root) or a `..` segment,
    /// as a message that names `value`.
    pub fn parse(value: &str) -> Result<Self, String> {
        if value.starts_with('/') {
            return Err(format!("`{value}` must be relative to the repository root (no leading `/`)"));
        }
        if value.split('/').any(|part| part == "..") {
            return Err(format!("`{value}` must not contain `..`"));
        }
        Ok(Self::from(value))
    }

    /// The normalised path; `""` for the root.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this is the repository root.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// The repository path of `name` inside this directory (`name` itself at the root).
    pub fn join(&self, name: &str) -> String {
        if self.is_root() { name.to_owned() } else { format!("{}/{name}", self.0) }
    }

    /// The path as messages show it: `.` for the root.
    pub fn display(&self) -> &str {
        if self.is_root() { "." } else { &self.0 }
    }
}

impl From<&str> for UnitPath {
    /// `value` without empty and `.` segments (so without leading or trailing `/`).
    fn from(value: &str) -> Self {
        Self(value.split('/').filter(|s| !s.is_empty() && *s != ".").collect::<Vec<_>>().join("/"))
    }
}

impl From<String> for UnitPath {
    /// As `From<&str>`.
    fn from(value: String) -> Self {
        Self::from(value.as_str())
    }
}

impl PartialEq<&str> for UnitPath {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl std::ops::Deref for UnitPath {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::UnitPath;

    #[test]
    fn a_unit_path_is_normalised_once_and_joins_file_names() {
        assert_eq!(UnitPath::parse("").unwrap().as_str(), "");
        assert_eq!(UnitPath::parse("./deploy//prod/").unwrap().as_str(), "deploy/prod");
        assert!(UnitPath::parse("/deploy").is_err());
        assert!(UnitPath::parse("deploy/../secrets").is_err());
        assert_eq!(UnitPath::from("/apps/shop/").as_str(), "apps/shop");
        let shop = UnitPath::from("apps/shop");
        assert_eq!(shop.join("a.yaml"), "apps/shop/a.yaml");
        assert_eq!(UnitPath::default().join("a.yaml"), "a.yaml");
        assert_eq!((UnitPath::default().display(), shop.display()), (".", "apps/shop"));
    }
}
