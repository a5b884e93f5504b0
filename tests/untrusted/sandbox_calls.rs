//! The render sandbox's system-call filter through the real `gitward sync` CLI and the real
//! apiserver: a render tool that sends a UDP datagram, sets up an `io_uring` and makes a user
//! namespace of its own writes what worked into the ConfigMap it prints. Sandboxed, none did
//! and no datagram arrived; with `sandbox = "off"` all three work, so the test can fail.

use crate::common;
use crate::sources::render::{config_text, tools_bin};

use std::net::UdpSocket;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;

/// Long enough for a cold `gitward sync` on a loaded machine: a liveness bound only.
const LIMIT: Duration = Duration::from_secs(120);

/// A "kustomize" whose build tries each call with perl (no module, `syscall` and builtins)
/// and prints a ConfigMap `escapes` in `ns` with `yes` for each that worked.
fn evil_kustomize(ns: &str, udp_port: u16) -> String {
    let udp = format!(
        "my $s; socket($s, 2, 2, 0) and send($s, 'leak', 0, pack('S n C4 x8', 2, {udp_port}, 127, 0, 0, 1)) \
         and print 'yes'"
    );
    let uring = format!("my $p = \"\\0\" x 120; print 'yes' if syscall({}, 8, $p) >= 0", libc::SYS_io_uring_setup);
    let userns = format!("print 'yes' if syscall({}, {}) == 0", libc::SYS_unshare, libc::CLONE_NEWUSER);
    format!(
        "#!/bin/bash\n\
         if [ \"$1\" = version ]; then echo v5.0.0-evil; exit 0; fi\n\
         udp=$(/usr/bin/perl -e '{}')\n\
         uring=$(/usr/bin/perl -e '{}')\n\
         userns=$(/usr/bin/perl -e '{}')\n\
         printf 'apiVersion: v1\\nkind: ConfigMap\\nmetadata:\\n  name: escapes\\n  namespace: {ns}\\ndata:\\n  udp: \"%s\"\\n  io_uring: \"%s\"\\n  userns: \"%s\"\\n' \"$udp\" \"$uring\" \"$userns\"\n",
        udp.replace('\'', "'\\''"),
        uring.replace('\'', "'\\''"),
        userns.replace('\'', "'\\''"),
    )
}

#[tokio::test]
async fn a_render_tool_that_sends_udp_sets_up_io_uring_or_unshares_is_denied_all_three() {
    let (env, ns) = common::setup_ns("sandbox-calls").await;
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let tool = dir.path().join("evil-kustomize");
    std::fs::write(&tool, evil_kustomize(&ns, udp.local_addr().unwrap().port())).unwrap();
    std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let repo = common::GitRepo::new();
    repo.push(&[("app/kustomization.yaml", "resources: []\n")], "a kustomization");
    let unit = common::unit_toml("evil", &repo.bare(), "app", &ns, "render = \"kustomize\"");
    let render = |extra: &str| {
        config_text(&dir.path().join("state"), extra, &unit).replace(
            &format!("kustomize = \"{}\"", tools_bin().join("kustomize").display()),
            &format!("kustomize = \"{}\"", tool.display()),
        )
    };
    let config = dir.path().join("gitward.toml");
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &ns);
    let mut buf = [0u8; 64];

    std::fs::write(&config, render("")).unwrap();
    let run = common::gitward(&["sync"], &config, LIMIT);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let data = configmaps.get("escapes").await.unwrap().data.unwrap_or_default();
    let said = |key: &str| data.get(key).cloned().unwrap_or_default();
    assert_eq!((said("udp"), said("io_uring"), said("userns")), (String::new(), String::new(), String::new()));
    assert!(udp.recv(&mut buf).is_err(), "no datagram left the sandbox");

    // Unconfined, the same tool makes all three calls: the assertions above can fail.
    std::fs::write(&config, render("sandbox = \"off\"")).unwrap();
    let run = common::gitward(&["sync"], &config, LIMIT);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let data = configmaps.get("escapes").await.unwrap().data.unwrap_or_default();
    let said = |key: &str| data.get(key).cloned().unwrap_or_default();
    assert_eq!((said("udp"), said("io_uring"), said("userns")), ("yes".into(), "yes".into(), "yes".into()));
    assert_eq!(udp.recv(&mut buf).ok(), Some(4), "the datagram arrived");
}
