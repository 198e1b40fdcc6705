package gateway_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/factline/factline/internal/teststore"
	"github.com/factline/factline/internal/testutil"
)

// TestCacheControlNoCacheReadsTheStore: a GET of an entity with
// Cache-Control: no-cache (or max-age=0) reads the database, so a client
// reads a write another process made even before this process's entity
// cache has heard of it; without such a directive the cached entity is
// served. The change is made behind the platform's back (no
// notification), so only the database knows of it; the cached reads
// follow the warm-up read within the cache's 5 s age limit.
func TestCacheControlNoCacheReadsTheStore(t *testing.T) {
	t.Parallel()
	loc := teststore.Location(t, "postgres")
	st := teststore.OpenAt(t, "postgres", loc)
	t.Cleanup(func() { st.Close() }) // after the platform's, registered later
	h := setupGatewayOn(t, st)
	testutil.Eventually(t, 30*time.Second, "the entity cache to go live", h.platform.EntityCache().Live)
	id := h.account(t, h.keyA)
	platformPath := "/v1/entities/" + id + "?entity_type=account"
	h.req("GET", platformPath, h.keyA, nil).wantStatus(t, 200)

	conn, err := pgx.Connect(t.Context(), loc)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), `UPDATE entities SET version = 7 WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		path, cacheControl string
		want               string
	}{
		{platformPath, "", "1"},
		{platformPath, "max-age=60", "1"},
		{platformPath, "no-store", "1"},
		{platformPath, "no-cache", "7"},
		{platformPath, "No-Cache", "7"},
		{platformPath, "private, no-cache", "7"},
		{platformPath, "max-age=0", "7"},
		{platformPath, `max-age="0"`, "7"},
		{platformPath, "MAX-AGE=00", "7"},
		// A manifest route's get action.
		{"/v1/accounts/" + id, "", "1"},
		{"/v1/accounts/" + id, "no-cache", "7"},
	} {
		r := h.req("GET", tc.path, h.keyA, nil, "Cache-Control", tc.cacheControl).wantStatus(t, 200)
		if got := fmt.Sprint(r.data()["version"]); got != tc.want {
			t.Errorf("GET %s with Cache-Control %q: version %s, want %s", tc.path, tc.cacheControl, got, tc.want)
		}
	}
}
