package pluginhost

import (
	"context"

	"github.com/factline/factline/internal/host/wasm"
)

// InstallChanged is m.install: Install with whether the store changed.
func InstallChanged(ctx context.Context, m *Manager, name string, module []byte) (*wasm.Plugin, bool, error) {
	return m.install(ctx, name, module)
}
