//! Tests of `[[sync_set]]`: its keys checked at load, and its expansion into units —
//! templates, clusters, the cap, collisions, names that are not unit names.

use super::tests::parse;
use super::*;

/// A set over `apps/*` of one repository, `extra` lines added to its table.
fn set(extra: &str) -> String {
    format!(
        "[[sync_set]]\nname = \"apps-{{dir}}\"\nrepo = \"https://git.example.com/apps.git\"\npath_glob = \"apps/*\"\n{extra}"
    )
}

fn dirs(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| format!("apps/{n}")).collect()
}

fn load_error(text: &str) -> String {
    parse(text).expect_err("config should be refused").to_string()
}

#[test]
fn a_set_alone_is_a_config_and_makes_no_unit_until_expanded() {
    let config = parse(&set("")).unwrap();
    assert!(config.units.is_empty());
    assert_eq!(config.sets.len(), 1);
    let set = &config.sets[0];
    assert_eq!((set.name.as_str(), set.path_glob.as_str()), ("apps-{dir}", "apps/*"));
    assert_eq!((set.max_units, set.prune_removed), (DEFAULT_MAX_UNITS, false));
    assert_eq!(set.source.repo, "https://git.example.com/apps.git");
    assert_eq!(set.source.path, "", "the set reads the whole tree");
}

#[test]
fn each_directory_makes_a_unit_with_its_templates_expanded() {
    let config = parse(&set(
        "namespace = \"{dir}\"\nref = \"prod\"\n[sync.substitute]\nvars = { dir = \"{dir}\", keep = \"${x}\" }\n",
    ));
    // `[sync.substitute]` inside a set is written `[sync_set.substitute]`.
    assert!(config.is_err(), "a [sync.*] table after [[sync_set]] belongs to [[sync]]");
    let text = set(
        "namespace = \"{dir}\"\nref = \"prod\"\n[sync_set.substitute]\nvars = { dir = \"{path}\", keep = \"${x}\" }\n",
    );
    let config = parse(&text).unwrap();
    let units = config.expand(0, &dirs(&["cart", "shop"])).unwrap();
    let names: Vec<&str> = units.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["apps-cart", "apps-shop"]);
    assert_eq!(units[0].namespace, "cart");
    assert_eq!(units[0].path, "apps/cart", "path defaults to the matched directory");
    assert_eq!(units[0].reference, "prod");
    assert_eq!(units[0].inventory.name, "gitward-apps-cart");
    assert_eq!(units[0].inventory.namespace, "cart");
    assert_eq!(units[1].substitute.vars["dir"], "apps/shop");
    assert_eq!(units[1].substitute.vars["keep"], "${x}", "other braces are left alone");
}

#[test]
fn a_path_template_replaces_the_default_path() {
    let config = parse(&set("path = \"{path}/overlays/prod\"\nrender = \"kustomize\"\n")).unwrap();
    let units = config.expand(0, &dirs(&["shop"])).unwrap();
    assert_eq!(units[0].path, "apps/shop/overlays/prod");
}

#[test]
fn clusters_make_one_unit_per_directory_and_cluster() {
    let text = format!(
        "[[cluster]]\nname = \"east\"\n[[cluster]]\nname = \"west\"\n{}",
        set("clusters = [\"east\", \"west\"]\n").replace("apps-{dir}", "{dir}-{cluster}")
    );
    let config = parse(&text).unwrap();
    let units = config.expand(0, &dirs(&["shop", "cart"])).unwrap();
    let made: Vec<(&str, &str)> = units.iter().map(|u| (u.name.as_str(), u.cluster.as_str())).collect();
    assert_eq!(made, [("shop-east", "east"), ("shop-west", "west"), ("cart-east", "east"), ("cart-west", "west")]);
}

#[test]
fn clusters_must_be_declared_and_not_combined_with_cluster() {
    let message = load_error(&set("clusters = [\"moon\"]\n"));
    assert!(message.contains("sync_set[0].clusters: no cluster named `moon`"), "{message}");
    let message = load_error(&set("clusters = [\"default\"]\ncluster = \"default\"\n"));
    assert!(message.contains("sync_set[0].cluster: cannot be combined with `clusters`"), "{message}");
}

#[test]
fn more_units_than_max_units_is_an_error_for_the_listing() {
    let config = parse(&set("max_units = 2\n")).unwrap();
    assert_eq!(config.expand(0, &dirs(&["a", "b"])).unwrap().len(), 2);
    let message = config.expand(0, &dirs(&["a", "b", "c"])).unwrap_err().to_string();
    assert!(message.contains("line 1: sync_set[0].max_units: 3 directories match `apps/*`"), "{message}");
    assert!(message.contains("more than max_units = 2"), "{message}");
    assert!(load_error(&set("max_units = 0\n")).contains("sync_set[0].max_units: must be a whole number, at least 1"));
}

#[test]
fn a_directory_that_makes_no_unit_name_is_an_error_naming_it() {
    let config = parse(&set("")).unwrap();
    let message = config.expand(0, &dirs(&["Shop_Front"])).unwrap_err().to_string();
    assert!(message.contains("sync_set[0].name: `apps-Shop_Front` must be lowercase"), "{message}");
    assert!(message.contains("(unit `apps-Shop_Front` of directory `apps/Shop_Front`)"), "{message}");
    let long = "x".repeat(60);
    assert!(config.expand(0, &dirs(&[&long])).unwrap_err().to_string().contains("longer than 63 characters"));
}

#[test]
fn generated_names_must_be_unique_in_the_set_and_among_all_units() {
    let config = parse(&set("").replace("apps-{dir}", "apps")).unwrap();
    let message = config.expand(0, &dirs(&["a", "b"])).unwrap_err().to_string();
    assert!(message.contains("directories `apps/a` and `apps/b` both make the unit `apps`"), "{message}");

    let text = format!("{}{}", super::tests::MINIMAL.replace("shop", "apps-shop"), set(""));
    let config = parse(&text).unwrap();
    let units = config.expand(0, &dirs(&["shop"])).unwrap();
    let message = config.with_sets(&[units]).unwrap_err().to_string();
    assert!(message.contains("sync_set[0].name: the unit `apps-shop` is also a [[sync]] unit"), "{message}");

    let text = format!("{}{}", set(""), set(""));
    let config = parse(&text).unwrap();
    let first = config.expand(0, &dirs(&["shop"])).unwrap();
    let second = config.expand(1, &dirs(&["shop"])).unwrap();
    let message = config.with_sets(&[first.clone(), second]).unwrap_err().to_string();
    assert!(message.contains("sync_set[1].name: the unit `apps-shop` is also a unit of sync_set[0]"), "{message}");
    let merged = config.with_sets(&[first, Vec::new()]).unwrap();
    assert_eq!(merged.units.len(), 1);
}

#[test]
fn the_template_is_checked_at_load() {
    let message = load_error(&set("namespce = \"{dir}\"\n"));
    assert!(message.contains("sync_set[0]: unknown field `namespce`"), "{message}");
    let message = load_error(&set("namespace = \"Bad{dir}\"\n"));
    assert!(message.contains("sync_set[0].namespace:"), "{message}");
    let message = load_error(&set("").replace("path_glob = \"apps/*\"\n", ""));
    assert!(message.contains("sync_set[0].path_glob: is required"), "{message}");
    assert!(load_error(&set("").replace("apps/*", "apps/**")).contains("`**` is not supported"));
    assert!(load_error(&set("").replace("apps/*", "../*")).contains("sync_set[0].path_glob"));
    let message = load_error(&set("").replace("apps.git\"", "{dir}.git\""));
    assert!(message.contains("sync_set[0].repo: is the one repository the set lists"), "{message}");
    let message = load_error(&set("").replace("https://git.example.com/apps.git", "oci://registry.example.com/apps:1"));
    assert!(message.contains("sync_set[0].repo: must be a git repository"), "{message}");
}
