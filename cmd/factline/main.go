// Command factline runs the Factline gateway and its operator tools.
//
//	factline serve    start the HTTP gateway
//	factline keys     create, list and revoke API keys
//	factline check    check manifests and report every problem
//	factline openapi  print the OpenAPI description of a gateway manifest
//	factline plugin   check a plugin module against the plugin ABI
//	factline migrate  apply or list schema migrations
//	factline ledger   re-derive entity snapshots from their facts
//	factline webhooks replay, list, pause and resume webhook deliveries
//	factline probe    answer a container health check
//	factline version  print the version
//
// -h, --help or help after any command or group of commands prints its
// help. Every flag can also be set through FACTLINE_<FLAG> (dashes become
// underscores), for example --database-url and FACTLINE_DATABASE_URL.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// command is a command, or a group of commands (subs) such as keys.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
	subs    []command
	notes   string // a group's help after its list of commands
}

var commands = []command{
	{name: "serve", summary: "start the HTTP gateway", run: runServe},
	{name: "keys", summary: "create, list and revoke API keys", subs: keysCommands},
	{name: "check", summary: "check manifest files and report every problem", run: runCheck},
	{name: "openapi", summary: "print the OpenAPI 3.0 description of a gateway manifest", run: runOpenAPI},
	{name: "plugin", summary: "check a plugin module against the plugin ABI", subs: pluginCommands},
	{name: "migrate", summary: "apply or list the store's schema migrations", subs: migrateCommands},
	{name: "ledger", summary: "re-derive entity snapshots from their facts", subs: ledgerCommands},
	{name: "webhooks", summary: "replay, list, pause and resume webhook deliveries", subs: webhooksCommands, notes: webhooksNotes},
	{name: "probe", summary: "exit 0 when a URL (default http://127.0.0.1:8080/ready) answers 200, for container health checks", run: runProbe},
	{name: "version", summary: "print the version (also factline --version)", run: runVersion},
}

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version") {
		args = append([]string{"version"}, args[1:]...)
	}
	err := dispatch(ctx, "factline", commands, "", args, stdout, stderr)
	var ee *exitError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ee):
		if ee.msg != "" {
			fmt.Fprintln(stderr, ee.msg)
		}
		return ee.code
	default:
		fmt.Fprintf(stderr, "factline: %v\n", err)
		return 1
	}
}

// dispatch runs the command of cmds that args[0] names; path is the
// command line before it ("factline keys"). "help CMD..." is "CMD... -h".
func dispatch(ctx context.Context, path string, cmds []command, notes string, args []string, stdout, stderr io.Writer) error {
	switch {
	case len(args) == 0:
		return usageErr("%s\n%s: a command is required", groupHelp(path, cmds, notes), path)
	case args[0] == "help" && len(args) > 1:
		return dispatch(ctx, path, cmds, notes, append(args[1:], "-h"), stdout, stderr)
	case isHelp(args[0]):
		fmt.Fprint(stdout, groupHelp(path, cmds, notes))
		return flag.ErrHelp
	}
	for _, c := range cmds {
		if c.name != args[0] {
			continue
		}
		name := path + " " + c.name
		if c.subs != nil {
			return dispatch(ctx, name, c.subs, c.notes, args[1:], stdout, stderr)
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		var ee *exitError
		if err != nil && !errors.Is(err, flag.ErrHelp) && !errors.As(err, &ee) {
			return &exitError{code: 1, msg: fmt.Sprintf("%s: %v", name, err)}
		}
		return err
	}
	return usageErr("%s: unknown command %q\n\n%s", path, args[0], groupHelp(path, cmds, notes))
}

// groupHelp is the help of the top level or of a group of commands.
func groupHelp(path string, cmds []command, notes string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: %s <command> [flags]\n\nCommands:\n", path)
	width := 0
	for _, c := range cmds {
		width = max(width, len(c.name))
	}
	for _, c := range cmds {
		summary := c.summary
		if c.subs != nil {
			names := make([]string, len(c.subs))
			for i, s := range c.subs {
				names[i] = s.name
			}
			summary += " (" + c.name + " " + strings.Join(names, "|") + ")"
		}
		fmt.Fprintf(&b, "  %-*s  %s\n", width, c.name, summary)
	}
	if notes != "" {
		fmt.Fprintf(&b, "\n%s\n", notes)
	}
	fmt.Fprintf(&b, "\nRun '%s <command> -h' for the help of a command.\n", path)
	return b.String()
}
