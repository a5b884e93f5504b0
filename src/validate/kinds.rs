//! Which kinds exist without a cluster to ask: the built-in kinds of the Kubernetes release
//! k8s-openapi is built for (its `v1_35` feature), the CustomResourceDefinitions of the
//! revisions being validated, and the group versions `[render] api_versions` names.
//!
//! The built-in table is made from k8s-openapi's types — each implements
//! [`k8s_openapi::Resource`] with its group, version, kind and scope — by `builtin!`, not
//! typed by hand. Beta and alpha versions are in it as the OpenAPI spec of 1.35 has them,
//! whether or not a cluster enables them.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::Resource;
use serde_json::Value;

/// A kind is in a namespace or of the cluster: `Resource::Scope` as a value.
trait Scoped {
    /// True for namespaced kinds.
    const NAMESPACED: bool;
}

impl Scoped for k8s_openapi::NamespaceResourceScope {
    const NAMESPACED: bool = true;
}

impl Scoped for k8s_openapi::ClusterResourceScope {
    const NAMESPACED: bool = false;
}

/// One built-in kind: (group, version, kind, namespaced).
type Builtin = (&'static str, &'static str, &'static str, bool);

/// The [`Builtin`] rows of the listed k8s-openapi types, read from their `Resource` impls.
macro_rules! builtin {
    ($($path:path),* $(,)?) => {
        &[$((<$path as Resource>::GROUP, <$path as Resource>::VERSION, <$path as Resource>::KIND,
             <<$path as Resource>::Scope as Scoped>::NAMESPACED)),*]
    };
}

/// Every kind of k8s-openapi's `v1_35` that one can create: each type that implements
/// `Resource` with a namespace or cluster scope, the discovery lists (`APIGroup`, …) aside.
const BUILTIN: &[Builtin] = {
    use k8s_openapi::api::*;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
    builtin![
        admissionregistration::v1::MutatingWebhookConfiguration,
        admissionregistration::v1::ValidatingAdmissionPolicy,
        admissionregistration::v1::ValidatingAdmissionPolicyBinding,
        admissionregistration::v1::ValidatingWebhookConfiguration,
        admissionregistration::v1alpha1::MutatingAdmissionPolicy,
        admissionregistration::v1alpha1::MutatingAdmissionPolicyBinding,
        admissionregistration::v1beta1::MutatingAdmissionPolicy,
        admissionregistration::v1beta1::MutatingAdmissionPolicyBinding,
        apiserverinternal::v1alpha1::StorageVersion,
        apps::v1::ControllerRevision,
        apps::v1::DaemonSet,
        apps::v1::Deployment,
        apps::v1::ReplicaSet,
        apps::v1::StatefulSet,
        authentication::v1::SelfSubjectReview,
        authentication::v1::TokenReview,
        authorization::v1::LocalSubjectAccessReview,
        authorization::v1::SelfSubjectAccessReview,
        authorization::v1::SelfSubjectRulesReview,
        authorization::v1::SubjectAccessReview,
        autoscaling::v1::HorizontalPodAutoscaler,
        autoscaling::v2::HorizontalPodAutoscaler,
        batch::v1::CronJob,
        batch::v1::Job,
        certificates::v1::CertificateSigningRequest,
        certificates::v1alpha1::ClusterTrustBundle,
        certificates::v1beta1::ClusterTrustBundle,
        certificates::v1beta1::PodCertificateRequest,
        coordination::v1::Lease,
        coordination::v1alpha2::LeaseCandidate,
        coordination::v1beta1::LeaseCandidate,
        core::v1::Binding,
        core::v1::ComponentStatus,
        core::v1::ConfigMap,
        core::v1::Endpoints,
        core::v1::Event,
        core::v1::LimitRange,
        core::v1::Namespace,
        core::v1::Node,
        core::v1::PersistentVolume,
        core::v1::PersistentVolumeClaim,
        core::v1::Pod,
        core::v1::PodTemplate,
        core::v1::ReplicationController,
        core::v1::ResourceQuota,
        core::v1::Secret,
        core::v1::Service,
        core::v1::ServiceAccount,
        discovery::v1::EndpointSlice,
        events::v1::Event,
        flowcontrol::v1::FlowSchema,
        flowcontrol::v1::PriorityLevelConfiguration,
        networking::v1::IPAddress,
        networking::v1::Ingress,
        networking::v1::IngressClass,
        networking::v1::NetworkPolicy,
        networking::v1::ServiceCIDR,
        networking::v1beta1::IPAddress,
        networking::v1beta1::ServiceCIDR,
        node::v1::RuntimeClass,
        policy::v1::PodDisruptionBudget,
        rbac::v1::ClusterRole,
        rbac::v1::ClusterRoleBinding,
        rbac::v1::Role,
        rbac::v1::RoleBinding,
        resource::v1::DeviceClass,
        resource::v1::ResourceClaim,
        resource::v1::ResourceClaimTemplate,
        resource::v1::ResourceSlice,
        resource::v1alpha3::DeviceTaintRule,
        resource::v1beta1::DeviceClass,
        resource::v1beta1::ResourceClaim,
        resource::v1beta1::ResourceClaimTemplate,
        resource::v1beta1::ResourceSlice,
        resource::v1beta2::DeviceClass,
        resource::v1beta2::ResourceClaim,
        resource::v1beta2::ResourceClaimTemplate,
        resource::v1beta2::ResourceSlice,
        scheduling::v1::PriorityClass,
        scheduling::v1alpha1::Workload,
        storage::v1::CSIDriver,
        storage::v1::CSINode,
        storage::v1::CSIStorageCapacity,
        storage::v1::StorageClass,
        storage::v1::VolumeAttachment,
        storage::v1::VolumeAttributesClass,
        storage::v1beta1::VolumeAttributesClass,
        storagemigration::v1beta1::StorageVersionMigration,
        CustomResourceDefinition,
        APIService,
    ]
};

/// What a kind is known as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Known {
    /// A built-in kind or one a CRD defines, with its scope (true: namespaced).
    Kind(bool),
    /// Its group version is in `[render] api_versions`: it exists, its scope is not known.
    GroupVersion,
}

/// The kinds known for one validate run: the built-in table, the CRDs of every unit's
/// revision, `[render] api_versions`.
#[derive(Debug, Clone, Default)]
pub struct Catalogue {
    /// (group, version, kind) → namespaced, from the CRDs read.
    crds: BTreeMap<(String, String, String), bool>,
    /// `group/version` (`v1` for the core group) of `[render] api_versions`.
    group_versions: BTreeSet<String>,
}

impl Catalogue {
    /// Adds the kind a CustomResourceDefinition's `body` defines: its `spec.group`,
    /// `spec.names.kind`, `spec.scope` and each version it serves (`served: false` ones left
    /// out, as the API server serves none of those). A body without them adds nothing.
    pub fn add_crd(&mut self, body: &Value) {
        let spec = body.get("spec");
        let text = |pointer: &str| spec.and_then(|s| s.pointer(pointer)).and_then(Value::as_str);
        let (Some(group), Some(kind)) = (text("/group"), text("/names/kind")) else { return };
        let namespaced = text("/scope") != Some("Cluster");
        let versions = spec.and_then(|s| s.get("versions")).and_then(Value::as_array).into_iter().flatten();
        for version in versions.filter(|v| v.get("served").and_then(Value::as_bool) != Some(false)) {
            if let Some(name) = version.get("name").and_then(Value::as_str) {
                self.crds.insert((group.to_owned(), name.to_owned(), kind.to_owned()), namespaced);
            }
        }
    }

    /// Adds one `[render] api_versions` entry, `group/version` or `group/version/Kind`: the
    /// group version is known, whatever kind.
    pub fn add_api_version(&mut self, entry: &str) {
        let parts: Vec<&str> = entry.split('/').collect();
        let group_version = match parts[..] {
            [group, version, _] => format!("{group}/{version}"),
            [version, kind] if kind.starts_with(char::is_uppercase) => version.to_owned(),
            _ => entry.to_owned(),
        };
        self.group_versions.insert(group_version);
    }

    /// How `kind` of `api_version` (`apps/v1`, `v1`) is known; `None` when nothing knows it.
    pub fn known(&self, api_version: &str, kind: &str) -> Option<Known> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        if let Some(&(.., namespaced)) = BUILTIN.iter().find(|(g, v, k, _)| (*g, *v, *k) == (group, version, kind)) {
            return Some(Known::Kind(namespaced));
        }
        let key = (group.to_owned(), version.to_owned(), kind.to_owned());
        if let Some(&namespaced) = self.crds.get(&key) {
            return Some(Known::Kind(namespaced));
        }
        self.group_versions.contains(api_version).then_some(Known::GroupVersion)
    }

    /// The versions `kind` of `group` is known in (built in or by a CRD), for a hint when the
    /// one asked for is not among them.
    pub fn versions_of(&self, group: &str, kind: &str) -> Vec<String> {
        let builtin = BUILTIN.iter().filter(|(g, _, k, _)| (*g, *k) == (group, kind)).map(|(_, v, ..)| v.to_string());
        let crd =
            self.crds.keys().filter(|(g, _, k)| (g.as_str(), k.as_str()) == (group, kind)).map(|(_, v, _)| v.clone());
        builtin.chain(crd).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_table_knows_kinds_and_their_scope() {
        let c = Catalogue::default();
        assert_eq!(c.known("v1", "ConfigMap"), Some(Known::Kind(true)));
        assert_eq!(c.known("v1", "Namespace"), Some(Known::Kind(false)));
        assert_eq!(c.known("apps/v1", "Deployment"), Some(Known::Kind(true)));
        assert_eq!(c.known("rbac.authorization.k8s.io/v1", "ClusterRole"), Some(Known::Kind(false)));
        assert_eq!(c.known("apiextensions.k8s.io/v1", "CustomResourceDefinition"), Some(Known::Kind(false)));
        assert_eq!(c.known("v1", "ConfigMapp"), None);
        assert_eq!(c.known("extensions/v1beta1", "Deployment"), None);
        assert_eq!(c.versions_of("apps", "Deployment"), ["v1"]);
    }

    #[test]
    fn a_crd_adds_its_served_versions_with_its_scope() {
        let mut c = Catalogue::default();
        c.add_crd(&serde_json::json!({"spec": {"group": "example.com", "scope": "Cluster",
            "names": {"kind": "Widget"},
            "versions": [{"name": "v1", "served": true}, {"name": "v1beta1", "served": false}]}}));
        assert_eq!(c.known("example.com/v1", "Widget"), Some(Known::Kind(false)));
        assert_eq!(c.known("example.com/v1beta1", "Widget"), None);
        assert_eq!(c.known("example.com/v1", "Gadget"), None);
    }

    #[test]
    fn api_versions_make_a_group_version_known() {
        let mut c = Catalogue::default();
        c.add_api_version("monitoring.coreos.com/v1");
        c.add_api_version("example.com/v2/Widget");
        assert_eq!(c.known("monitoring.coreos.com/v1", "ServiceMonitor"), Some(Known::GroupVersion));
        assert_eq!(c.known("example.com/v2", "Anything"), Some(Known::GroupVersion));
        assert_eq!(c.known("example.com/v1", "Widget"), None);
    }
}
