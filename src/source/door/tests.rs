//! The door's properties over generated trees and archives: what it accepts, written into a
//! real directory, stays inside the root (no entry outside it, every link resolving inside it
//! as the kernel resolves it); and every path real `git` refuses (`update-index`, with
//! `core.protectHFS` and `core.protectNTFS`) is refused.

use std::path::{Path, PathBuf};

use proptest::prelude::*;

use super::archive::read_tar_gz;
use super::{Door, Kind, name};

/// Fragments names are made of: the pieces of every spelling git refuses, and plain letters.
fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec!["a", "b", "s", "t", "x.yaml"]).prop_map(str::to_owned),
        3 => prop::sample::select(vec![
            ".", "..", "/", "g", "G", "i", "I", "t", "T", "~1", " ", ":", "\\", "modules", "MODULES",
            "\u{200c}", "\u{feff}", "\u{202e}", "ü", "日本", "git", ".git", ".gitmodules", "gitmod~1", ".Mailmap",
        ])
        .prop_map(str::to_owned),
        1 => "\\PC{1,3}",
    ]
}

/// A name: whole spellings git refuses (and near misses) or fragments put together.
fn entry_name() -> impl Strategy<Value = String> {
    prop_oneof![
        1 => prop::sample::select(vec![
            ".git", ".GIT", ".git.", ".git ", "git~1", ".gitmodules", ".GITMODULES .", "gitmod~1", ".gitattributes",
            ".gitignore", ".mailmap", "..", ".", "", "\u{200c}.git", ".git::$DATA", ".github", "a", "s",
        ])
        .prop_map(str::to_owned),
        3 => prop::collection::vec(fragment(), 0..4).prop_map(|parts| parts.concat()),
    ]
}

/// A link target: components among names, `.`, `..` and empty ones, sometimes absolute.
fn target() -> impl Strategy<Value = String> {
    let part = prop_oneof![
        Just("..".to_owned()),
        Just(".".to_owned()),
        Just(String::new()),
        prop::sample::select(vec!["a", "b", "s", "t", "etc", "x.yaml"]).prop_map(str::to_owned),
    ];
    (any::<bool>(), prop::collection::vec(part, 1..7))
        .prop_map(|(absolute, parts)| format!("{}{}", if absolute { "/" } else { "" }, parts.join("/")))
}

#[derive(Debug, Clone)]
enum Gen {
    Dir,
    File,
    Link(String),
}

fn gen_kind() -> impl Strategy<Value = Gen> {
    prop_oneof![2 => Just(Gen::Dir), 2 => Just(Gen::File), 3 => target().prop_map(Gen::Link)]
}

/// A root three levels below a temporary directory, with a file beside it to aim at.
struct Place {
    dir: tempfile::TempDir,
    root: PathBuf,
}

impl Place {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("x/y/root");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(dir.path().join("x/secret"), "host").unwrap();
        Self { dir, root }
    }

    /// Nothing but the root's own parents and the planted file is outside the root, and every
    /// link below the root resolves (as the kernel does, and as `realpath` does) inside it.
    fn assert_contained(&self) {
        let top = self.dir.path();
        let expected: Vec<PathBuf> = ["x", "x/secret", "x/y", "x/y/root"].iter().map(|p| top.join(p)).collect();
        let mut stack = vec![top.to_path_buf()];
        let real_root = std::fs::canonicalize(&self.root).unwrap();
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                let meta = std::fs::symlink_metadata(&path).unwrap();
                if !path.starts_with(&self.root) {
                    assert!(expected.contains(&path), "written outside the root: {}", path.display());
                }
                if meta.file_type().is_symlink() {
                    let target = std::fs::read_link(&path).unwrap();
                    let parent = path.parent().unwrap();
                    assert!(physical(&self.root, parent, &target).is_some(), "{} leaves the root", path.display());
                    if let Ok(real) = std::fs::canonicalize(&path) {
                        assert!(real.starts_with(&real_root), "{} resolves to {}", path.display(), real.display());
                    }
                } else if meta.is_dir() {
                    stack.push(path);
                }
            }
        }
        assert_eq!(std::fs::read_to_string(top.join("x/secret")).unwrap(), "host");
    }
}

/// The kernel's resolution of `target` from `dir`, read from the real file system (the oracle
/// the door's in-memory resolution must agree with): `None` when it leaves `root` or loops.
fn physical(root: &Path, dir: &Path, target: &Path) -> Option<PathBuf> {
    use std::path::Component;
    let mut current = dir.to_path_buf();
    let mut pending: std::collections::VecDeque<Component<'static>> = std::collections::VecDeque::new();
    let owned = |p: &Path| -> Option<Vec<Component<'static>>> {
        p.components()
            .map(|c| match c {
                Component::RootDir | Component::Prefix(_) => None,
                Component::CurDir => Some(Component::CurDir),
                Component::ParentDir => Some(Component::ParentDir),
                Component::Normal(n) => Some(Component::Normal(Box::leak(n.to_owned().into_boxed_os_str()))),
            })
            .collect()
    };
    pending.extend(owned(target)?);
    let mut links = 0;
    while let Some(step) = pending.pop_front() {
        match step {
            Component::CurDir => {}
            Component::ParentDir => {
                if current == root || !current.pop() || !current.starts_with(root) {
                    return None;
                }
            }
            Component::Normal(name) => {
                let next = current.join(name);
                match std::fs::symlink_metadata(&next) {
                    Ok(meta) if meta.file_type().is_symlink() => {
                        links += 1;
                        if links > 40 {
                            return None;
                        }
                        let mut rest: std::collections::VecDeque<_> = owned(&std::fs::read_link(&next).ok()?)?.into();
                        rest.append(&mut pending);
                        pending = rest;
                    }
                    _ => current = next,
                }
            }
            _ => return None,
        }
    }
    current.starts_with(root).then_some(current)
}

fn write<T>(door: &Door<T>, root: &Path) {
    door.materialize(root, |_, _| Ok::<_, std::io::Error>(b"x".to_vec()), |_, e| e)
        .expect("an accepted tree is written");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Trees of arbitrary entries, added one by one into directories added before: whatever
    /// the door accepts is written inside the root, and every link resolves inside it.
    #[test]
    fn an_accepted_tree_is_written_inside_its_root(entries in prop::collection::vec((0usize..8, entry_name(), gen_kind()), 0..24)) {
        let mut door = Door::new();
        let mut dirs = vec![String::new()];
        for (dir, name, kind) in entries {
            let dir = dirs[dir % dirs.len()].clone();
            let kind = match kind {
                Gen::Dir => Kind::Dir,
                Gen::File => Kind::File { executable: false },
                Gen::Link(target) => Kind::Symlink { target },
            };
            let is_dir = kind == Kind::Dir;
            if let Ok(path) = door.add(&dir, name.as_bytes(), kind, ()) {
                prop_assert!(name::check(name.as_bytes(), false).is_ok());
                if is_dir {
                    dirs.push(path);
                }
            }
        }
        if door.check_links().is_ok() {
            let place = Place::new();
            write(&door, &place.root);
            place.assert_contained();
        }
    }

    /// Archives of arbitrary paths (any `/`, `..`, `.git`), kinds (hard links, FIFOs,
    /// devices) and link targets: whatever the door takes is written inside the root.
    #[test]
    fn an_accepted_archive_is_written_inside_its_root(items in prop::collection::vec((prop::collection::vec(entry_name(), 1..4), 0u8..6, target()), 0..16)) {
        let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast()));
        let mut kinds = Vec::new();
        for (parts, kind, link) in &items {
            let path = parts.join("/");
            let mut header = tar::Header::new_gnu();
            let bytes = path.as_bytes();
            let len = bytes.len().min(100);
            header.as_gnu_mut().unwrap().name[..len].copy_from_slice(&bytes[..len]);
            let link = link.as_bytes();
            let link_len = link.len().min(100);
            header.as_gnu_mut().unwrap().linkname[..link_len].copy_from_slice(&link[..link_len]);
            let kind = [tar::EntryType::Regular, tar::EntryType::Directory, tar::EntryType::Symlink,
                tar::EntryType::Symlink, tar::EntryType::Link, tar::EntryType::Fifo][usize::from(*kind)];
            kinds.push(kind);
            header.set_entry_type(kind);
            header.set_mode(0o644);
            let body: &[u8] = if kind == tar::EntryType::Regular { b"content" } else { b"" };
            header.set_size(body.len() as u64);
            header.set_cksum();
            builder.append(&header, body).unwrap();
        }
        let layer = builder.into_inner().unwrap().finish().unwrap();
        if let Ok(door) = read_tar_gz(&layer, 1 << 20, 1 << 20, None) {
            prop_assert!(!kinds.contains(&tar::EntryType::Link) && !kinds.contains(&tar::EntryType::Fifo));
            for (path, _, _) in door.entries() {
                prop_assert!(path.split('/').all(|c| name::check(c.as_bytes(), false).is_ok()), "{}", path);
            }
            let place = Place::new();
            write(&door, &place.root);
            place.assert_contained();
        }
    }
}

/// A scratch git repository with one blob, for asking real git which paths it refuses.
struct Git {
    dir: tempfile::TempDir,
    blob: String,
}

impl Git {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let git =
            |args: &[&str]| std::process::Command::new("git").args(args).current_dir(dir.path()).output().unwrap();
        assert!(git(&["init", "-q"]).status.success(), "git init");
        let out = std::process::Command::new("git")
            .args(["hash-object", "-w", "--stdin"])
            .current_dir(dir.path())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let blob = String::from_utf8(out.stdout).unwrap().trim().to_owned();
        Self { dir, blob }
    }

    /// Whether `git update-index` (git's `verify_path`, both protections on) takes `path`.
    fn takes(&self, path: &str, symlink: bool) -> bool {
        let index = self.dir.path().join(format!("index-{}", rand::random::<u64>()));
        let mode = if symlink { "120000" } else { "100644" };
        let status = std::process::Command::new("git")
            .args(["-c", "core.protectHFS=true", "-c", "core.protectNTFS=true", "update-index", "--add", "--cacheinfo"])
            .arg(format!("{mode},{},{path}", self.blob))
            .env("GIT_INDEX_FILE", &index)
            .current_dir(self.dir.path())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        let _ = std::fs::remove_file(index);
        status.success()
    }
}

thread_local! {
    static GIT: Git = Git::new();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 384, ..ProptestConfig::default() })]

    /// Every path real git refuses to put in its index is refused by the door: entry by entry
    /// as a git tree reaches it (each name, with the link rules for a link's path).
    #[test]
    fn every_path_git_refuses_the_door_refuses(parts in prop::collection::vec(entry_name(), 1..4), symlink in any::<bool>()) {
        let path = parts.join("/");
        prop_assume!(!path.contains('\0'));
        let mut door: Door<()> = Door::new();
        let kind = if symlink { Kind::Symlink { target: "a".into() } } else { Kind::File { executable: false } };
        let components: Vec<&str> = path.split('/').collect();
        let (last, dirs) = components.split_last().unwrap();
        let mut dir = String::new();
        let mut door_takes = true;
        for part in dirs {
            match door.add(&dir, part.as_bytes(), Kind::Dir, ()) {
                Ok(at) => dir = at,
                Err(_) => { door_takes = false; break; }
            }
        }
        door_takes = door_takes && door.add(&dir, last.as_bytes(), kind, ()).is_ok();
        if door_takes {
            prop_assert!(GIT.with(|git| git.takes(&path, symlink)), "the door takes {:?} (link: {}), git refuses it", path, symlink);
        }
    }
}

#[test]
fn links_are_resolved_as_the_kernel_does_against_the_tree_never_the_host() {
    let mut door: Door<()> = Door::new();
    door.add_dirs("charts/leak").unwrap();
    door.add_path("charts/leak/values.yaml", Kind::File { executable: false }, ()).unwrap();
    let link = |door: &mut Door<()>, name: &str, target: &str| {
        door.add("charts/leak", name.as_bytes(), Kind::Symlink { target: target.into() }, ()).unwrap();
    };
    for (name, target) in [("s", "."), ("t", "s/.."), ("u", "t/.."), ("v", "u/.."), ("values", "s/values.yaml")] {
        link(&mut door, name, target);
    }
    link(&mut door, "loop", "loop/x");
    let at = |target: &str| door.resolve("charts/leak", target);
    assert_eq!(at("values").as_deref(), Ok("charts/leak/values.yaml"));
    // Lexically all inside: `t/..` is the chart itself; followed, `s` is the chart, so `t` is
    // charts/ and `u` the root, and `v` its parent.
    assert_eq!(at("t").as_deref(), Ok("charts"));
    assert_eq!(at("u").as_deref(), Ok(""));
    assert!(at("v").is_err());
    assert!(at("u/charts/leak/v/etc").is_err());
    assert!(at("loop").unwrap_err().contains("loop"));
    assert!(at("/etc/passwd").is_err());
    assert_eq!(at("missing/../values.yaml").as_deref(), Ok("charts/leak/values.yaml"));
    let refusal = door.check_links().unwrap_err();
    assert_eq!(refusal.path, "charts/leak/loop", "the first bad link in path order: {refusal}");
}

#[test]
fn entries_twice_or_below_a_file_and_absolute_links_are_refused_by_path() {
    let mut door: Door<()> = Door::new();
    door.add("", b"a", Kind::Dir, ()).unwrap();
    let twice = door.add("", b"a", Kind::File { executable: false }, ()).unwrap_err();
    assert_eq!((twice.path.as_str(), twice.reason.contains("twice")), ("a", true), "{twice}");
    door.add("a", b"f", Kind::File { executable: false }, ()).unwrap();
    assert!(door.add("a/f", b"g", Kind::File { executable: false }, ()).is_err());
    assert!(door.add_path("a/f/g", Kind::File { executable: false }, ()).is_err());
    let up = door.add("a", b"..", Kind::Dir, ()).unwrap_err();
    assert_eq!(up.path, "a/..", "{up}");
    let abs = door.add("a", b"l", Kind::Symlink { target: "/etc/os-release".into() }, ()).unwrap_err();
    assert!(abs.reason.contains("absolute"), "{abs}");
    assert!(door.add_path("/etc/x", Kind::File { executable: false }, ()).is_err());
    assert!(door.add_path("a/../../x", Kind::File { executable: false }, ()).is_err());
    assert_eq!(door.add_path("./a/./b/", Kind::Dir, ()).unwrap(), "a/b");
    // A link below a directory named as `.gitmodules` reads: git refuses the link's path.
    door.add("", b".gitmodules", Kind::Dir, ()).unwrap();
    assert!(door.add(".gitmodules", b"l", Kind::Symlink { target: "x".into() }, ()).is_err());
}

#[test]
fn archives_cut_or_corrupt_are_refused() {
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast()));
    let mut header = tar::Header::new_gnu();
    header.set_path("chart/Chart.yaml").unwrap();
    header.set_size(5);
    header.set_cksum();
    builder.append(&header, &b"name:"[..]).unwrap();
    let whole = builder.into_inner().unwrap().finish().unwrap();
    assert!(read_tar_gz(&whole, 1 << 20, 1 << 20, None).is_ok());
    for cut in 1..whole.len() {
        assert!(read_tar_gz(&whole[..cut], 1 << 20, 1 << 20, None).is_err(), "cut at {cut} accepted");
    }
    let mut flipped = whole.clone();
    let at = flipped.len() - 6;
    flipped[at] ^= 0xff;
    assert!(read_tar_gz(&flipped, 1 << 20, 1 << 20, None).is_err(), "a bad CRC is accepted");
}

#[test]
fn the_git_oracle_refuses_what_git_refuses_and_takes_the_rest() {
    GIT.with(|git| {
        assert!(git.takes("a/b.yaml", false) && git.takes(".gitmodules", false));
        for refused in ["../x", "a/../b", ".git/x", ".GIT", "git~1/x", ".git. ", "a//b"] {
            assert!(!git.takes(refused, false), "git takes {refused:?}");
        }
        assert!(!git.takes(".gitmodules", true), "git takes a link named .gitmodules");
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// The door's resolution of every link agrees with the kernel's on the tree written: the
    /// same path when the door takes the link, none when it refuses it.
    #[test]
    fn links_resolve_as_the_kernel_resolves_them_once_written(entries in prop::collection::vec((0usize..8, entry_name(), gen_kind()), 0..24)) {
        let mut door = Door::new();
        let mut dirs = vec![String::new()];
        let mut links = Vec::new();
        for (dir, name, kind) in entries {
            let dir = dirs[dir % dirs.len()].clone();
            let (is_dir, target) = match &kind {
                Gen::Dir => (true, None),
                Gen::File => (false, None),
                Gen::Link(target) => (false, Some(target.clone())),
            };
            let kind = match kind {
                Gen::Dir => Kind::Dir,
                Gen::File => Kind::File { executable: false },
                Gen::Link(target) => Kind::Symlink { target },
            };
            if let Ok(path) = door.add(&dir, name.as_bytes(), kind, ()) {
                if is_dir {
                    dirs.push(path);
                } else if let Some(target) = target {
                    links.push((dir, target));
                }
            }
        }
        let place = Place::new();
        write(&door, &place.root);
        for (dir, target) in links {
            let by_door = door.resolve(&dir, &target).ok().map(|p| if p.is_empty() { place.root.clone() } else { place.root.join(p) });
            let by_kernel = physical(&place.root, &place.root.join(&dir), Path::new(&target));
            prop_assert_eq!(by_door, by_kernel, "{:?} from {:?}", target, dir);
        }
    }
}

#[test]
fn a_link_target_of_4_mib_is_refused_when_added_and_shown_cut() {
    let started = std::time::Instant::now();
    let mut door: Door<()> = Door::new();
    door.add("", b"app", Kind::Dir, ()).unwrap();
    let target = "a/".repeat(2 << 20);
    let refusal = door.add("app", b"l", Kind::Symlink { target }, ()).unwrap_err();
    assert_eq!(refusal.path, "app/l");
    assert!(refusal.reason.contains("PATH_MAX"), "{refusal}");
    assert!(refusal.to_string().len() < 400, "the target is shown cut: {} bytes", refusal.to_string().len());
    let longest = "a/".repeat((super::PATH_MAX - 1) / 2) + "b";
    assert_eq!(longest.len(), super::PATH_MAX - 1);
    door.add("app", b"m", Kind::Symlink { target: longest }, ()).unwrap();
    door.check_links().unwrap();
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "{:?}", started.elapsed());
}

#[test]
fn a_name_over_name_max_is_refused_before_anything_below_it() {
    let mut door: Door<()> = Door::new();
    let name = "n".repeat(60_000);
    let refusal = door.add("", name.as_bytes(), Kind::Dir, ()).unwrap_err();
    assert!(refusal.reason.contains("NAME_MAX") && refusal.reason.contains("60000"), "{refusal}");
    assert!(refusal.path.len() < 300 && refusal.path.ends_with("(60000 bytes)"), "{}", refusal.path);
    assert!(door.add_path(&format!("{name}/x"), Kind::File { executable: false }, ()).is_err());
    assert_eq!(door.entries().count(), 0);
    // A path under PATH_MAX made of names under NAME_MAX, then one more name past it.
    let part = "p".repeat(250);
    let mut dir = String::new();
    while dir.len() + 251 < super::PATH_MAX {
        dir = door.add(&dir, part.as_bytes(), Kind::Dir, ()).unwrap();
    }
    let long = door.add(&dir, part.as_bytes(), Kind::Dir, ()).unwrap_err();
    assert!(long.reason.contains("the path is"), "{long}");
}

#[test]
fn the_paths_and_targets_held_are_capped() {
    let bounds = super::Bounds { max_bytes: 64 * 1024, deadline: None };
    let mut door: Door<()> = Door::bounded(bounds);
    let mut added = 0u64;
    let refusal = loop {
        match door.add("", format!("{added:0>200}").as_bytes(), Kind::File { executable: false }, ()) {
            Ok(_) => added += 1,
            Err(refusal) => break refusal,
        }
    };
    assert!(refusal.reason.contains("max_tree_bytes"), "{refusal}");
    let each = 400 + super::ENTRY_COST;
    assert_eq!(added, 64 * 1024 / each, "entries of {each} bytes each within 64 KiB");
}

#[test]
fn a_long_chain_of_links_resolves_in_linear_time() {
    // 40 links, each through 800 names and back: 64,000 components in all. The walk reads each
    // once; joining the whole path at each component (the walk before) took quadratic time.
    let started = std::time::Instant::now();
    let mut door: Door<()> = Door::new();
    door.add("", b"d", Kind::Dir, ()).unwrap();
    for i in 0..super::MAX_LINKS {
        let target = format!("{}{}l{}", "a/".repeat(800), "../".repeat(800), i + 1);
        door.add("d", format!("l{i}").as_bytes(), Kind::Symlink { target }, ()).unwrap();
    }
    door.add("d", format!("l{}", super::MAX_LINKS).as_bytes(), Kind::File { executable: false }, ()).unwrap();
    assert_eq!(door.resolve("d", "l0").as_deref(), Ok("d/l40"));
    assert!(door.resolve("d", "l0/x/../..").is_ok());
    door.check_links().unwrap();
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "{:?}", started.elapsed());
}

#[test]
fn a_pass_past_its_deadline_is_refused() {
    let deadline = super::Deadline::after(std::time::Duration::ZERO);
    let mut door: Door<()> = Door::bounded(super::Bounds { deadline: Some(deadline), ..super::Bounds::default() });
    door.add("", b"l", Kind::Symlink { target: "a/".repeat(2000) }, ()).unwrap();
    let refusal = door.check_links().unwrap_err();
    assert_eq!(refusal.path, "l");
    assert!(
        refusal.reason.starts_with("resolving it passed its deadline") && refusal.reason.contains("[render] timeout"),
        "{refusal}"
    );
    let adding = (0..2000).find_map(|i| door.add("", format!("f{i}").as_bytes(), Kind::Dir, ()).err());
    assert!(adding.is_some_and(|r| r.reason.contains("[render] timeout")), "adding stops at the deadline too");
}

#[test]
fn archive_paths_and_link_targets_must_be_utf8() {
    let archive = |name: &[u8], kind: tar::EntryType, link: &[u8]| {
        let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast()));
        let mut header = tar::Header::new_gnu();
        header.as_gnu_mut().unwrap().name[..name.len()].copy_from_slice(name);
        header.as_gnu_mut().unwrap().linkname[..link.len()].copy_from_slice(link);
        header.set_entry_type(kind);
        header.set_size(0);
        header.set_cksum();
        builder.append(&header, &b""[..]).unwrap();
        builder.into_inner().unwrap().finish().unwrap()
    };
    let bad_name = read_tar_gz(&archive(b"app/\xffx.yaml", tar::EntryType::Regular, b""), 1 << 20, 1 << 20, None);
    let error = bad_name.unwrap_err().to_string();
    assert!(error.contains("app/\u{fffd}x.yaml") && error.contains("path is not UTF-8"), "{error}");
    let bad_target = read_tar_gz(&archive(b"app/l", tar::EntryType::Symlink, b"\xfe.yaml"), 1 << 20, 1 << 20, None);
    let error = bad_target.unwrap_err().to_string();
    assert!(error.contains("app/l") && error.contains("target is not UTF-8"), "{error}");
    assert!(
        read_tar_gz(&archive("app/ü.yaml".as_bytes(), tar::EntryType::Regular, b""), 1 << 20, 1 << 20, None).is_ok()
    );
}

#[test]
fn many_links_into_one_long_chain_are_refused_past_the_budget() {
    // 40 links of 1,600 components each, and 2,000 links into its start: 128 million
    // components if each were walked; the check stops at its budget of 1 MiB.
    let bounds = super::Bounds { max_bytes: 1 << 20, deadline: None };
    let mut door: Door<()> = Door::bounded(bounds);
    door.add("", b"d", Kind::Dir, ()).unwrap();
    for i in 0..super::MAX_LINKS {
        let target = format!("{}{}c{}", "a/".repeat(800), "../".repeat(800), i + 1);
        door.add("d", format!("c{i}").as_bytes(), Kind::Symlink { target }, ()).unwrap();
    }
    for i in 0..2000 {
        door.add("d", format!("x{i}").as_bytes(), Kind::Symlink { target: "c0".into() }, ()).unwrap();
    }
    let started = std::time::Instant::now();
    let refusal = door.check_links().unwrap_err();
    assert!(refusal.reason.contains("max_tree_bytes"), "{refusal}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "{:?}", started.elapsed());
}
