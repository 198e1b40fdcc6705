// Package sdk is the Go guest SDK for Factline plugins: WebAssembly
// modules (GOOS=wasip1 GOARCH=wasm, -buildmode=c-shared) that implement
// the plugin ABI of sdk/ABI.md.
//
// A plugin author writes typed Go and registers it from an init function:
//
//   - a Ledger[S] serves entity types: commands built with Write (decide:
//     the facts a command records, or an error to refuse it) and Read (a
//     result computed from the state), and an Evolve function that folds a
//     recorded fact into the state S;
//   - a Subscription's Handlers react to recorded facts with Actions.
//
// The SDK implements the ABI exports with //go:wasmexport (in a wasip1-only
// file) and everything else in plain Go, so a plugin is unit-tested natively
// with go test through the same dispatch code the exports run: Invoke, or
// the host simulation of package sdk/sdktest. Package sdk/conformance
// checks a built module the way the host does.
//
// Errors choose the status of the reply: Refuse for a business refusal
// (status 1), Invalid for bad input (status 2); unknown commands are
// answered with status 3 and panics are recovered into status 5.
//
// Inside a guest run with a deadline (wazero's close-on-context-done) every
// loop iteration, function call and allocation is expensive. The SDK
// decodes the ABI messages in one pass without reflection, straight into
// reused values, and implements Decodable and Encodable for its own types;
// implement them on states, inputs and fact data (see Decoder and Encoder)
// to keep a decide step in the tens of microseconds. Types without them
// go through encoding/json.
package sdk
