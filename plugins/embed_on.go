//go:build embedplugins

package plugins

import (
	"embed"
	"path"
	"strings"
)

//go:embed */*.wasm
var modules embed.FS

// Builtin returns the embedded plugin modules by name.
func Builtin() map[string][]byte {
	out := map[string][]byte{}
	files, _ := modules.ReadDir(".")
	for _, d := range files {
		if !d.IsDir() {
			continue
		}
		b, err := modules.ReadFile(path.Join(d.Name(), d.Name()+".wasm"))
		if err == nil {
			out[strings.TrimSuffix(d.Name(), "/")] = b
		}
	}
	return out
}
