// Command factline runs the Factline gateway and its operator tools.
//
//	factline serve   start the HTTP gateway
//	factline keys    create, list and revoke API keys
//	factline check   check manifests and report every problem
//	factline migrate apply or list schema migrations
//	factline webhooks replay, list, pause and resume webhook deliveries
//	factline version print the version
//
// Every flag can also be set through FACTLINE_<FLAG> (dashes become
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

// exitUsage is the exit code of a command-line mistake.
const exitUsage = 2

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = []command{
	{"serve", "start the HTTP gateway", runServe},
	{"keys", "create, list and revoke API keys (keys create|list|revoke)", runKeys},
	{"check", "check manifest files and report every problem", runCheck},
	{"openapi", "print the OpenAPI 3.0 description of a gateway manifest", runOpenAPI},
	{"plugin", "check a plugin module against the plugin ABI (plugin test FILE.wasm)", runPlugin},
	{"migrate", "apply or list the store's schema migrations (migrate up|status)", runMigrate},
	{"ledger", "re-derive entity snapshots from their facts (ledger rebuild)", runLedger},
	{"webhooks", "replay, list and resume webhook deliveries (webhooks replay|dead-letters|resume)", runWebhooks},
	{"probe", "exit 0 when a URL (default http://127.0.0.1:8080/ready) answers 200, for container health checks", runProbe},
	{"version", "print the version", runVersion},
}

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return exitUsage
		}
		return 0
	}
	for _, c := range commands {
		if c.name == args[0] {
			err := c.run(ctx, args[1:], stdout, stderr)
			var ee *exitError
			switch {
			case err == nil:
				return 0
			case errors.Is(err, flag.ErrHelp):
				return 0
			case errors.As(err, &ee):
				if ee.msg != "" {
					fmt.Fprintln(stderr, ee.msg)
				}
				return ee.code
			default:
				fmt.Fprintf(stderr, "factline %s: %v\n", c.name, err)
				return 1
			}
		}
	}
	fmt.Fprintf(stderr, "factline: unknown command %q\n\n", args[0])
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: factline <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'factline <command> -h' for the flags of a command.")
}

// exitError carries an exit code and an optional message.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func usageErr(format string, args ...any) error {
	return &exitError{code: exitUsage, msg: fmt.Sprintf(format, args...)}
}

// flagKind names what a flag's value must be, for an error message.
func flagKind(f *flag.Flag) string {
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		return "true or false"
	}
	switch kind, _ := flag.UnquoteUsage(f); kind {
	case "int":
		return "an integer"
	case "duration":
		return "a duration (for example 500ms or 2s)"
	case "", "value", "string":
		return "a value"
	default:
		return "a " + kind
	}
}

// parse parses flags, then fills every flag not given on the command line
// from FACTLINE_<FLAG>.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &exitError{code: exitUsage}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil {
			return
		}
		env := "FACTLINE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok {
			if e := fs.Set(f.Name, v); e != nil {
				msg := fmt.Sprintf("%s=%q: --%s wants %s", env, v, f.Name, flagKind(f))
				if e.Error() != "parse error" { // the flag package's word for "not that kind of value"
					msg += ": " + e.Error()
				}
				err = usageErr("%s", msg)
			}
		}
	})
	return err
}
