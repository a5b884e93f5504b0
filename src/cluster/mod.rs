//! The cluster side: the client, discovery, the metadata-only cache and the ApplySet inventory.
//!
//! - [`connect`] builds a `kube::Client` from [`crate::config::ClusterConfig`]; [`retry`] is its
//!   bounded `Retry-After` policy.
//! - [`discovery`] resolves the kinds found in git to resources and scopes, and nothing else
//!   (DESIGN.md, Libraries: a full discovery fails whole when one aggregated API is down).
//! - [`cache`] keeps live metadata ([`LiveMeta`], module [`live`]) of the unit's members,
//!   watched per group-kind and selected by the ApplySet `part-of` label (DESIGN.md decision 1);
//!   [`feed`] runs those watches, one per kind shared by the daemon's units of a cluster.
//! - [`inventory`] reads and writes the ApplySet parent (KEP-3659); [`owner`] finds the parent
//!   (and gitward unit) of another ApplySet's id.
//! - [`registry`] holds one client per configured cluster (`[[cluster]]`), by name.
//! - [`server`] names the API server in errors of requests that got no answer, and with
//!   [`tls`] and [`denied`] says what of its certificate did not verify and whose credentials
//!   or RBAC it refused, naming the kubeconfig context and file ([`Origin`]).
//! - [`fence`] refuses a unit's writes once the Lease it runs under may have run out, and
//!   [`wire`] checks it again on each connection's writes.
//! - [`vars`] reads the ConfigMaps and Secrets of `[sync.substitute] from` and watches them.
//! - [`agent`] is the User-Agent every client sends, `gitward/<version> (<replica identity>)`.

pub mod agent;
pub(crate) mod cache;
pub(crate) mod denied;
pub(crate) mod discovery;
pub(crate) mod drift;
pub(crate) mod feed;
pub mod fence;
pub mod inventory;
pub(crate) mod live;
pub(crate) mod owner;
pub mod registry;
pub(crate) mod relist;
pub(crate) mod retry;
pub(crate) mod server;
pub(crate) mod tls;
pub mod vars;
pub(crate) mod wire;

pub use live::{LiveMeta, live_meta, live_meta_of};

use crate::config::ClusterConfig;

/// Errors reaching the cluster. Worth retrying with backoff unless the config is wrong.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kubeconfig could not be read or has no usable context.
    #[error("kubeconfig: {0}")]
    Kubeconfig(String),
    /// The client could not be built from the config (TLS, auth plugin).
    #[error("client: {0}")]
    Client(#[source] kube::Error),
    /// A discovery request failed (apart from an unknown kind, which is not an error here).
    #[error("discovery of {group_version}")]
    DiscoveryFailed {
        /// `group/version` that was being resolved.
        group_version: String,
        /// What the API server said.
        source: kube::Error,
    },
    /// The metadata watch of a group-kind failed before its first list completed.
    #[error("metadata cache of {group_kind}: {message}")]
    CacheFailed {
        /// `Kind.group` being watched.
        group_kind: String,
        /// What went wrong.
        message: String,
    },
    /// Reading or writing the ApplySet parent failed.
    #[error("inventory {parent}: {message}")]
    InventoryFailed {
        /// `Kind/ns/name` of the parent.
        parent: String,
        /// What was being done and what the API server said ([`api_message`]), one sentence.
        message: String,
    },
    /// A namespace the sync must make (`create_namespace`) could not be read or created.
    #[error("namespace {namespace}: {message}")]
    NamespaceFailed {
        /// The namespace.
        namespace: String,
        /// What was being done and what the API server said.
        message: String,
    },
    /// The ApplySet parent is to be created in a namespace that does not exist, and neither the
    /// revision (a Namespace manifest) nor `create_namespace` makes it.
    #[error(
        "inventory {parent}: namespace {namespace} does not exist: add a Namespace manifest for it to the \
         repository, set create_namespace = true, or create it"
    )]
    ParentNamespaceMissing {
        /// `Kind/ns/name` of the parent.
        parent: String,
        /// The missing namespace.
        namespace: String,
    },
    /// The ApplySet parent changed (409) or disappeared (404) since gitward read it: read it
    /// again and recompute what to write.
    #[error("inventory {parent}: changed since it was read: {message}")]
    InventoryConflict {
        /// `Kind/ns/name` of the parent.
        parent: String,
        /// What the API server said.
        message: String,
    },
    /// A ConfigMap or Secret of `[sync.substitute] from` could not be read (missing,
    /// forbidden) or holds a value that is not text: the revision is refused until it can.
    #[error("{object}: cannot read its variables: {message}")]
    VariablesUnreadable {
        /// `ConfigMap/<namespace>/<name>` or `Secret/<namespace>/<name>`.
        object: String,
        /// What the API server said, or what is wrong with the value.
        message: String,
    },
    /// The ApplySet parent exists but belongs to another tool or ApplySet.
    #[error("inventory {parent}: {message}")]
    InventoryForeign {
        /// `Kind/ns/name` of the parent.
        parent: String,
        /// Why it cannot be used.
        message: String,
    },
}

/// `Result` alias of this module.
pub type Result<T> = std::result::Result<T, Error>;

/// Builds a client: the config's kubeconfig and context if set, else `kube::Config::infer`,
/// which tries `$KUBECONFIG`, then `~/.kube/config`, then the in-cluster service account.
///
/// kube's own default retry (429/503/504, 15 times, waits up to 1000 s) is replaced by
/// [`retry::RetryAfter`]: `Retry-After` on 429 and 5xx honoured as client-go does, at most
/// [`retry::MAX_RETRIES`] retries within [`retry::DEADLINE`] per request. kube 5 boxes its
/// service stack, which tower's retry layer cannot clone, so a `Buffer` (a channel to one task
/// driving the stack) makes it cloneable. Requests carry the user agent `gitward/<version>
/// (<process identity>)` ([`agent::process_identity`]), visible in the apiserver's audit log.
pub async fn connect(cfg: &ClusterConfig) -> Result<kube::Client> {
    connect_as(cfg, &agent::user_agent(&agent::process_identity())).await
}

/// [`connect`] with another User-Agent: a sharded replica sends `gitward/<version>
/// (<identity>)`, so the audit log shows which replica applied what.
///
/// Errors: as [`connect`], and [`Error::Client`] when `user_agent` is not a valid header value.
pub async fn connect_as(cfg: &ClusterConfig, user_agent: &str) -> Result<kube::Client> {
    assemble(prepare(cfg, user_agent, None).await?, Origin::of(cfg), &fence::Fence::unfenced())
}

/// [`connect`] for the writes of a unit that names a ServiceAccount: every request carries
/// `Impersonate-User: system:serviceaccount:<namespace>:<name>` (kube's `impersonate`; the
/// API server then authorizes it as that ServiceAccount and its groups, and the audit log
/// records both users) and `user_agent` (the replica's, [`agent::user_agent`], as its other
/// clients). gitward's own identity needs `impersonate` on that ServiceAccount.
///
/// Its writes are checked by `fence` ([`fence::FenceLayer`]; [`fence::Fence::unfenced`] for
/// none).
///
/// Errors: as [`connect_as`].
pub async fn connect_impersonating(
    cfg: &ClusterConfig,
    namespace: &str,
    service_account: &str,
    fence: &fence::Fence,
    user_agent: &str,
) -> Result<kube::Client> {
    let user = format!("system:serviceaccount:{namespace}:{service_account}");
    assemble(prepare(cfg, user_agent, Some(user)).await?, Origin::of(cfg), fence)
}

/// The kube config of [`connect_as`], impersonating `impersonate` when given: read from the
/// kubeconfig, kube's own retry off, `user_agent` added.
pub(crate) async fn prepare(
    cfg: &ClusterConfig,
    user_agent: &str,
    impersonate: Option<String>,
) -> Result<kube::Config> {
    let user_agent = http::HeaderValue::from_str(user_agent)
        .map_err(|e| Error::Client(kube::Error::HttpError(http::Error::from(e))))?;
    let kube_error = |e: &(dyn std::error::Error + 'static)| Error::Kubeconfig(crate::telemetry::error_chain(e));
    let mut config = match (&cfg.kubeconfig, &cfg.context) {
        (None, None) => kube::Config::infer().await.map_err(|e| none_found().unwrap_or_else(|| kube_error(&e)))?,
        (path, context) => {
            let options = kube::config::KubeConfigOptions { context: context.clone(), ..Default::default() };
            let kubeconfig = match path {
                Some(p) if !p.exists() => {
                    return Err(Error::Kubeconfig(format!(
                        "{} does not exist: correct `kubeconfig` in the config file's [cluster] table, or leave it \
                         out to use $KUBECONFIG or ~/.kube/config",
                        p.display()
                    )));
                }
                Some(p) => kube::config::Kubeconfig::read_from(p),
                None => kube::config::Kubeconfig::read(),
            }
            .map_err(|e| none_found().unwrap_or_else(|| kube_error(&e)))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &options).await.map_err(|e| kube_error(&e))?
        }
    };
    config.default_retry = false;
    config.headers.push((http::header::USER_AGENT, user_agent));
    if impersonate.is_some() {
        config.auth_info.impersonate = impersonate;
        config.auth_info.impersonate_groups = None;
    }
    Ok(config)
}

/// A client from `config` ([`prepare`]; `origin` as [`Origin::of`] gives it) whose writes `fence`
/// checks: [`Transport::new`] and [`Transport::client`], for a client that shares its
/// connections with no other.
///
/// Errors: [`Error::Client`] when kube cannot build its stack (TLS, auth plugin).
pub(crate) fn assemble(config: kube::Config, origin: Origin, fence: &fence::Fence) -> Result<kube::Client> {
    Ok(Transport::new(config, origin)?.client(fence))
}

/// Where a client's API server URL and credentials come from, for errors that say what to
/// check ([`server`]): the kubeconfig file, its context and the user entry that context names.
/// Printed (`Display`) as `context <name> in <file>`, `the current context in <file>` or
/// `the in-cluster config (KUBERNETES_SERVICE_HOST)`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Origin {
    /// The kubeconfig file; `None` for a pod's in-cluster config.
    pub file: Option<String>,
    /// The context: the configured one, else the kubeconfig's `current-context`; `None` when
    /// the file names none (or cannot be read).
    pub context: Option<String>,
    /// The kubeconfig's user entry (`users[].name`) that context names: whose credentials a
    /// 401 refused.
    pub user: Option<String>,
    /// The user the client impersonates (`system:serviceaccount:<ns>:<name>`), if any: whom
    /// the API server authorizes, so whom a 403 concerns.
    pub impersonate: Option<String>,
}

impl Origin {
    /// Where the API server's URL and credentials of `cfg` come from: the configured
    /// kubeconfig, else `$KUBECONFIG`, else `~/.kube/config`, else the in-cluster config; the
    /// configured context, else the file's `current-context`. Reads the kubeconfig once more
    /// (a few KiB); an unreadable one still gives its file.
    pub(crate) fn of(cfg: &ClusterConfig) -> Self {
        let home = || std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".kube/config"));
        let (file, read) = match &cfg.kubeconfig {
            Some(p) => (p.display().to_string(), kube::config::Kubeconfig::read_from(p).ok()),
            None => match (std::env::var("KUBECONFIG"), home()) {
                (Ok(env), _) if !env.is_empty() => (env, kube::config::Kubeconfig::read().ok()),
                (_, Some(h)) if h.exists() => (h.display().to_string(), kube::config::Kubeconfig::read().ok()),
                _ => return Self::default(),
            },
        };
        let context = cfg.context.clone().or_else(|| read.as_ref().and_then(|k| k.current_context.clone()));
        let user = read.zip(context.as_ref()).and_then(|(k, name)| {
            k.contexts.into_iter().find(|c| &c.name == name).and_then(|c| c.context).and_then(|c| c.user)
        });
        Self { file: Some(file), context, user, impersonate: None }
    }

    /// The user entry and where it is: `user <u> in context <c> of <file>`, or the in-cluster
    /// config's service account.
    pub(crate) fn user_in(&self) -> String {
        let Some(file) = &self.file else { return "the service account of the in-cluster config".to_owned() };
        let user = self.user.as_deref().map_or_else(|| "the user".to_owned(), |u| format!("user {u}"));
        match &self.context {
            Some(context) => format!("{user} in context {context} of {file}"),
            None => format!("{user} of the current context in {file}"),
        }
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.file, &self.context) {
            (None, _) => f.write_str("the in-cluster config (KUBERNETES_SERVICE_HOST)"),
            (Some(file), Some(context)) => write!(f, "context {context} in {file}"),
            (Some(file), None) => write!(f, "the current context in {file}"),
        }
    }
}

/// kube's own stack for one kube config (auth, headers, TLS, the HTTP connection pool) behind
/// a `Buffer` (a channel to one task driving the stack; kube 5 boxes its stack, which tower's
/// retry layer cannot clone). Its clones share that stack, so every client built over one
/// [`Transport`] shares its connections: the daemon builds one per cluster, and each fenced
/// unit's client ([`registry::Registry::fenced_client`]) is only its own layers over it. A
/// client per unit with its own stack held its own TLS context and idle connections: three
/// sharded replicas of 1,000 units rested at 185–230 MiB each (58–65 MiB sharing one).
#[derive(Clone)]
pub(crate) struct Transport {
    buffer: Buffered,
    /// The connection pool of each fence ([`wire`]): its clients' writes go there.
    pools: wire::Pools,
    default_namespace: String,
    /// The API server's URL, no trailing slash ([`server::NameServerLayer`]).
    server: String,
    /// Where that URL and the credentials come from ([`Origin`]), for the errors of
    /// [`server::NameServer`].
    origin: std::sync::Arc<Origin>,
}

/// The `Buffer` of [`Transport`] over kube's boxed stack (and of each fence's pool).
type Buffered = tower::buffer::Buffer<
    http::Request<kube::client::Body>,
    futures::future::BoxFuture<
        'static,
        std::result::Result<http::Response<Box<kube::client::DynBody>>, tower::BoxError>,
    >,
>;

impl Transport {
    /// kube's stack for `config` ([`prepare`]), started (the buffer's task is spawned: call
    /// within a Tokio runtime). Contacts nobody.
    ///
    /// Errors: [`Error::Client`] when kube cannot build its stack (TLS, auth plugin).
    pub(crate) fn new(config: kube::Config, mut origin: Origin) -> Result<Self> {
        origin.impersonate = config.auth_info.impersonate.clone();
        let server = config.cluster_url.to_string().trim_end_matches('/').to_owned();
        let default_namespace = config.default_namespace.clone();
        let slot = std::cell::RefCell::new(None);
        let buffer = tower::layer::layer_fn(|inner| {
            let buffer: Buffered = tower::buffer::Buffer::new(inner, 1024);
            *slot.borrow_mut() = Some(buffer.clone());
            buffer
        });
        let pools = wire::Pools::new(&config).map_err(Error::Client)?;
        drop(kube::client::ClientBuilder::try_from(config).map_err(Error::Client)?.with_layer(&buffer));
        let buffer = slot.into_inner().expect("with_layer applies the layer");
        Ok(Self { buffer, pools, default_namespace, server, origin: origin.into() })
    }

    /// A client over this transport whose writes `fence` checks.
    ///
    /// The stack, outermost first: [`server::NameServerLayer`], the bounded
    /// [`retry::RetryAfter`], the [`fence::FenceLayer`] (passing everything through when
    /// unfenced), then [`wire::Route`]: reads and dry runs to the shared buffer and kube's own
    /// stack, writes of a fenced client to its fence's pool, whose connections check the fence
    /// again before each write of request bytes. The fence layer sits below the retry, so a
    /// write admitted just before the deadline is checked again on each retry and never re-sent
    /// after it (kube's own retry layer would sit inside the fence; it is off).
    pub(crate) fn client(&self, fence: &fence::Fence) -> kube::Client {
        let fenced = (!fence.is_unfenced()).then(|| self.pools.of(fence));
        let route = wire::Route { shared: self.buffer.clone(), fenced };
        kube::client::ClientBuilder::new(route, self.default_namespace.clone())
            .with_layer(&stack(&self.server, &self.origin, fence))
            .build()
    }
}

/// gitward's layers over a [`Transport`], outermost first.
pub(crate) type Stack = tower::ServiceBuilder<
    tower::layer::util::Stack<
        fence::FenceLayer,
        tower::layer::util::Stack<
            tower::retry::RetryLayer<retry::RetryAfter>,
            tower::layer::util::Stack<server::NameServerLayer, tower::layer::util::Identity>,
        >,
    >,
>;

/// The layers [`Transport::client`] puts over the transport for `server` (its URL and the
/// credentials given by `origin`), the fence innermost.
pub(crate) fn stack(server: &str, origin: &std::sync::Arc<Origin>, fence: &fence::Fence) -> Stack {
    tower::ServiceBuilder::new()
        .layer(server::NameServerLayer::new(server, origin))
        .layer(tower::retry::RetryLayer::new(retry::RetryAfter::default()))
        .layer(fence.layer())
}

/// [`Error::Kubeconfig`] saying where a kubeconfig was looked for and how to give one, when
/// none of kube's places has one: `$KUBECONFIG` unset, no `~/.kube/config`, not in a pod.
/// `None` when one of them exists (kube's own error then says what is wrong with it).
fn none_found() -> Option<Error> {
    let home = std::env::var_os("HOME").map(|home| std::path::Path::new(&home).join(".kube/config"));
    let in_cluster = std::env::var_os("KUBERNETES_SERVICE_HOST").is_some();
    if std::env::var_os("KUBECONFIG").is_some() || in_cluster || home.as_ref().is_some_and(|p| p.exists()) {
        return None;
    }
    let home = home.map_or_else(|| "~/.kube/config ($HOME is not set)".to_owned(), |p| p.display().to_string());
    Some(Error::Kubeconfig(format!(
        "none found: $KUBECONFIG is not set, {home} does not exist, and this is not a pod with a service account; \
         set `kubeconfig` in the config file's [cluster] table, or export KUBECONFIG=/path/to/kubeconfig"
    )))
}

/// True when `err` is an API error with this HTTP status code. kube's `is_conflict()` misses a
/// 409 whose `reason` is empty, so compare the code (DESIGN.md, Libraries).
pub fn is_status(err: &kube::Error, code: u16) -> bool {
    matches!(err, kube::Error::Api(status) if status.code == code)
}

/// The API server's message for an API error, else the error's chain as
/// [`crate::telemetry::error_chain`] prints it: kube's own `Display` starts with its variant
/// (`ServiceError: …`, `ApiError: …`), which names nothing a user can act on.
pub fn api_message(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(status) if !status.message.is_empty() => status.message.clone(),
        other => crate::telemetry::error_chain(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_messages_carry_no_kube_variant_prefix() {
        let service = kube::Error::Service(Box::new(std::io::Error::other("connection reset by peer")));
        assert_eq!(api_message(&service), "connection reset by peer");
        let status = kube::core::Status::failure("", "Forbidden").with_code(403);
        let api = kube::Error::Api(Box::new(status));
        let text = api_message(&api);
        assert!(!text.contains("ApiError") && text.contains("Forbidden"), "{text}");
    }
}
