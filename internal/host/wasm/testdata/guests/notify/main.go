//go:build wasip1

// Command notify is a subscription plugin with one handler, "followup":
// for a fact whose data names a "related" entity it asks the host to
// append a followup fact to that entity, carrying the fact's id. It logs
// through the host function factline.log when there is nothing to do.
package main

import (
	"unsafe"

	"github.com/factline/factline/internal/host/wasm/testdata/guests/kit"
	"github.com/factline/factline/sdk/abi"
)

func main() {}

//go:wasmimport factline log
func hostLog(level, ptr, n uint32)

func logInfo(msg []byte) {
	hostLog(1, uint32(uintptr(unsafe.Pointer(unsafe.SliceData(msg)))), uint32(len(msg)))
}

//go:wasmexport factline_abi_version
func abiVersion() int32 { return abi.Version }

//go:wasmexport factline_alloc
func alloc(size uint32) uint32 { return kit.Alloc(size) }

//go:wasmexport factline_free
func free(ptr, size uint32) {}

//go:wasmexport factline_describe
func describe() uint64 {
	return kit.Reply(abi.StatusOK, []byte(`{"abi":1,"name":"notify","version":"0.3.0","kind":"subscription",`+
		`"handlers":["followup"],"emits":["followup"]}`))
}

//go:wasmexport factline_decide
func decide(ptr, n uint32) uint64 { return kit.Unsupported() }

//go:wasmexport factline_evolve
func evolve(ptr, n uint32) uint64 { return kit.Unsupported() }

var logBuf []byte

//go:wasmexport factline_handle
func handle(ptr, n uint32) uint64 {
	var handler, fact []byte
	o := kit.NewObject(kit.Input(ptr, n))
	for o.Next() {
		switch string(o.Key) {
		case "handler":
			handler, _ = kit.String(o.Value)
		case "fact":
			fact = o.Value
		}
	}
	if o.Err != nil || fact == nil {
		return kit.Error(abi.StatusBadInput, "bad_input", "want {handler, fact}")
	}
	if string(handler) != "followup" {
		return kit.Error(abi.StatusUnknownCommand, "unknown_command", "unknown handler "+string(handler))
	}
	var id, subtype, data []byte
	o = kit.NewObject(fact)
	for o.Next() {
		switch string(o.Key) {
		case "id":
			id, _ = kit.String(o.Value)
		case "subtype":
			subtype, _ = kit.String(o.Value)
		case "data":
			data = o.Value
		}
	}
	var related []byte
	if data != nil {
		o = kit.NewObject(data)
		for o.Next() {
			if string(o.Key) == "related" {
				related, _ = kit.String(o.Value)
			}
		}
	}
	if len(related) == 0 {
		logBuf = append(append(append(logBuf[:0], "fact "...), id...), " names no related entity; nothing to do"...)
		logInfo(logBuf)
		return kit.Reply(abi.StatusOK, []byte(`{"actions":[]}`))
	}
	b := kit.Out(abi.StatusOK)
	b = append(b, `{"actions":[{"kind":"append","entity_id":"`...)
	b = append(b, related...)
	b = append(b, `","type":"followup"`...)
	if len(subtype) > 0 {
		b = append(b, `,"subtype":"`...)
		b = append(b, subtype...)
		b = append(b, '"')
	}
	b = append(b, `,"data":{"source":"`...)
	b = append(b, id...)
	b = append(b, `"}}]}`...)
	return kit.Done(b)
}
