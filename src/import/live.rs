//! The objects of the live cluster (`--from-cluster`): each kind listed in every namespace
//! with kube's dynamic API, the newest of its versions the cluster serves.

use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use serde_json::Value;

use super::{Error, Object, Tool, Warning};

/// (group, versions newest first, kind, plural) of the kinds each tool's import reads.
const FLUX: [(&str, &[&str], &str, &str); 8] = [
    ("source.toolkit.fluxcd.io", &["v1"], "GitRepository", "gitrepositories"),
    ("source.toolkit.fluxcd.io", &["v1", "v1beta2"], "OCIRepository", "ocirepositories"),
    ("source.toolkit.fluxcd.io", &["v1", "v1beta2"], "HelmRepository", "helmrepositories"),
    ("source.toolkit.fluxcd.io", &["v1", "v1beta2"], "HelmChart", "helmcharts"),
    ("source.toolkit.fluxcd.io", &["v1", "v1beta2"], "Bucket", "buckets"),
    ("source.extensions.fluxcd.io", &["v1beta1"], "ArtifactGenerator", "artifactgenerators"),
    ("kustomize.toolkit.fluxcd.io", &["v1"], "Kustomization", "kustomizations"),
    ("helm.toolkit.fluxcd.io", &["v2", "v2beta2"], "HelmRelease", "helmreleases"),
];

const ARGO: [(&str, &[&str], &str, &str); 3] = [
    ("argoproj.io", &["v1alpha1"], "AppProject", "appprojects"),
    ("argoproj.io", &["v1alpha1"], "Application", "applications"),
    ("argoproj.io", &["v1alpha1"], "ApplicationSet", "applicationsets"),
];

/// The objects of `tool` in the cluster the kubeconfig's current context reaches, their
/// `status` and `metadata.managedFields` left out; a kind the cluster does not serve is a
/// warning.
///
/// Errors: the kubeconfig or the cluster cannot be read; a list fails other than with 404.
pub async fn from_cluster(tool: Tool) -> Result<(Vec<Object>, Vec<Warning>), Error> {
    let client = crate::cluster::connect(&crate::config::ClusterConfig::default())
        .await
        .map_err(|e| Error::Cluster { what: "connect".into(), source: Box::new(e) })?;
    let kinds: &[(&str, &[&str], &str, &str)] = match tool {
        Tool::Flux => &FLUX,
        Tool::Argocd => &ARGO,
    };
    let (mut objects, mut warnings) = (Vec::new(), Vec::new());
    for (group, versions, kind, plural) in kinds {
        match list(&client, group, versions, kind, plural).await? {
            Some(found) => objects.extend(found),
            None => warnings.push(Warning {
                object: format!("{kind}.{group}"),
                field: String::new(),
                message: "not served by the cluster: none read".into(),
            }),
        }
    }
    Ok((objects, warnings))
}

/// Every object of one kind, at the first of `versions` the cluster serves; `None` when it
/// serves none.
async fn list(
    client: &kube::Client,
    group: &str,
    versions: &[&str],
    kind: &str,
    plural: &str,
) -> Result<Option<Vec<Object>>, Error> {
    for version in versions {
        let api_version = format!("{group}/{version}");
        let resource = ApiResource {
            group: group.into(),
            version: (*version).into(),
            api_version: api_version.clone(),
            kind: kind.into(),
            plural: plural.into(),
        };
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let listed = match api.list(&ListParams::default()).await {
            Ok(listed) => listed,
            Err(kube::Error::Api(status)) if status.code == 404 => continue,
            Err(e) => return Err(Error::Cluster { what: format!("list {plural}.{group}"), source: Box::new(e) }),
        };
        let objects = listed.items.into_iter().filter_map(|item| {
            let mut body = serde_json::to_value(item).ok()?;
            body["apiVersion"] = Value::from(api_version.as_str());
            body["kind"] = Value::from(kind);
            if let Some(map) = body.as_object_mut() {
                map.remove("status");
            }
            if let Some(meta) = body["metadata"].as_object_mut() {
                meta.remove("managedFields");
            }
            Object::from_value(body, "cluster".into())
        });
        return Ok(Some(objects.collect()));
    }
    Ok(None)
}
