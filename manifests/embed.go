// Package manifests ships the default manifests inside the binary, so
// `factline serve` works from any directory.
package manifests

import _ "embed"

// Domain is manifests/domain.yaml: the default domain manifest.
//
//go:embed domain.yaml
var Domain []byte

// Gateway is manifests/gateway.yaml: an example gateway manifest.
//
//go:embed gateway.yaml
var Gateway []byte
