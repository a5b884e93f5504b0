//! The `--help` texts of the `gitward` commands: what each prints, its exit codes and an
//! example (the `after_help` of each subcommand of [`super::Command`]; the man pages end with
//! them too).

/// `--help` text of `run`: exit codes and an example.
pub const RUN: &str = "\
Exit codes: 0 after SIGTERM or SIGINT (syncs in flight finish first), 2 when it cannot start
(config, kubeconfig, listener).

Example:
  gitward run --config /etc/gitward/config.toml
  kill -HUP $(pidof gitward)    # reload the config and sync every unit";

/// `--help` text of `sync`.
pub const SYNC: &str = "\
Prints one line per unit on stdout, e.g. `apps: applied 82edb11 (1 configured, 1 pruned, 2 unchanged)`;
logs go to stderr.

Exit codes: 0 every object applied (and with --wait, healthy); 1 an object failed or was skipped
(a Helm hook included: one that failed or did not end within health_timeout), or with --wait did
not become healthy within health_timeout; 2 the revision could not be read or
the cluster reached (nothing applied, nothing pruned); 3 a unit it depends on (depends_on) is
not ready: not synced yet, its revision not applied, not healthy or its ready_expr false
(nothing applied; --ignore-dependencies syncs anyway). A suspended unit (`suspend = true` or
`gitward suspend`) is skipped with a line saying so, exit 0, unless --include-suspended or
--revision (a rollback) names it.

Example:
  gitward sync --config config.toml --sync apps --wait";

/// `--help` text of `import`.
pub const IMPORT: &str = "\
Writes the config: a `[[sync]]` table per Flux Kustomization and HelmRelease, per Argo CD
Application and per element of an ApplicationSet list generator, a `[[sync_set]]` per
ApplicationSet git directory generator, each after a comment naming its object. Prints on stderr
`warning: <Kind namespace/name>: <field path>: <what became of it>` for each field with no
equivalent (e.g. `Kustomization flux-system/apps: spec.healthChecks: no equivalent`) and one
line counting what was written. Secrets stay references ([sync.substitute] from); credentials,
which gitward reads from files, are warnings naming the Secret.

Exit codes: 0 the config was written (with or without warnings); 2 a file could not be read or
parsed, or the cluster listed.

Example:
  gitward import flux -f clusters/production -f apps/base -o config.toml
  gitward import argocd --from-cluster -o config.toml && gitward validate --config config.toml";

/// `--help` text of `diff`.
pub const DIFF: &str = "\
Prints `revision <applied> → <compared>`, a unified diff per changed object (Secret data masked,
gitward's own labels and annotations left out), `prune Kind/ns/name` per object a sync would
delete, and `not pruned Kind/name: <why>` per Namespace or CRD a sync would refuse to delete.

Exit codes: 0 no changes, 1 changes, 2 error (as kubectl diff).

Example:
  gitward diff --config config.toml --sync apps";

/// `--help` text of `preview`.
pub const PREVIEW: &str = "\
For each unit whose render the revision changes (the unit's objects at its base and at REV compare
by digest, so a kustomize ../base, a Helm file:// dependency or a values file outside the unit's
path counts), prints what a merge would do to the live cluster (create, configure with the field
diff, would fail with the API server's message; by server-side dry run as the unit's writer), the
change's effect (objects added, changed, removed: base render against REV's), drift the cluster
already has where the change does not touch (labelled drift), and the prune with the prune
guards' verdict. Units whose render does not change are listed on one line. The base is the
revision each unit last applied, or --base. Secret values, decrypted values and values from a
`from` Secret print ***, a changed one *** (changed). -o markdown prints a pull-request comment.

Exit codes: 0 no changes, 1 changes, 2 error (as kubectl diff).

Example:
  gitward preview --config config.toml --revision pr-42 -o markdown";

/// `--help` text of `validate`.
pub const VALIDATE: &str = "\
Needs no cluster: renders (kustomize, Helm for --kube-version), parses every document and checks
what the API server would refuse: names, labels and annotations by its rules; kinds neither built
in (Kubernetes 1.35), defined by a CRD in some unit nor of a [render] api_versions group version;
an object defined twice, or by two units; Secret data that is not base64; more than 1 MiB of
ConfigMap or Secret data. Every unit of the config is read (--sync only picks what is shown), as
a CRD, a Namespace or a duplicate may be in another. Prints one line per unit on stdout, e.g.
`apps: valid 82edb11 (12 objects)`; each problem is logged on stderr with its file and document.

A namespace that no unit creates (as a Namespace object or with create_namespace) and that is not
default, kube-system, kube-public or kube-node-lease is a warning, not a problem: it may exist in
the cluster already; so is a kustomization file under a plain unit's path, whose patches are read
as objects (the warning names the config that builds it, render = \"kustomize\"). Warnings never
change the exit code; they are logged, counted on the unit's line and listed in -o json.

Writes nothing into state_dir but fetches of mirrors already there: a unit without one is fetched
into a temporary directory, removed on exit.

Exit codes: 0 every unit valid (warnings or not), 2 something invalid (or the config).

Example:
  gitward validate --config config.toml --kube-version v1.31.0 -o json";

/// `--help` text of `status`.
pub const STATUS: &str = "\
Reads the cluster only (no daemon needed): each unit's recorded revision and result and the
health of its objects now. The first line of each unit's block is its summary, e.g.
`apps: healthy 82edb11, applied 2026-11-22T22:33:29Z (4 objects: 4 healthy)`.

Exit codes: 0 every unit applied and all its objects healthy, 1 something not healthy (or never
applied, or its last sync failed), 2 error.

Example:
  gitward status --config config.toml -o json";

/// `--help` text of `suspend` and `resume`.
pub const SUSPEND: &str = "\
Sets (suspend) or removes (resume) gitward.dev/suspended, with gitward.dev/suspended-by (user@host)
and -at, on each unit's ApplySet parent. Every daemon replica sees it within seconds: a suspended
unit applies, prunes and heals nothing; its triggers are counted, the one kept is synced on resume.

Exit codes: 0 done, 2 error (a unit never synced has no parent yet: use `suspend = true`).

Example:
  gitward suspend --config config.toml apps
  gitward resume --config config.toml apps
  gitward sync --config config.toml --revision 3f2a9c1e apps    # a rollback the daemon keeps";

/// `--help` text of `reconcile`.
pub const RECONCILE: &str = "\
Writes gitward.dev/requested-at on each unit's ApplySet parent; the daemon replica running the
unit fetches and syncs it, then records gitward.dev/handled-at. Prints the unit's status line.

Exit codes: 0 applied, 1 an object not applied, 2 the sync failed as a whole, the unit is
suspended or never synced, or the request was not handled within --timeout (as `sync`): queued
behind a health wait (the daemon noted gitward.dev/request-queued; it runs when the wait
ends), or no daemon handled it.

Example:
  gitward reconcile --config config.toml apps";

/// `--help` text of `sandbox-check`.
pub const SANDBOX_CHECK: &str = "\
Each attack is made by a child gitward started as a render tool is (a scratch tree, the
binary, the sandbox layers this machine has) and watched from outside: read a file beside
its tree, write one, a TCP connection, a UDP datagram and a DNS query to loopback,
io_uring_setup, unshare(CLONE_NEWUSER), ptrace of a child. Prints the sandbox's layers, then
one line per attack, e.g. `tcp: stopped`; with --off the same unconfined, to see that each
attack works where a layer does not stop it (a container runtime's own seccomp profile may).

Exit codes: 0 every attack stopped, 1 one escaped, 2 a probe did not run (the sandbox cannot
be used here, a file or socket could not be made).

Example (in gitward's Pod):
  kubectl -n gitward-system exec deploy/gitward -- gitward sandbox-check";

/// `--help` text of `completions`.
pub const COMPLETIONS: &str = "\
Prints the script on stdout; it completes the commands, their options and the values of options
with a fixed set (--output, --log-format). Exit codes: 0 printed, 2 an unknown shell.

Example:
  gitward completions bash > /etc/bash_completion.d/gitward
  gitward completions zsh > \"${fpath[1]}/_gitward\"
  gitward completions fish > ~/.config/fish/completions/gitward.fish";

/// `--help` text of `man`.
pub const MAN: &str = "\
Writes gitward.1 (every command, its options and exit codes) and gitward-<command>.1 for each
command, in roff, and prints each path on stdout. Exit codes: 0 written, 2 the directory could
not be made or a page written.

Example:
  gitward man /usr/local/share/man/man1 && mandb
  gitward man /tmp/pages && man -l /tmp/pages/gitward-sync.1";

/// `--help` text of `version`.
pub const VERSION: &str = "\
Prints `gitward <version>`, `commit <sha>` (`unknown` when built without git) and one line of the
render tools gitward's tests and image pin (kustomize, Helm, sops). Exit code 0.

Example:
  gitward version";

/// `--help` text of `schema`.
pub const SCHEMA: &str = "\
Prints the JSON Schema (draft 2020-12) of the config file on stdout, generated from the types
the config is parsed into, each key with its description. Editors that read TOML with a schema
(taplo, Even Better TOML) use it through the `#:schema ./schema/config.schema.json` line at the
top of config.toml; `check-jsonschema` validates a config with it. Exit code 0.

Example:
  gitward schema > schema/config.schema.json
  check-jsonschema --schemafile schema/config.schema.json /etc/gitward/config.toml";

/// `--help` text of `attest verify`.
pub const ATTEST_VERIFY: &str = "\
Prints `verified: <n> attestations` per file and per unit checked in the cluster, or the first
check that failed: `chain gap: …`, `reordered: …`, `cluster id changed: …`, `… no signature
verifies with the key`, `drift since attestation sha256:…: Kind/ns/name changed …`.

Exit codes: 0 verified, 1 a check failed (named), 2 error (a file, the key, the config or the
cluster could not be read).

Example:
  gitward attest verify --key provenance.pub /var/lib/gitward/attestations/apps.jsonl
  gitward attest verify --key provenance.pub --config config.toml --sync apps
  cosign verify-blob-attestation --key provenance.pub --insecure-ignore-tlog \\
    --type https://gitward.dev/attestation/applied-revision/v1 --signature envelope.json --check-claims=false";

/// `--help` text of `attest show`.
pub const ATTEST_SHOW: &str = "\
Prints, per envelope, its payloadType, key id and digest, and its Statement as indented JSON.

Exit codes: 0 printed, 2 the input is not an envelope or JSON lines of them.

Example:
  tail -n 1 /var/lib/gitward/attestations/apps.jsonl | gitward attest show";
