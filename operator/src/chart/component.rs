//! What a rendered object belongs to: the gateway, one application, or the release as a
//! whole. Carried by every rendered object through the plan, the apply, the prune and the
//! status, so nothing has to recover it from labels.

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Component {
    /// Shared by every component (the ServiceAccount).
    Release,
    /// The gateway (router) in front of every reader.
    Gateway,
    /// The application with this key in `spec.applications`.
    Application(String),
    /// The candidate of the application with this key: a revision being verified before it
    /// serves (verified promotion).
    Candidate(String),
}

impl Component {
    /// The `app.kubernetes.io/component` label of the component's objects and pods.
    pub fn label_value(&self) -> Option<String> {
        match self {
            Component::Release => None,
            Component::Gateway => Some("gateway".into()),
            Component::Application(name) => Some(format!("application-{name}")),
            Component::Candidate(name) => Some(format!("candidate-{name}")),
        }
    }
}

impl fmt::Display for Component {
    /// How status messages name it: `gateway`, the application's name, or `release`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Component::Release => f.write_str("release"),
            Component::Gateway => f.write_str("gateway"),
            Component::Application(name) => f.write_str(name),
            Component::Candidate(name) => write!(f, "{name} (candidate)"),
        }
    }
}
