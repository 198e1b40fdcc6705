//go:build !embedplugins

package plugins

// Builtin returns the embedded plugin modules by name: none in a build
// without the embedplugins tag (load them from --plugins-dir instead).
func Builtin() map[string][]byte { return nil }
