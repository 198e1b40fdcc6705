package conformance

import (
	"fmt"
	"slices"
	"strings"

	"github.com/factline/factline/sdk/abi"
)

// describeProblems returns what is wrong with a describe document, by the
// rules of sdk/ABI.md.
func describeProblems(d abi.Description) []string {
	var p []string
	add := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }
	if d.ABI != abi.Version {
		add("describe says abi %d, want %d", d.ABI, abi.Version)
	}
	if !isName(d.Name, "-") {
		add("name %q: want a lowercase letter, then lowercase letters, digits, _ or -", d.Name)
	}
	if d.Version == "" {
		add("version is empty")
	}
	idents := func(what string, names []string) {
		for i, n := range names {
			if !isName(n, "") {
				add("%s %q: want a lowercase letter, then lowercase letters, digits or _", what, n)
			}
			if slices.Contains(names[:i], n) {
				add("%s %q is listed twice", what, n)
			}
		}
	}
	idents("entity type", d.EntityTypes)
	idents("handler", d.Handlers)
	// emits lists fact types, or is abi.AnyFactType alone (a ledger's).
	emits := func(what string, names []string) {
		if !slices.Contains(names, abi.AnyFactType) {
			idents("fact type", names)
			return
		}
		if len(names) > 1 {
			add("%s lists %q beside other fact types; it allows them all", what, abi.AnyFactType)
		}
		if d.Kind != abi.KindLedger {
			add("%s %q: only a ledger records any fact type", what, abi.AnyFactType)
		}
	}
	emits("emits", d.Emits)
	switch d.Kind {
	case abi.KindLedger:
		if len(d.EntityTypes) == 0 {
			add("a ledger lists the entity types it serves in entity_types")
		}
		if len(d.Handlers) > 0 {
			add("a ledger lists no handlers")
		}
	case abi.KindSubscription:
		if len(d.Handlers) == 0 {
			add("a subscription lists its handlers")
		}
		if len(d.EntityTypes) > 0 || len(d.Commands) > 0 {
			add("a subscription lists no entity types and no commands")
		}
	default:
		add("kind %q: want %q or %q", d.Kind, abi.KindLedger, abi.KindSubscription)
	}
	routes := map[string]string{}
	for i, c := range d.Commands {
		switch {
		case !isName(c.Name, ""):
			add("command %q: want a lowercase identifier", c.Name)
		case slices.ContainsFunc(d.Commands[:i], func(o abi.Command) bool { return o.Name == c.Name }):
			add("command %q is declared twice", c.Name)
		}
		switch {
		case c.Path == "" && c.Method != "":
			add("command %q has a method but no path", c.Name)
		case c.Path != "":
			if !slices.Contains([]string{"GET", "POST", "PUT", "PATCH", "DELETE"}, c.Method) {
				add("command %q: method %q, want GET, POST, PUT, PATCH or DELETE", c.Name, c.Method)
			}
			if !strings.HasPrefix(c.Path, "/") || len(c.Path) < 2 {
				add("command %q: path %q must start with / and name something", c.Name, c.Path)
			}
			if c.Method == "GET" && !c.ReadOnly {
				add("command %q is a GET but not read_only", c.Name)
			}
			route := c.Method + " " + c.Path
			if other, ok := routes[route]; ok {
				add("commands %q and %q both serve %s", other, c.Name, route)
			}
			routes[route] = c.Name
		}
		if c.Name == abi.CommandAppend && c.Path != "" {
			add("command append is the built-in raw append and has no path")
		}
		if c.ReadOnly && len(c.Emits) > 0 {
			add("command %q is read_only but emits %s", c.Name, strings.Join(c.Emits, ", "))
		}
		if slices.Contains(c.Emits, abi.AnyFactType) {
			emits(fmt.Sprintf("command %q emits", c.Name), c.Emits)
		}
		for _, t := range c.Emits {
			if !abi.EmitsType(d.Emits, t) {
				add("command %q emits %q, which the top-level emits does not list", c.Name, t)
			}
		}
	}
	return p
}

// isName: a lowercase letter, then up to 63 lowercase letters, digits, '_'
// or one of extra.
func isName(s, extra string) bool {
	if len(s) == 0 || len(s) > 64 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' && !strings.ContainsRune(extra, rune(c)) {
			return false
		}
	}
	return true
}
