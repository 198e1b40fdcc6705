package manifest

import (
	"fmt"
	"sort"
	"strings"
)

// LedgerCommand is what the command routes of a gateway manifest are
// checked against: a command a ledger describes.
type LedgerCommand struct {
	Name     string
	Method   string // the method of its /v1/entities/:id route; "" when not routed
	ReadOnly bool
}

// LedgerCommands tells the commands of a ledger by name; ok is false when
// they are not known here (a plugin not loaded, or not given to check).
type LedgerCommands func(ledger string) (cmds []LedgerCommand, ok bool)

// CheckCommands checks the command routes of g against the ledgers of
// their entity types in d (d merged with g, see MergeDomain): the command
// must exist and the route's method must be the one the command declares
// (with none declared, GET only for a read-only command). Routes whose
// ledger's commands are not known are left to serve time. On problems it
// returns an *Error.
func CheckCommands(g *Gateway, d *Domain, known LedgerCommands) error {
	if g == nil || known == nil {
		return nil
	}
	var diags []Diagnostic
	problem := func(at Diagnostic, format string, args ...any) {
		at.Message = fmt.Sprintf(format, args...)
		diags = append(diags, at)
	}
	for _, r := range g.Routes {
		if r.Action != ActionCommand || r.Command == "" {
			continue
		}
		t := d.Entities[r.Entity]
		if t == nil {
			continue // reported by the parse
		}
		cmds, ok := known(t.Ledger)
		if !ok {
			continue
		}
		var cmd *LedgerCommand
		for i := range cmds {
			if cmds[i].Name == r.Command {
				cmd = &cmds[i]
			}
		}
		switch {
		case r.Command == CommandAppend:
			problem(r.commandPos, "route %s: command append is the raw fact append; route it with action emit", r.ID())
		case cmd == nil:
			problem(r.commandPos, "route %s: ledger %s of entity type %s has no command %q (its commands: %s)", r.ID(), t.Ledger, r.Entity, r.Command, commandNames(cmds))
		case cmd.Method != "" && cmd.Method != r.Method:
			problem(r.methodPos, "route %s: command %s of ledger %s takes %s, not %s", r.ID(), r.Command, t.Ledger, cmd.Method, r.Method)
		case cmd.Method == "" && r.Method == "GET" && !cmd.ReadOnly:
			problem(r.methodPos, "route %s: command %s of ledger %s records facts; GET serves only read-only commands", r.ID(), r.Command, t.Ledger)
		}
	}
	if len(diags) > 0 {
		return &Error{Diagnostics: diags}
	}
	return nil
}

// CommandAppend is the ledgers' raw append, served by action emit rather
// than by a command route.
const CommandAppend = "append"

func commandNames(cmds []LedgerCommand) string {
	var names []string
	for _, c := range cmds {
		if c.Name != CommandAppend {
			names = append(names, c.Name)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
