package main_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestREADMEListsEveryServeFlag: the README's configuration table has a
// row for every flag `factline serve -h` prints, and no row for a flag
// serve does not have.
func TestREADMEListsEveryServeFlag(t *testing.T) {
	t.Parallel()
	help, _, code := cli(t, nil, "serve", "-h")
	if code != 0 {
		t.Fatalf("serve -h: exit %d\n%s", code, help)
	}
	var flags []string
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`).FindAllStringSubmatch(help, -1) {
		flags = append(flags, m[1])
	}
	if len(flags) < 10 {
		t.Fatalf("found %d flags in serve -h:\n%s", len(flags), help)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(readme), "\n## Configuration\n")
	if !ok {
		t.Fatal("README.md has no Configuration section")
	}
	table, _, _ = strings.Cut(table, "\n## ")
	var rows []string
	for _, m := range regexp.MustCompile("(?m)^\\| `--([a-z0-9-]+)` \\|").FindAllStringSubmatch(table, -1) {
		rows = append(rows, m[1])
	}
	for _, f := range flags {
		if !slices.Contains(rows, f) {
			t.Errorf("serve has --%s; the README's Configuration table does not list it", f)
		}
	}
	for _, r := range rows {
		if !slices.Contains(flags, r) {
			t.Errorf("the README's Configuration table lists --%s; serve has no such flag", r)
		}
	}
}
