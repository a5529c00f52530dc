// Package helm holds the tests of the Helm chart in zksched/ (helm lint, helm template with the
// Helm library, every rendered object decoded strictly into the Kubernetes API types) and,
// in pack/, the command that packages the chart. No package of the zksched binary imports it,
// so neither Helm nor the Kubernetes API types are linked into zksched.
package helm
