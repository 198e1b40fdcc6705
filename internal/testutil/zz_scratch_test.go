package testutil_test

import (
	"os"
	"testing"
	"time"

	"github.com/factline/factline/internal/testutil"
)

func TestScratchHang(t *testing.T) {
	if os.Getenv("HANG") == "" {
		return
	}
	testutil.Postgres(t)
	testutil.Redis(t)
	t.Log("started")
	time.Sleep(time.Hour)
}
