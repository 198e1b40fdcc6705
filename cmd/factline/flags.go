package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/factline/factline/internal/pluginrt"
)

// exitUsage is the exit code of a command-line mistake.
const exitUsage = 2

// exitError carries an exit code and an optional message.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func usageErr(format string, args ...any) error {
	return &exitError{code: exitUsage, msg: fmt.Sprintf(format, args...)}
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "--help" || arg == "-help" || arg == "help"
}

// newFlags returns the flag set of the command name ("keys create"), whose
// help starts with "Usage: factline " and synopsis. The flag package's own
// output is discarded: parse prints the help and the errors.
func newFlags(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: factline %s\n", synopsis)
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintln(w, "\nFlags (each also read from FACTLINE_<FLAG>, dashes as underscores):")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parse parses flags wherever they stand among the positional arguments
// (everything after "--" is positional), then fills every flag not given
// on the command line from FACTLINE_<FLAG>. -h prints the command's help
// to stdout and returns flag.ErrHelp; a mistake is a usage error.
func parse(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	var positional []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return err
		}
		if err != nil {
			return usageErr("factline %s: %v (see 'factline %s -h')", fs.Name(), err, fs.Name())
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			positional = append(positional, rest...)
			break
		}
		positional, args = append(positional, rest[0]), rest[1:]
	}
	// fs.Args() returns the positional arguments from here on.
	if err := fs.Parse(append([]string{"--"}, positional...)); err != nil {
		return err
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

// noArgs refuses positional arguments, for the commands that take flags
// only.
func noArgs(fs *flag.FlagSet) error {
	if fs.NArg() == 0 {
		return nil
	}
	return usageErr("factline %s: unexpected arguments %v: it takes flags only (see 'factline %s -h')", fs.Name(), fs.Args(), fs.Name())
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

// checkDocsURL returns --docs-url without a trailing slash, or a usage
// error unless it is an absolute http or https URL: problem types are
// {docs_url}/errors/<slug> and must be absolute URIs.
func checkDocsURL(cmd, raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", usageErr("factline %s: --docs-url %q: want an absolute http or https URL without a query or fragment, for example https://docs.example.com", cmd, raw)
	}
	return strings.TrimRight(raw, "/"), nil
}

// checkPluginLimits refuses a memory cap (flag memFlag) or a call budget
// (flag timeoutFlag) no plugin can run with; the runtime would otherwise
// take 0 for its default and refuse the rest only once it starts.
func checkPluginLimits(cmd, memFlag string, mib int, timeoutFlag string, timeout time.Duration) error {
	if mib < pluginrt.MinMemoryLimitMiB || mib > pluginrt.MaxMemoryLimitMiB {
		return usageErr("factline %s: %s must be %d to %d, got %d", cmd, memFlag, pluginrt.MinMemoryLimitMiB, pluginrt.MaxMemoryLimitMiB, mib)
	}
	if timeout <= 0 {
		return usageErr("factline %s: %s must be positive (for example 100ms), got %v", cmd, timeoutFlag, timeout)
	}
	return nil
}
