//go:build unix

package wasmbuild

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// lockSlot takes one of the machine-wide build slots: an exclusive flock
// on one of Slots lock files, polled while every slot is taken.
func lockSlot(ctx context.Context) (func(), error) {
	for {
		for i := range Slots {
			f, err := os.OpenFile(filepath.Join(CacheDir(), fmt.Sprintf("slot-%d.lock", i)), os.O_CREATE|os.O_RDWR, 0o644)
			if err != nil {
				return nil, err
			}
			if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
				return func() {
					_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
					f.Close()
				}, nil
			}
			f.Close()
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
