package manifest

import (
	"fmt"
	"strings"
	"testing"
)

// bigGateway returns a valid gateway manifest of n routes: alternately a
// get and an emit route under a prefix of their own, about 60 bytes each.
func bigGateway(n int) []byte {
	var b strings.Builder
	b.WriteString("name: big\nversion: \"1\"\nroutes:\n")
	for i := 0; i < n; i++ {
		if i%2 == 0 {
			fmt.Fprintf(&b, "  - {path: /r%d/:id, method: GET, entity: account, action: get}\n", i)
		} else {
			fmt.Fprintf(&b, "  - {path: /r%d/:id/d, method: POST, entity: account, action: emit, factType: deposit}\n", i)
		}
	}
	return []byte(b.String())
}

// BenchmarkParseGateway shows checking time grows linearly with the number
// of routes: ns/op at 40k should be about eight times ns/op at 5k.
func BenchmarkParseGateway(b *testing.B) {
	d := repoDomain(b)
	for _, n := range []int{5_000, 10_000, 20_000, 40_000, 170_000} {
		src := bigGateway(n)
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for i := 0; i < b.N; i++ {
				if _, err := ParseGateway("big.yaml", src, d); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// manyFacts returns a gateway manifest declaring one entity with n fact
// types and one emit route for each.
func manyFacts(n int) []byte {
	var b strings.Builder
	b.WriteString("name: big\nversion: \"1\"\nentities:\n  bulk:\n    facts:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "      - f%d\n", i)
	}
	b.WriteString("routes:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  - {path: /b%d/:id, method: POST, entity: bulk, action: emit, factType: f%d}\n", i, i)
	}
	return []byte(b.String())
}

// BenchmarkParseGatewayManyFacts: fact types are looked up in a set, so
// time grows linearly with fact types and routes together.
func BenchmarkParseGatewayManyFacts(b *testing.B) {
	for _, n := range []int{5_000, 10_000, 20_000} {
		src := manyFacts(n)
		b.Run(fmt.Sprintf("facts=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := ParseGateway("big.yaml", src, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
