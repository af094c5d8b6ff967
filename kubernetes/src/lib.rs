//! gpol policies in Kubernetes. [`extender`] is the kube-scheduler extender protocol on
//! the wire (k8s.io/kube-scheduler/extender/v1), read as kube-scheduler writes it and
//! written as it reads it.

pub mod extender;
