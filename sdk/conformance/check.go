package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/factline/factline/internal/pluginrt"
	"github.com/factline/factline/internal/storable"
	"github.com/factline/factline/sdk/abi"
)

// Check runs every check on a module and reports each outcome. It never
// panics on a broken module; a check that cannot run because an earlier
// one failed is reported as skipped.
func Check(ctx context.Context, module []byte, opts Options) Report {
	k := &kit{opts: opts.withDefaults(), module: module}
	defer k.close()
	k.run(ctx)
	return Report{Plugin: k.label(), Results: k.results}
}

// kit is the state of one Check.
type kit struct {
	opts    Options
	module  []byte
	cache   wazero.CompilationCache
	tmpDir  string
	probe   *probe
	host    *pluginrt.Host
	plugin  *pluginrt.Plugin
	desc    abi.Description
	results []Result

	facts []abi.Fact // facts the replay check recorded, for the memory check

	// Every call is timed; calls past the deadline fail the deadline check
	// wherever they happen.
	timeouts    []string
	slowest     time.Duration
	slowestCall string
	calls       int
	retried     int // calls stopped by the deadline once and made again
}

func (k *kit) label() string {
	if k.desc.Name == "" {
		return ""
	}
	return k.desc.Name + "@" + k.desc.Version
}

func (k *kit) add(check string, o Outcome, format string, args ...any) {
	k.results = append(k.results, Result{Check: check, Outcome: o, Message: fmt.Sprintf(format, args...)})
}

func (k *kit) failed(checks ...string) bool {
	for _, r := range k.results {
		if (r.Outcome == Fail || r.Outcome == Skip) && slices.Contains(checks, r.Check) {
			return true
		}
	}
	return false
}

func (k *kit) skipRest(from string, why string) {
	i := slices.Index(Checks, from)
	for _, c := range Checks[i:] {
		if c == CheckDeadline && len(k.timeouts) > 0 {
			k.deadline()
			continue
		}
		k.add(c, Skip, "%s", why)
	}
}

func (k *kit) close() {
	ctx := context.Background()
	if k.host != nil {
		_ = k.host.Close(ctx)
	}
	if k.probe != nil {
		k.probe.close(ctx)
	}
	if k.cache != nil {
		_ = k.cache.Close(ctx)
	}
	if k.tmpDir != "" {
		_ = os.RemoveAll(k.tmpDir)
	}
}

func (k *kit) run(ctx context.Context) {
	// One compilation cache for the probe and the host: the module is
	// compiled once.
	dir := k.opts.Host.CacheDir
	if dir == "" {
		var err error
		if k.tmpDir, err = os.MkdirTemp("", "factline-conformance-*"); err != nil {
			k.add(CheckExports, Fail, "cannot make a compilation cache directory: %v", err)
			k.skipRest(CheckABIVersion, "the kit could not start")
			return
		}
		dir = k.tmpDir
		k.opts.Host.CacheDir = dir
	}
	var err error
	if k.cache, err = wazero.NewCompilationCacheWithDir(dir); err != nil {
		k.add(CheckExports, Fail, "compilation cache: %v", err)
		k.skipRest(CheckABIVersion, "the kit could not start")
		return
	}
	if k.probe, err = newProbe(ctx, k.module, k.opts, k.cache); err != nil {
		k.add(CheckExports, Fail, "not a WebAssembly module wazero can compile: %v", err)
		k.skipRest(CheckABIVersion, "the module does not compile")
		return
	}
	k.exports()
	k.abiVersion(ctx)
	k.describe(ctx)
	if k.failed(CheckExports, CheckABIVersion, CheckDescribe) {
		k.skipRest(CheckLoad, "not checked further: fix the failures above first")
		return
	}
	if !k.load(ctx) {
		k.skipRest(CheckUnknownCommand, "the host did not load the module")
		return
	}
	k.unknownCommand(ctx)
	k.malformedInput(ctx)
	k.determinism(ctx)
	k.replay(ctx)
	k.memory(ctx)
	k.deadline()
}

// requiredExports are the functions of sdk/ABI.md with their signatures.
var requiredExports = []struct {
	name            string
	params, results []api.ValueType
}{
	{abi.ExportInit, nil, nil},
	{abi.ExportVersion, nil, []api.ValueType{api.ValueTypeI32}},
	{abi.ExportAlloc, []api.ValueType{api.ValueTypeI32}, []api.ValueType{api.ValueTypeI32}},
	{abi.ExportFree, []api.ValueType{api.ValueTypeI32, api.ValueTypeI32}, nil},
	{abi.ExportDescribe, nil, []api.ValueType{api.ValueTypeI64}},
	{abi.ExportDecide, []api.ValueType{api.ValueTypeI32, api.ValueTypeI32}, []api.ValueType{api.ValueTypeI64}},
	{abi.ExportEvolve, []api.ValueType{api.ValueTypeI32, api.ValueTypeI32}, []api.ValueType{api.ValueTypeI64}},
	{abi.ExportHandle, []api.ValueType{api.ValueTypeI32, api.ValueTypeI32}, []api.ValueType{api.ValueTypeI64}},
}

func (k *kit) exports() {
	var problems []string
	funcs := k.probe.cm.ExportedFunctions()
	for _, want := range requiredExports {
		f, ok := funcs[want.name]
		switch {
		case !ok:
			problems = append(problems, "missing export "+want.name)
		case !slices.Equal(f.ParamTypes(), want.params) || !slices.Equal(f.ResultTypes(), want.results):
			problems = append(problems, fmt.Sprintf("export %s has signature %s, want %s",
				want.name, signature(f.ParamTypes(), f.ResultTypes()), signature(want.params, want.results)))
		}
	}
	if _, ok := k.probe.cm.ExportedMemories()["memory"]; !ok {
		problems = append(problems, `no exported memory named "memory"`)
	}
	for _, f := range k.probe.cm.ImportedFunctions() {
		mod, name, _ := f.Import()
		if mod != "wasi_snapshot_preview1" && (mod != abi.HostModule || name != "log") {
			problems = append(problems, fmt.Sprintf("imports %s.%s, which the host does not provide", mod, name))
		}
	}
	if len(problems) > 0 {
		k.add(CheckExports, Fail, "%s", strings.Join(problems, "; "))
		return
	}
	k.add(CheckExports, Pass, "all %d exports present with their signatures, memory exported, imports only WASI and %s.log",
		len(requiredExports), abi.HostModule)
}

func signature(params, results []api.ValueType) string {
	names := func(ts []api.ValueType) string {
		s := make([]string, len(ts))
		for i, t := range ts {
			s[i] = api.ValueTypeName(t)
		}
		return "(" + strings.Join(s, ", ") + ")"
	}
	return names(params) + " -> " + names(results)
}

func (k *kit) abiVersion(ctx context.Context) {
	if _, ok := k.probe.cm.ExportedFunctions()[abi.ExportVersion]; !ok {
		k.add(CheckABIVersion, Fail, "the module does not export %s", abi.ExportVersion)
		return
	}
	res, err := k.noInput(ctx, abi.ExportVersion)
	if err != nil {
		k.add(CheckABIVersion, Fail, "%v", err)
		return
	}
	if v := int32(uint32(res[0])); v != abi.Version {
		k.add(CheckABIVersion, Fail, "%s returned %d; this kit and the host implement ABI version %d", abi.ExportVersion, v, abi.Version)
		return
	}
	k.add(CheckABIVersion, Pass, "%s returns %d", abi.ExportVersion, abi.Version)
}

func (k *kit) describe(ctx context.Context) {
	if _, ok := k.probe.cm.ExportedFunctions()[abi.ExportDescribe]; !ok {
		k.add(CheckDescribe, Fail, "the module does not export %s", abi.ExportDescribe)
		return
	}
	res, err := k.noInput(ctx, abi.ExportDescribe)
	if err != nil {
		k.add(CheckDescribe, Fail, "%v", err)
		return
	}
	status, body, err := k.probe.output(abi.ExportDescribe, res[0])
	switch {
	case err != nil:
		k.add(CheckDescribe, Fail, "%v", err)
		return
	case status != abi.StatusOK:
		k.add(CheckDescribe, Fail, "%s answered status %d: %s", abi.ExportDescribe, status, body)
		return
	}
	var d abi.Description
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&d); err != nil {
		k.add(CheckDescribe, Fail, "the describe document is not valid JSON: %v", err)
		return
	}
	k.desc = d
	if problems := describeProblems(d); len(problems) > 0 {
		k.add(CheckDescribe, Fail, "%s", strings.Join(problems, "; "))
		return
	}
	switch d.Kind {
	case abi.KindLedger:
		k.add(CheckDescribe, Pass, "%s@%s: ledger of %s with %d commands", d.Name, d.Version, strings.Join(d.EntityTypes, ", "), len(d.Commands))
	default:
		k.add(CheckDescribe, Pass, "%s@%s: subscription with handlers %s", d.Name, d.Version, strings.Join(d.Handlers, ", "))
	}
}

func (k *kit) load(ctx context.Context) bool {
	h, err := pluginrt.NewHost(pluginrt.Options{
		CacheDir:       k.opts.Host.CacheDir,
		MemoryLimitMiB: k.opts.Host.MemoryLimitMiB,
		CallTimeout:    k.opts.Host.CallTimeout,
		WallCap:        k.opts.Host.WallCap,
		PoolSize:       k.opts.Host.PoolSize,
		Logger:         k.opts.Host.Logger,
	})
	if err != nil {
		k.add(CheckLoad, Fail, "host options: %v", err)
		return false
	}
	k.host = h
	start := time.Now()
	p, err := h.Load(ctx, k.module)
	if err != nil {
		var le *pluginrt.LoadError
		if errors.As(err, &le) {
			k.add(CheckLoad, Fail, "the host refused the module: %s", strings.Join(le.Reasons, "; "))
		} else {
			k.add(CheckLoad, Fail, "the host could not load the module: %v", err)
		}
		return false
	}
	k.plugin = p
	k.add(CheckLoad, Pass, "the host loaded %s with %d instances in %v", p, k.opts.Host.PoolSize, time.Since(start).Round(time.Millisecond))
	return true
}

// observe times a call and remembers calls past the deadline.
func (k *kit) observe(what string, d time.Duration, err error) {
	k.calls++
	if d > k.slowest {
		k.slowest, k.slowestCall = d, fmt.Sprintf("%s (call %d)", what, k.calls)
	}
	if isTimeout(err) {
		var te *pluginrt.TrapError
		if errors.As(err, &te) && te.MemoryCap > 0 {
			what += fmt.Sprintf(" (stopped with %s of its %d MiB of memory in use", mib(uint32(te.Memory)), te.MemoryCap>>20)
			if te.NearMemoryCap() {
				what += ": most likely running out of memory, which a longer deadline shows as an out-of-memory trap"
			}
			what += ")"
		}
		k.timeouts = append(k.timeouts, what)
	}
}

func isTimeout(err error) bool {
	var te *pluginrt.TrapError
	var ce *callError
	return errors.As(err, &te) && te.Timeout || errors.As(err, &ce) && ce.timeout
}

// timed makes one call, timed; a call stopped by the deadline is made
// once more on a fresh instance before it counts: the CPU time of the
// calling thread includes work the Go runtime charges to it (collector
// assists for other goroutines of a busy process), so one overrun can be
// noise, while a runaway overruns every time.
func timed[T any](k *kit, what string, call func() (T, error)) (T, error) {
	start := time.Now()
	res, err := call()
	if isTimeout(err) {
		k.retried++
		start = time.Now()
		res, err = call()
	}
	k.observe(what, time.Since(start), err)
	return res, err
}

// noInput calls an export without arguments; like timed, a call stopped
// by the deadline is made once more, on a fresh instance, before it
// counts. The first call also instantiates the module, on a machine that
// may be busy.
func (k *kit) noInput(ctx context.Context, export string) ([]uint64, error) {
	res, err := k.probe.callNoInput(ctx, export)
	if isTimeout(err) {
		k.retried++
		res, err = k.probe.callNoInput(ctx, export)
	}
	return res, err
}

func (k *kit) decide(ctx context.Context, in abi.DecideInput) (abi.DecideResult, error) {
	return timed(k, "decide "+in.Command, func() (abi.DecideResult, error) { return k.plugin.Decide(ctx, in) })
}

func (k *kit) evolve(ctx context.Context, in abi.EvolveInput) (json.RawMessage, error) {
	return timed(k, "evolve "+in.Fact.Type, func() (json.RawMessage, error) { return k.plugin.Evolve(ctx, in) })
}

func (k *kit) handle(ctx context.Context, in abi.HandleInput) (abi.HandleResult, error) {
	return timed(k, "handle "+in.Handler, func() (abi.HandleResult, error) { return k.plugin.Handle(ctx, in) })
}

func (k *kit) rawCall(ctx context.Context, export string, input []byte) (abi.Status, []byte, error) {
	type reply struct {
		status abi.Status
		body   []byte
	}
	r, err := timed(k, strings.TrimPrefix(export, "factline_"), func() (reply, error) {
		status, body, err := k.probe.call(ctx, export, input)
		return reply{status, body}, err
	})
	return r.status, r.body, err
}

// callFailure reports a call that did not end in a reply: a timeout is
// the deadline check's failure (this check is skipped), anything else this
// check's.
func (k *kit) callFailure(check string, err error) {
	if isTimeout(err) {
		k.add(check, Skip, "a call ran past the deadline (see %s): %s", CheckDeadline, trapText(err))
		return
	}
	k.add(check, Fail, "%v", trapText(err))
}

// trapText is a call failure on one line (wazero adds the guest's stack
// trace on the following lines), with the first line of what the guest
// printed.
func trapText(err error) string {
	var te *pluginrt.TrapError
	if errors.As(err, &te) && te.Output != "" {
		return fmt.Sprintf("%s (guest output: %q)", firstLine(err.Error()), firstLine(te.Output))
	}
	return firstLine(err.Error())
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

func (k *kit) entity(entityType string) abi.EntityRef {
	return abi.EntityRef{ID: "conformance-" + entityType, Type: entityType, TenantID: "conformance", Version: 1}
}

func (k *kit) unknownCommand(ctx context.Context) {
	var err error
	var what string
	if k.desc.Kind == abi.KindLedger {
		what = `decide of command "conformance_unknown"`
		_, err = k.decide(ctx, abi.DecideInput{Command: "conformance_unknown", Entity: k.entity(k.desc.EntityTypes[0]),
			State: json.RawMessage("null"), Input: json.RawMessage("{}"), Now: k.opts.Now})
	} else {
		what = `handle by handler "conformance_unknown"`
		_, err = k.handle(ctx, abi.HandleInput{Handler: "conformance_unknown", Fact: k.sampleFact("conformance", "check")})
	}
	var ce *pluginrt.CallError
	switch {
	case err == nil:
		k.add(CheckUnknownCommand, Fail, "%s succeeded; want an error reply with status %d (unknown_command)", what, abi.StatusUnknownCommand)
	case errors.As(err, &ce) && ce.Status == abi.StatusUnknownCommand:
		k.add(CheckUnknownCommand, Pass, "%s answers status 3 (%s)", what, ce.Code)
	case errors.As(err, &ce):
		k.add(CheckUnknownCommand, Fail, "%s answered status %d (%s: %s); want status %d (unknown_command)", what, ce.Status, ce.Code, ce.Message, abi.StatusUnknownCommand)
	default:
		k.callFailure(CheckUnknownCommand, err)
	}
}

// malformed are inputs no export may answer with status 0 or a trap.
func (k *kit) malformed() [][]byte {
	cmd := "append"
	if len(k.desc.Commands) > 0 {
		cmd = k.desc.Commands[0].Name
	}
	q, _ := json.Marshal(cmd)
	return [][]byte{
		[]byte("{"),
		[]byte("not json"),
		[]byte("null"),
		[]byte("[]"),
		[]byte(`"a string"`),
		[]byte(`{"command":`),
		[]byte(`{"command":42,"handler":42,"fact":7}`),
		[]byte(`{"command":` + string(q) + `,"input":{"amount":},"state":null}`),
		[]byte(`{"command":` + string(q) + `,"input":[1,2,3],"state":"not a state"}`),
		[]byte(`{"fact":{"type":7},"state":{]}`),
		bytes.Repeat([]byte("["), 10000),
		append([]byte(`{"command":`+string(q)+`,"input":{"x":"`), append(bytes.Repeat([]byte("\\"), 9999), `"}}`...)...),
	}
}

func (k *kit) malformedInput(ctx context.Context) {
	exports := []string{abi.ExportDecide, abi.ExportEvolve}
	if k.desc.Kind == abi.KindSubscription {
		exports = []string{abi.ExportHandle}
	}
	n := 0
	for _, export := range exports {
		for _, in := range k.malformed() {
			status, body, err := k.rawCall(ctx, export, in)
			n++
			shown := string(in)
			if len(shown) > 40 {
				shown = shown[:40] + "..."
			}
			switch {
			case err != nil && isTimeout(err):
				k.add(CheckMalformedInput, Skip, "%s of %q ran past the deadline (see %s)", export, shown, CheckDeadline)
				return
			case err != nil:
				k.add(CheckMalformedInput, Fail, "%s of the malformed input %q did not answer with an error reply: %s", export, shown, trapText(err))
				return
			case status == abi.StatusOK:
				k.add(CheckMalformedInput, Fail, "%s answered status 0 (ok) to the malformed input %q: %s", export, shown, body)
				return
			case status > abi.StatusPanic:
				k.add(CheckMalformedInput, Fail, "%s answered the unknown status %d to %q", export, status, shown)
				return
			}
			var rep abi.ErrorReply
			if err := json.Unmarshal(body, &rep); err != nil || rep.Code == "" {
				k.add(CheckMalformedInput, Fail, "%s answered status %d to %q without a {code, message} reply: %s", export, status, shown, body)
				return
			}
		}
	}
	k.add(CheckMalformedInput, Pass, "%d malformed inputs to %s each got an error reply, no trap", n, strings.Join(exports, " and "))
}

// sample is one command and input of the scripts.
type sample struct {
	command  string
	input    json.RawMessage
	readOnly bool
	emits    []string
}

func (k *kit) samples() []sample {
	var out []sample
	for _, c := range k.desc.Commands {
		inputs := k.opts.Inputs[c.Name]
		if len(inputs) == 0 {
			if c.Name == abi.CommandAppend {
				for _, t := range k.desc.Emits {
					if t == abi.AnyFactType {
						// Any declared fact type: one the kit names.
						t = "conformance_fact"
					}
					inputs = append(inputs, `{"type":"`+t+`","data":{}}`)
				}
			} else {
				inputs = []string{"{}"}
			}
		}
		for _, in := range inputs {
			out = append(out, sample{command: c.Name, input: json.RawMessage(in), readOnly: c.ReadOnly, emits: c.Emits})
		}
	}
	return out
}

// unusedSamples names sample inputs given for a command (or sample facts
// for a handler) the plugin does not describe, which no check would
// use: a misspelt --input would leave the command checked with {} alone.
func (k *kit) unusedSamples() string {
	var names []string
	for _, c := range k.desc.Commands {
		names = append(names, c.Name)
	}
	what, given := "command", slices.Sorted(maps.Keys(k.opts.Inputs))
	if k.desc.Kind == abi.KindSubscription {
		if len(given) > 0 {
			return fmt.Sprintf("a sample input is given for command %q, but a subscription serves no commands (its handlers: %s)", given[0], strings.Join(k.desc.Handlers, ", "))
		}
		what, names, given = "handler", k.desc.Handlers, slices.Sorted(maps.Keys(k.opts.Facts))
	}
	for _, name := range given {
		if !slices.Contains(names, name) {
			return fmt.Sprintf("a sample input is given for %s %q, which the plugin does not describe (its %ss: %s)", what, name, what, strings.Join(names, ", "))
		}
	}
	return ""
}

func (k *kit) sampleFact(factType, subtype string) abi.Fact {
	return abi.Fact{ID: "fct_conformance_1", Type: factType, Subtype: subtype, TenantID: "conformance",
		EntityID: "conformance-entity", EntityType: "conformance", Seq: 1, Position: 1, Timestamp: k.opts.Now,
		Data: json.RawMessage(`{}`)}
}

func (k *kit) handlerFacts(handler string) []abi.Fact {
	if fs := k.opts.Facts[handler]; len(fs) > 0 {
		return fs
	}
	return []abi.Fact{k.sampleFact("conformance", "check")}
}

// same reports whether two replies are the same, comparing JSON values.
func same(a, b any) (bool, string, string) {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb), string(ja), string(jb)
}

// reply is a call's outcome in a comparable form.
type reply struct {
	Result any                 `json:"result,omitempty"`
	Error  *pluginrt.CallError `json:"error,omitempty"`
}

func (k *kit) determinism(ctx context.Context) {
	n := 0
	differ := func(what, a, b string) {
		k.add(CheckDeterminism, Fail, "%s answered differently to the same input: %s, then %s", what, clip(a), clip(b))
	}
	twice := func(what string, call func() (any, error)) bool {
		var rs [2]reply
		for i := range rs {
			res, err := call()
			var ce *pluginrt.CallError
			switch {
			case err == nil:
				rs[i].Result = res
			case errors.As(err, &ce):
				rs[i].Error = ce
			default:
				k.callFailure(CheckDeterminism, err)
				return false
			}
		}
		n++
		if ok, a, b := same(rs[0], rs[1]); !ok {
			differ(what, a, b)
			return false
		}
		return true
	}
	if k.desc.Kind == abi.KindSubscription {
		for _, h := range k.desc.Handlers {
			for _, f := range k.handlerFacts(h) {
				if !twice("handle "+h, func() (any, error) { return k.handle(ctx, abi.HandleInput{Handler: h, Fact: f}) }) {
					return
				}
			}
		}
		k.add(CheckDeterminism, Pass, "%d handler calls answered the same twice", n)
		return
	}
	for _, t := range k.desc.EntityTypes {
		for _, s := range k.samples() {
			in := abi.DecideInput{Command: s.command, Entity: k.entity(t), State: json.RawMessage("null"), Input: s.input, Now: k.opts.Now}
			var first abi.DecideResult
			if !twice(fmt.Sprintf("decide %q (%s, input %s)", s.command, t, s.input), func() (any, error) {
				res, err := k.decide(ctx, in)
				first = res
				return res, err
			}) {
				return
			}
			for i, nf := range first.Facts {
				f := abi.Fact{ID: fmt.Sprintf("fct_conformance_%d", i+1), Type: nf.Type, Subtype: nf.Subtype, TenantID: "conformance",
					EntityID: in.Entity.ID, EntityType: t, Seq: int64(i + 1), Timestamp: k.opts.Now, Data: nf.Data}
				if !twice(fmt.Sprintf("evolve of a %s fact", nf.Type), func() (any, error) {
					st, err := k.evolve(ctx, abi.EvolveInput{State: json.RawMessage("null"), Fact: f})
					return st, err
				}) {
					return
				}
			}
		}
	}
	k.add(CheckDeterminism, Pass, "%d decide and evolve calls answered the same twice", n)
}

func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

func (k *kit) replay(ctx context.Context) {
	if unused := k.unusedSamples(); unused != "" {
		k.add(CheckReplay, Fail, "%s", unused)
		return
	}
	if k.desc.Kind == abi.KindSubscription {
		k.actions(ctx)
		return
	}
	recorded := 0
	for _, t := range k.desc.EntityTypes {
		ent := k.entity(t)
		state := json.RawMessage("null")
		var facts []abi.Fact
		for round := range 2 {
			for _, s := range k.samples() {
				in := abi.DecideInput{Command: s.command, Entity: ent, State: state, Input: s.input, Now: k.opts.Now + int64(round)}
				res, err := k.decide(ctx, in)
				var ce *pluginrt.CallError
				switch {
				case errors.As(err, &ce) && ce.Status == abi.StatusPanic:
					k.add(CheckReplay, Fail, "command %q panicked on the sample input %s (%s); the host answers such a call 500: "+
						"refuse an input the command cannot use (sdk.Invalid, sdk.Refuse)", s.command, clip(string(s.input)), ce.Message)
					return
				case errors.As(err, &ce):
					continue // a refusal is a fine answer
				case err != nil:
					k.callFailure(CheckReplay, err)
					return
				case s.readOnly && len(res.Facts) > 0:
					k.add(CheckReplay, Fail, "read-only command %q returned %d facts", s.command, len(res.Facts))
					return
				}
				for _, nf := range res.Facts {
					if !abi.EmitsType(k.desc.Emits, nf.Type) || len(s.emits) > 0 && !abi.EmitsType(s.emits, nf.Type) {
						k.add(CheckReplay, Fail, "command %q recorded a %q fact, which describe does not list among the fact types it emits", s.command, nf.Type)
						return
					}
					if fault := newFactFault(nf); fault != "" {
						k.add(CheckReplay, Fail, "command %q recorded a %q fact %s; the host refuses such a decision as a fault of the ledger (500)", s.command, nf.Type, fault)
						return
					}
					seq := int64(len(facts) + 1)
					f := abi.Fact{ID: fmt.Sprintf("fct_conformance_%s_%d", t, seq), Type: nf.Type, Subtype: nf.Subtype, TenantID: ent.TenantID,
						EntityID: ent.ID, EntityType: t, Seq: seq, Position: seq, Timestamp: nf.Timestamp, Data: nf.Data}
					if f.Timestamp == 0 {
						f.Timestamp = in.Now
					}
					next, err := k.evolve(ctx, abi.EvolveInput{State: state, Fact: f})
					if err != nil {
						if isTimeout(err) {
							k.callFailure(CheckReplay, err)
						} else {
							k.add(CheckReplay, Fail, "evolve refused a %q fact that decide %q produced: %v", f.Type, s.command, trapText(err))
						}
						return
					}
					if err := storable.CheckDocument("state", next); err != nil {
						k.add(CheckReplay, Fail, "evolve of a %q fact returned a state whose %v; the host refuses such a state as a fault of the ledger (500)", f.Type, err)
						return
					}
					state = next
					facts = append(facts, f)
					ent.Version++
				}
			}
		}
		replayed := json.RawMessage("null")
		for _, f := range facts {
			next, err := k.evolve(ctx, abi.EvolveInput{State: replayed, Fact: f})
			if err != nil {
				k.callFailure(CheckReplay, err)
				return
			}
			replayed = next
		}
		if !jsonEqual(state, replayed) {
			k.add(CheckReplay, Fail, "entity type %s: replaying %d facts from null gives %s, but deciding and evolving them one by one kept %s",
				t, len(facts), clip(string(replayed)), clip(string(state)))
			return
		}
		recorded += len(facts)
		k.facts = append(k.facts, facts...)
	}
	if recorded == 0 {
		k.add(CheckReplay, Warn, "nothing to replay: no sample command recorded a fact (give inputs the commands accept: Options.Inputs, or --input COMMAND=JSON)")
		return
	}
	k.add(CheckReplay, Pass, "%d facts recorded over %d entity types; replaying them from null rebuilds the same state", recorded, len(k.desc.EntityTypes))
}

// actions checks what a subscription's handlers answer: each action is an
// append with an entity id and a fact type (one of emits, when listed).
func (k *kit) actions(ctx context.Context) {
	n := 0
	for _, h := range k.desc.Handlers {
		for _, f := range k.handlerFacts(h) {
			res, err := k.handle(ctx, abi.HandleInput{Handler: h, Fact: f})
			var ce *pluginrt.CallError
			switch {
			case errors.As(err, &ce) && ce.Status == abi.StatusPanic:
				k.add(CheckReplay, Fail, "handler %s panicked on a sample %s.%s fact (%s); the host skips such a fact (logged, counted as handler_error), "+
					"so what it should have caused is lost", h, f.Type, f.Subtype, ce.Message)
				return
			case errors.As(err, &ce):
				continue
			case err != nil:
				k.callFailure(CheckReplay, err)
				return
			}
			for _, a := range res.Actions {
				n++
				switch {
				case a.Kind != abi.ActionAppend:
					k.add(CheckReplay, Fail, "handler %s returned an action of kind %q; the host carries out %q", h, a.Kind, abi.ActionAppend)
					return
				case a.EntityID == "" || a.Type == "":
					k.add(CheckReplay, Fail, "handler %s returned an append without entity_id or type: %+v", h, a)
					return
				case len(k.desc.Emits) > 0 && !slices.Contains(k.desc.Emits, a.Type):
					k.add(CheckReplay, Fail, "handler %s appends a %q fact, which describe does not list in emits", h, a.Type)
					return
				case len(a.Data) > 0 && a.Data[0] != '{':
					k.add(CheckReplay, Fail, "handler %s appends a %q fact whose data is not an object: %s", h, a.Type, a.Data)
					return
				}
			}
		}
	}
	k.add(CheckReplay, Pass, "a subscription has no state to replay; its handlers returned %d well-formed actions", n)
}

// maxFactTime is the latest fact timestamp the host stores,
// 9999-12-31T23:59:59.999Z.
const maxFactTime = 253402300799999

// newFactFault says what the host would refuse in a decided fact (the
// rules of sdk/ABI.md, "decide"), or "" when it records it: data that is
// no JSON object (a []byte given as NewFact.Data is encoded as a base64
// string) or that the store cannot hold (a NUL, invalid UTF-8, a member
// twice, a number out of range), a subtype that is no lowercase name of
// at most 64 characters, a timestamp before the epoch or after the year
// 9999.
func newFactFault(nf abi.NewFact) string {
	if d := bytes.TrimSpace(nf.Data); len(d) > 0 && string(d) != "null" && d[0] != '{' {
		return fmt.Sprintf("whose data is not a JSON object: %s", clip(string(d)))
	}
	if err := storable.CheckDocument("data", nf.Data); err != nil {
		return fmt.Sprintf("whose %v", err)
	}
	if nf.Subtype != "" && !lowercaseName(nf.Subtype, 64) {
		return fmt.Sprintf("with subtype %.80q, not a lowercase name of at most 64 characters", nf.Subtype)
	}
	if nf.Timestamp < 0 || nf.Timestamp > maxFactTime {
		return fmt.Sprintf("with timestamp %d, outside 0 to %d (the year 9999)", nf.Timestamp, int64(maxFactTime))
	}
	return ""
}

// lowercaseName reports s matching [a-z][a-z0-9_]* in at most limit bytes.
func lowercaseName(s string, limit int) bool {
	if len(s) == 0 || len(s) > limit || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

func jsonEqual(a, b json.RawMessage) bool {
	var va, vb any
	da, db := json.NewDecoder(bytes.NewReader(a)), json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	if da.Decode(&va) != nil || db.Decode(&vb) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(va, vb)
}

// memoryInputs are the messages the memory check cycles through.
func (k *kit) memoryInputs() ([]string, [][]byte) {
	var exports []string
	var inputs [][]byte
	add := func(export string, v any) {
		b, err := json.Marshal(v)
		if err == nil {
			exports, inputs = append(exports, export), append(inputs, b)
		}
	}
	if k.desc.Kind == abi.KindSubscription {
		for _, h := range k.desc.Handlers {
			for _, f := range k.handlerFacts(h) {
				add(abi.ExportHandle, abi.HandleInput{Handler: h, Fact: f})
			}
		}
		return exports, inputs
	}
	ent := k.entity(k.desc.EntityTypes[0])
	for _, s := range k.samples() {
		add(abi.ExportDecide, abi.DecideInput{Command: s.command, Entity: ent, State: json.RawMessage("null"), Input: s.input, Now: k.opts.Now})
	}
	for _, f := range k.facts {
		add(abi.ExportEvolve, abi.EvolveInput{State: json.RawMessage("null"), Fact: f})
	}
	return exports, inputs
}

func (k *kit) memory(ctx context.Context) {
	exports, inputs := k.memoryInputs()
	if len(inputs) == 0 {
		k.add(CheckMemory, Skip, "no sample input to call the module with")
		return
	}
	k.probe.discard(ctx) // a fresh instance
	const warmup = 200
	var first, before uint32
	total := warmup + k.opts.Calls
	for i := range total {
		switch i {
		case 1:
			first = k.probe.memory()
		case warmup:
			before = k.probe.memory()
		}
		j := i % len(inputs)
		_, _, err := k.rawCall(ctx, exports[j], inputs[j])
		if err == nil {
			continue
		}
		from, calls := before, i-warmup
		if i < warmup {
			from, calls = first, i
		}
		switch {
		case i > 0 && int64(k.probe.lastMemory)-int64(from) > int64(k.opts.MaxGrowthMiB)<<20:
			// Memory that keeps growing ends in a trap at the cap or in a
			// collector too busy to finish a call in time: either way the
			// cause is the growth.
			if isTimeout(err) {
				k.timeouts = k.timeouts[:len(k.timeouts)-1]
			}
			k.add(CheckMemory, Fail, "memory grew from %s to %s over %d calls, then call %d failed: %s",
				mib(from), mib(k.probe.lastMemory), calls, i+1, trapText(err))
		case isTimeout(err):
			k.add(CheckMemory, Skip, "call %d ran past the deadline (see %s)", i+1, CheckDeadline)
		default:
			k.add(CheckMemory, Fail, "call %d of %d trapped with %s of memory in use: %s", i+1, total, mib(k.probe.lastMemory), trapText(err))
		}
		return
	}
	after := k.probe.memory()
	if growth := int64(after) - int64(before); growth > int64(k.opts.MaxGrowthMiB)<<20 {
		k.add(CheckMemory, Fail, "memory grew from %s to %s over %d calls (more than %d MiB): the module keeps memory between calls",
			mib(before), mib(after), k.opts.Calls, k.opts.MaxGrowthMiB)
		return
	}
	k.add(CheckMemory, Pass, "memory %s after a %d-call warm-up, %s after %d more calls", mib(before), warmup, mib(after), k.opts.Calls)
}

func mib(b uint32) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func (k *kit) deadline() {
	if len(k.timeouts) > 0 {
		k.add(CheckDeadline, Fail, "%d calls ran past the %v deadline and were stopped by the host, first %s",
			len(k.timeouts), k.opts.Host.CallTimeout, k.timeouts[0])
		return
	}
	retried := ""
	if k.retried > 0 {
		retried = fmt.Sprintf("; %d stopped once and finished when made again", k.retried)
	}
	k.add(CheckDeadline, Pass, "%d calls each finished within the %v deadline of CPU time (slowest by the clock: %s, %v%s)",
		k.calls, k.opts.Host.CallTimeout, k.slowestCall, k.slowest.Round(time.Microsecond), retried)
}
