// Command precompile compiles WebAssembly modules into a wazero
// compilation cache directory, the way internal/host/wasm compiles them, and exits.
//
// Tests run it before they load their guests: under the race detector
// wazero's compiler is about fifteen times slower, and a cache entry
// written by this normally built helper serves the race-built test binary
// as well (entries are keyed by the module's bytes, the close-on-context-
// done setting and the CPU, not by how the host was built).
//
//	precompile -cache DIR [-deadline=false] FILE.wasm...
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
)

func main() {
	dir := flag.String("cache", "", "compilation cache directory")
	deadline := flag.Bool("deadline", true, "compile with close-on-context-done, as a host without DisableDeadline")
	flag.Parse()
	if *dir == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: precompile -cache DIR [-deadline=false] FILE.wasm...")
		os.Exit(2)
	}
	if err := run(*dir, *deadline, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "precompile:", err)
		os.Exit(1)
	}
}

func run(dir string, deadline bool, files []string) error {
	ctx := experimental.WithCompilationWorkers(context.Background(), runtime.GOMAXPROCS(0))
	cache, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		return err
	}
	defer cache.Close(ctx)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(cache).WithCloseOnContextDone(deadline))
		_, err = rt.CompileModule(ctx, b)
		_ = rt.Close(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
	}
	return nil
}
