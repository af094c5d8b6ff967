//! gpol policies in Kubernetes. [`extender`] is the kube-scheduler extender protocol on
//! the wire (k8s.io/kube-scheduler/extender/v1), read as kube-scheduler writes it and
//! written as it reads it; [`nodes`] maps a `Node` object to gpol's node, the one mapping
//! every consumer of Kubernetes objects shares; [`kueue`] writes a policy's quota tree as
//! Kueue's objects.

#[cfg(feature = "serve")]
pub mod api;
pub mod cluster;
pub mod extender;
pub mod kueue;
#[cfg(feature = "serve")]
pub mod leader;
#[cfg(feature = "serve")]
pub mod listen;
#[cfg(feature = "serve")]
pub mod metrics;
pub mod nodes;
pub mod pods;
pub mod quantity;
#[cfg(feature = "serve")]
pub mod served;
#[cfg(feature = "serve")]
pub mod server;
#[cfg(feature = "serve")]
pub mod tls;
pub mod verbs;

use std::fmt;

/// A Kubernetes object that cannot be mapped: the field (a dotted path in the object)
/// and what is wrong with it. The caller adds where the object came from.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> FieldError {
        FieldError { field: field.into(), message: message.into() }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "field `{}`: {}", self.field, self.message)
    }
}

impl std::error::Error for FieldError {}
