package gateway_test

import (
	"testing"

	"github.com/factline/factline/internal/host/gateway"
)

func TestAsksForHTML(t *testing.T) {
	for _, tc := range []struct {
		accept string
		want   bool
	}{
		{"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", true},
		{"TEXT/HTML", true},
		{"text/html; q=0.5, application/xml;q=0.4", true},
		{"", false},
		{"*/*", false},
		{"text/*", false},
		{"application/json", false},
		{"text/html;q=0", false},
		{"application/json, text/html;q=0.1", false},
		{"application/problem+json;q=0.2, text/html", true},
	} {
		if got := gateway.AsksForHTML(tc.accept); got != tc.want {
			t.Errorf("AsksForHTML(%q) = %v, want %v", tc.accept, got, tc.want)
		}
	}
}
