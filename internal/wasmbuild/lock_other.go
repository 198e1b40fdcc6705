//go:build !unix

package wasmbuild

import (
	"context"
)

// Without flock, the limit holds within the process only.
var slots = make(chan struct{}, Slots)

func lockSlot(ctx context.Context) (func(), error) {
	select {
	case slots <- struct{}{}:
		return func() { <-slots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
