//! The fake nodes kwok keeps alive: CPU nodes, and GPU nodes the way NVIDIA's GPU operator
//! labels and taints them (`nvidia.com/gpu.product`, `nvidia.com/gpu` capacity, the
//! `nvidia.com/gpu` NoSchedule taint), so the real scheduler places pods by node selector,
//! toleration and GPU count.

use serde_json::{json, Value};

/// The annotation kwok manages nodes by (`--manage-nodes-with-annotation-selector`).
pub const KWOK_NODE_ANNOTATION: &str = "kwok.x-k8s.io/node";
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";
pub const GPU_PRODUCT_LABEL: &str = "nvidia.com/gpu.product";

/// One fake node.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeSpec {
    pub name: String,
    /// `(product, count)` for a GPU node.
    pub gpus: Option<(String, u32)>,
    /// Pods the node admits (the kubelet's `--max-pods`).
    pub max_pods: u32,
}

impl NodeSpec {
    pub fn cpu(name: &str) -> NodeSpec {
        NodeSpec { name: name.into(), gpus: None, max_pods: 10_000 }
    }

    pub fn gpu(name: &str, product: &str, count: u32) -> NodeSpec {
        NodeSpec { name: name.into(), gpus: Some((product.into(), count)), max_pods: 110 }
    }

    /// The Node object (status included: kwok keeps the capacity it was created with).
    pub fn object(&self) -> Value {
        let mut labels = json!({
            "kubernetes.io/hostname": self.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "type": "kwok",
        });
        let mut capacity =
            json!({"cpu": "64", "memory": "256Gi", "pods": self.max_pods.to_string(), "ephemeral-storage": "1Ti"});
        let mut taints = json!([]);
        if let Some((product, count)) = &self.gpus {
            labels[GPU_PRODUCT_LABEL] = json!(product);
            labels["nvidia.com/gpu.count"] = json!(count.to_string());
            labels["nvidia.com/gpu.present"] = json!("true");
            capacity[GPU_RESOURCE] = json!(count.to_string());
            taints = json!([{"key": GPU_RESOURCE, "value": "present", "effect": "NoSchedule"}]);
        }
        json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": self.name, "labels": labels, "annotations": {KWOK_NODE_ANNOTATION: "fake"}},
            "spec": {"taints": taints},
            "status": {"capacity": capacity, "allocatable": capacity},
        })
    }
}

/// The default fleet: two CPU nodes, one node with four `NVIDIA-GeForce-RTX-3060` (the
/// sample CR's product) and one with eight `NVIDIA-A100-SXM4-80GB`.
pub fn default_nodes() -> Vec<NodeSpec> {
    vec![
        NodeSpec::cpu("cpu-0"),
        NodeSpec::cpu("cpu-1"),
        NodeSpec::gpu("gpu-rtx3060-0", "NVIDIA-GeForce-RTX-3060", 4),
        NodeSpec::gpu("gpu-a100-0", "NVIDIA-A100-SXM4-80GB", 8),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gpu_node_is_labelled_tainted_and_has_gpu_capacity() {
        let node = NodeSpec::gpu("g", "NVIDIA-GeForce-RTX-3060", 2).object();
        assert_eq!(node["metadata"]["labels"][GPU_PRODUCT_LABEL], "NVIDIA-GeForce-RTX-3060");
        assert_eq!(node["status"]["capacity"][GPU_RESOURCE], "2");
        assert_eq!(node["spec"]["taints"][0]["key"], GPU_RESOURCE);
        assert_eq!(node["spec"]["taints"][0]["effect"], "NoSchedule");
    }

    #[test]
    fn a_cpu_node_has_no_gpus_and_no_taints() {
        let node = NodeSpec::cpu("c").object();
        assert!(node["status"]["capacity"].get(GPU_RESOURCE).is_none());
        assert_eq!(node["spec"]["taints"], json!([]));
    }
}
