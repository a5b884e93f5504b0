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
        "namespace = \"{dir}\"\nservice_account = \"deployer\"\nref = \"prod\"\n[sync_set.substitute]\nvars = { dir = \"{path}\", keep = \"${x}\" }\n",
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

#[test]
fn placeholders_from_the_tree_cannot_choose_identity_credentials_or_cluster() {
    let cases = [
        ("service_account", "service_account = \"{dir}\"\n"),
        ("cluster", "cluster = \"{path}\"\n"),
        ("substitute.from", "[sync_set.substitute]\nfrom = [\"Secret/{dir}/vars\"]\n"),
        ("decryption", "[sync_set.decryption]\nage_key_file = \"/keys/{dir}.txt\"\n"),
        ("inventory", "[sync_set.inventory]\nnamespace = \"{dir}\"\n"),
        ("git", "[sync_set.git]\nssh_key_file = \"/keys/{path}\"\n"),
    ];
    for (key, extra) in cases {
        let message = load_error(&set(extra));
        assert!(
            message.contains(&format!("line 1: sync_set[0].{key}: cannot hold `{{dir}}` or `{{path}}`")),
            "{message}"
        );
    }
    // Other keys may hold them.
    assert!(parse(&set("[sync_set.substitute]\nvars = { app = \"{dir}\" }\n")).is_ok());
}

#[test]
fn a_namespace_from_a_directory_needs_a_service_account_or_a_pattern() {
    let message = load_error(&set("namespace = \"{dir}\"\n"));
    assert!(message.contains("sync_set[0].namespace: holds `{dir}` or `{path}`"), "{message}");
    assert!(load_error(&set("namespace = \"{dir}\"\nservice_account = \"\"\n")).contains("sync_set[0].namespace"));
    assert!(parse(&set("namespace = \"{dir}\"\nservice_account = \"deployer\"\n")).is_ok());
    let default = format!("[daemon]\ndefault_service_account = \"tenant\"\n{}", set("namespace = \"{dir}\"\n"));
    assert!(parse(&default).is_ok());

    let config = parse(&set("namespace = \"{dir}\"\nnamespaces = \"team-*\"\n")).unwrap();
    assert_eq!(config.sets[0].namespaces, ["team-*"]);
    let units = config.expand(0, &dirs(&["team-a"])).unwrap();
    assert_eq!(units[0].namespace, "team-a");
    let message = config.expand(0, &dirs(&["team-a", "kube-system"])).unwrap_err().to_string();
    assert!(
        message.contains("sync_set[0].namespaces: the namespace `kube-system` of unit `apps-kube-system`"),
        "{message}"
    );
    assert!(message.contains("(directory `apps/kube-system`)"), "{message}");
    let message = load_error(&set("namespaces = [\"Team_*\"]\n"));
    assert!(message.contains("sync_set[0].namespaces: `Team_*`"), "{message}");
}

#[test]
fn expansion_is_one_pass_so_a_directory_named_like_a_placeholder_stays_literal() {
    let text = set("[sync_set.substitute]\nvars = { d = \"{dir}\", p = \"{path}\" }\n").replace("apps-{dir}", "apps");
    let config = parse(&text).unwrap();
    let units = config.expand(0, &dirs(&["{path}"])).unwrap();
    assert_eq!(units[0].substitute.vars["d"], "{path}", "the directory's name is not expanded again");
    assert_eq!(units[0].substitute.vars["p"], "apps/{path}");
}

#[test]
fn depends_on_in_a_set_template_is_refused() {
    let text = format!("{}{}", super::tests::MINIMAL, set("depends_on = [\"shop\"]\n"));
    let message = load_error(&text);
    assert!(message.contains("sync_set[0].depends_on: is not supported in a set's template"), "{message}");
}

#[test]
fn prune_removed_keeps_the_guards_unless_the_set_says_unguarded() {
    let config = parse(&set("prune_removed = true\n")).unwrap();
    assert!(config.sets[0].prune_removed && !config.sets[0].prune_removed_unguarded);
    let config = parse(&set("prune_removed = true\nprune_removed_unguarded = true\n")).unwrap();
    assert!(config.sets[0].prune_removed_unguarded);
    let message = load_error(&set("prune_removed_unguarded = 1\n"));
    assert!(message.contains("sync_set[0].prune_removed_unguarded: must be true or false"), "{message}");
}

/// `[[sync]]` unit `web` of the sets' repository, with `extra` lines.
fn web(extra: &str) -> String {
    format!("[[sync]]\nname = \"web\"\nrepo = \"https://git.example.com/apps.git\"\npath = \"web\"\n{extra}\n")
}

#[test]
fn depends_on_may_name_a_unit_a_set_makes_resolved_when_the_set_expands() {
    let text =
        format!("{}{}", web("depends_on = [\"apps-shop\", { unit = \"apps-cart\", ready_expr = \"true\" }]"), set(""));
    let config = parse(&text).unwrap();
    assert!(config.units[0].depends_on.is_empty(), "resolved only when the set expands");
    let before = config.with_sets(&[Vec::new()]).unwrap();
    assert_eq!(before.units[0].depends_on_unmade, ["apps-shop", "apps-cart"], "no unit made yet: waited for");

    let units = config.expand(0, &dirs(&["cart", "shop"])).unwrap();
    let with = config.with_sets(&[units]).unwrap();
    let web = with.unit("web").unwrap();
    let deps: Vec<(&str, Option<&str>)> =
        web.depends_on.iter().map(|d| (d.unit.as_str(), d.ready_expr.as_deref())).collect();
    assert_eq!(deps, [("apps-shop", None), ("apps-cart", Some("true"))]);
    assert!(web.depends_on_unmade.is_empty());
    assert_eq!(web.depends_on[0].inventory.name, "gitward-apps-shop");
    assert_eq!(web.depends_on[0].path, "apps/shop");
    assert!(web.depends_on[0].same_source, "same repository and ref");
}

#[test]
fn a_name_no_set_makes_after_expansion_is_an_error_naming_the_entry() {
    let config = parse(&format!("{}{}", web("depends_on = [\"apps-gone\"]"), set(""))).unwrap();
    let units = config.expand(0, &dirs(&["cart", "shop"])).unwrap();
    let error = config.with_sets(&[units]).unwrap_err().to_string();
    assert!(error.contains("sync[0].depends_on"), "{error}");
    assert!(
        error.contains("no unit named `apps-gone`: sync_set[0] (`apps-{dir}`) made apps-cart, apps-shop"),
        "{error}"
    );
}

#[test]
fn a_name_no_unit_has_and_no_set_could_make_is_refused_at_load() {
    let error = load_error(&format!("{}{}", web("depends_on = [\"shop\"]"), set("")));
    assert!(error.contains("no unit named `shop` (units: web; sync sets make: apps-{dir})"), "{error}");
    let notify = "[[notify]]\nkind = \"webhook\"\nurl = \"https://h\"\nunits = [\"shop\"]\n";
    let error = load_error(&format!("{}{}{notify}", web(""), set("")));
    assert!(error.contains("notify[0].units: no [[sync]] unit is named `shop`, nor can a sync set make it"), "{error}");
}

#[test]
fn notify_units_may_name_a_unit_a_set_makes() {
    let notify = "[[notify]]\nkind = \"webhook\"\nurl = \"https://h\"\nunits = [\"apps-shop\"]\n";
    let config = parse(&format!("{}{}{notify}", web(""), set(""))).unwrap();
    let units = config.expand(0, &dirs(&["shop"])).unwrap();
    let with = config.with_sets(&[units]).unwrap();
    assert!(with.notify[0].wants("apps-shop", NotifyEvent::Failed));
    let units = config.expand(0, &dirs(&["cart"])).unwrap();
    let error = config.with_sets(&[units]).unwrap_err().to_string();
    assert!(error.contains("notify[0].units: no unit named `apps-shop`"), "{error}");
}
