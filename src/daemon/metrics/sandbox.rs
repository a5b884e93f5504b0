//! `gitward_sandbox_layer`: which layers of the render sandbox hold for the tools this daemon
//! runs (see the table in [`super`]).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LayerLabels {
    layer: &'static str,
}

/// One 0/1 gauge per sandbox layer.
pub(super) struct SandboxLayers {
    /// `gitward_sandbox_layer`.
    layer: Family<LayerLabels, Gauge>,
}

impl SandboxLayers {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let layers = Self { layer: Family::default() };
        registry.register(
            "sandbox_layer",
            "Whether a layer of the render sandbox (landlock, seccomp, namespaces) confines the render tools (1) or not (0)",
            layers.layer.clone(),
        );
        layers
    }

    /// Sets each `(layer, holds)` of `layers`: 1 when it holds, else 0.
    pub(super) fn set(&self, layers: &[(&'static str, bool)]) {
        for &(layer, holds) in layers {
            self.layer.get_or_create(&LayerLabels { layer }).set(i64::from(holds));
        }
    }
}
