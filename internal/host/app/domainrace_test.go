package app_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/factline/factline/internal/testutil"
)

// TestConcurrentDomainChangesAreCheckedAgainstEachOther: two processes on
// one database install, at the same moment, domain manifests that declare
// the same entity type differently. Each alone passes its checks; stored
// together they would make a model no process can build. Exactly one is
// installed and the other is refused with the conflict, in every round.
func TestConcurrentDomainChangesAreCheckedAgainstEachOther(t *testing.T) {
	t.Parallel()
	pg := testutil.Postgres(t)
	procs := [2]*live{startLive(t, "postgres", pg), startLive(t, "postgres", pg)}
	layer := func(name, typ, field string) string {
		return fmt.Sprintf("name: %s\nversion: \"1\"\nentities:\n  %s:\n    ledger: builtin\n    fields:\n      level: %s\n    facts: [issued]\n", name, typ, field)
	}
	for round := range 4 {
		typ := fmt.Sprintf("badge%d", round)
		names := [2]string{fmt.Sprintf("left%d", round), fmt.Sprintf("right%d", round)}
		srcs := [2]string{
			layer(names[0], typ, "{type: string, storage: ix_s_1}"),
			layer(names[1], typ, "{type: number, storage: ix_n_1}"),
		}
		var codes [2]int
		var errs [2]error
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, l := range procs {
			wg.Go(func() {
				req, _ := http.NewRequest("PUT", l.base+"/v1/admin/domain/"+names[i], strings.NewReader(srcs[i]))
				req.Header.Set("Content-Type", "application/yaml")
				req.Header.Set("X-API-Key", l.op)
				<-start
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					errs[i] = err
					return
				}
				resp.Body.Close()
				codes[i] = resp.StatusCode
			})
		}
		close(start)
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		created := 0
		for _, c := range codes {
			switch c {
			case http.StatusCreated:
				created++
			case http.StatusUnprocessableEntity, http.StatusConflict:
			default:
				t.Fatalf("round %d: statuses %v", round, codes)
			}
		}
		if created != 1 {
			t.Fatalf("round %d: %d of two conflicting domain manifests installed (statuses %v)", round, created, codes)
		}
		// Every process builds the stored model: a third change is checked
		// and installed normally.
		if code, body := procs[round%2].putDomain(fmt.Sprintf("extra%d", round), layer(fmt.Sprintf("extra%d", round), "medal"+fmt.Sprint(round), "{type: string, storage: ix_s_1}")); code != http.StatusCreated {
			t.Fatalf("round %d: a later change: %d %v", round, code, body)
		}
	}
}
