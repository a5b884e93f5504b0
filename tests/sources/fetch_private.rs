//! gitward's own fetches, led into a private network: a chart repository on loopback (listed)
//! that redirects its archive download to an RFC 1918, CGNAT, IPv6 unique-local or
//! cluster-internal (`*.svc`, one label) URL, and a registry whose Bearer challenge names a
//! token realm there. Each is refused before any connection to the target: no test here may
//! send traffic off loopback, so the refusal's own error (naming the refused URL and its kind)
//! and the loopback servers' request counts are what is checked.

use std::sync::Arc;
use std::time::Duration;

use crate::common;
use crate::common::charts::{helm, package};
use crate::sources::charts::listed;
use crate::sources::fetch_guard::{Listener, header, response, write_config};

/// Redirect targets off loopback, each with the kind its refusal names.
const PRIVATE_TARGETS: [(&str, &str); 6] = [
    ("http://10.0.0.7:8080/demo-0.1.0.tgz", "private (RFC 1918)"),
    ("http://192.168.1.7/demo-0.1.0.tgz", "private (RFC 1918)"),
    ("http://100.64.0.7/demo-0.1.0.tgz", "shared (CGNAT"),
    ("http://[fd00::7]/demo-0.1.0.tgz", "unique local IPv6"),
    ("http://chartmuseum.tools.svc:8080/demo-0.1.0.tgz", "cluster-internal"),
    ("http://chartmuseum/demo-0.1.0.tgz", "cluster-internal"),
];

#[tokio::test]
async fn a_redirect_into_a_private_network_is_refused_before_connecting() {
    let work = tempfile::tempdir().unwrap();
    let served = work.path().join("served");
    package(work.path(), "demo", "0.1.0", &served);
    helm(&work.path().join("helm-home"), &["repo", "index", served.to_str().unwrap()], work.path());
    let index = std::fs::read(served.join("index.yaml")).unwrap();
    for (case, (target, kind)) in PRIVATE_TARGETS.into_iter().enumerate() {
        // The listed repository answers its index, and the archive with a redirect off loopback.
        let index = index.clone();
        let repository = Listener::start(Box::new(move |path, _| match path {
            "/index.yaml" => response("200 OK", "application/yaml", &index),
            _ => format!("HTTP/1.1 302 Found\r\nLocation: {target}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                .into_bytes(),
        }));
        let url = format!("http://127.0.0.1:{}", repository.port);
        let dir = work.path().join(format!("case-{case}"));
        std::fs::create_dir_all(&dir).unwrap();
        let unit = format!(
            "[[sync]]\nname = \"demo\"\nnamespace = \"default\"\n[sync.helm]\nrepo_url = \"{url}\"\nchart = \"demo\"\nrelease = \"shop\"\n"
        );
        let config = write_config(&dir, &listed(&url), &unit);
        let run = common::gitward(&["validate"], &config, Duration::from_secs(120));
        assert_eq!(run.code, Some(2), "{target}: {}", run.stderr);
        let refused = format!("redirected to {target}, a {kind}");
        assert!(run.stderr.contains(&refused), "{target}: the refusal names the target: {}", run.stderr);
        assert!(run.stderr.contains("address not in [render] chart_repositories"), "{target}: {}", run.stderr);
        let asked: Vec<String> = repository.requests().iter().map(|r| r[0].clone()).collect();
        assert_eq!(
            asked,
            ["GET /index.yaml HTTP/1.1", "GET /demo-0.1.0.tgz HTTP/1.1"],
            "{target}: the repository was asked its index and the archive once, nothing retried"
        );
    }
}

#[tokio::test]
async fn a_token_realm_in_a_private_network_is_refused_before_it_is_asked() {
    let dir = tempfile::tempdir().unwrap();
    let realms = [
        ("http://10.0.0.7/token", "private (RFC 1918)"),
        ("https://auth.registry.svc.cluster.local/token", "cluster-internal"),
        ("http://[fd00::7]:5001/token", "unique local IPv6 (fc00::/7)"),
    ];
    for (case, (realm, kind)) in realms.into_iter().enumerate() {
        let challenge = format!("Bearer realm=\"{realm}\",service=\"fake\",scope=\"repository:x/app:pull\"");
        let registry = Arc::new(Listener::start(Box::new(move |_, head| {
            assert_eq!(header(head, "authorization"), None, "no token was ever got");
            let mut out = response("401 Unauthorized", "application/json", b"{}");
            let at = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
            out.splice(at..at, format!("\r\nWWW-Authenticate: {challenge}").into_bytes());
            out
        })));
        let host = format!("127.0.0.1:{}", registry.port);
        let unit = format!("[[sync]]\nname = \"art\"\nrepo = \"oci://{host}/x/app:v1\"\npath = \"app\"\n");
        let case_dir = dir.path().join(case.to_string());
        std::fs::create_dir_all(&case_dir).unwrap();
        let config = write_config(&case_dir, &listed(&format!("oci://{host}")), &unit);
        let run = common::gitward(&["validate"], &config, Duration::from_secs(60));
        assert_eq!(run.code, Some(2), "{realm}: {}", run.stderr);
        let shown = url::Url::parse(realm).unwrap();
        let refused = format!("the token realm {}", shown.as_str().trim_end_matches('/'));
        assert!(run.stderr.contains(&refused), "{realm}: the refusal names the realm: {}", run.stderr);
        assert!(run.stderr.contains(&format!("is a {kind} address")), "{realm}: {}", run.stderr);
        assert_eq!(registry.requests().len(), 1, "{realm}: the registry was asked once: {:?}", registry.requests());
    }
}
