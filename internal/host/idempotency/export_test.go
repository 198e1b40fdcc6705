package idempotency

import "time"

// SetNow sets a Keeper's clock.
func SetNow(k *Keeper, now func() time.Time) { k.now = now }
