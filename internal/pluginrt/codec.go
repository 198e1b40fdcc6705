package pluginrt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/factline/factline/sdk/abi"
)

// The inputs of calls are encoded by hand rather than with encoding/json:
// it is about three times cheaper on the host, and it lets the host choose
// the member order. The JSON is compact (RawMessage values are compacted,
// which also validates them) and puts the small fields a guest reads first
// and the state, usually the largest value, last: a guest that scans for
// "command" and "input" stops before it. The order is a courtesy, not part
// of the ABI: guests must not depend on it.

// appendDecideInput encodes in as
// {"command","input","now","entity":{...},"state"}.
func appendDecideInput(b *bytes.Buffer, in *abi.DecideInput) error {
	b.WriteString(`{"command":`)
	appendString(b, in.Command)
	b.WriteString(`,"input":`)
	if err := appendRaw(b, in.Input, "input"); err != nil {
		return err
	}
	b.WriteString(`,"now":`)
	appendInt(b, in.Now)
	b.WriteString(`,"entity":{"id":`)
	appendString(b, in.Entity.ID)
	b.WriteString(`,"type":`)
	appendString(b, in.Entity.Type)
	b.WriteString(`,"tenant_id":`)
	appendString(b, in.Entity.TenantID)
	b.WriteString(`,"version":`)
	appendInt(b, in.Entity.Version)
	b.WriteString(`},"state":`)
	if err := appendRaw(b, in.State, "state"); err != nil {
		return err
	}
	b.WriteByte('}')
	return nil
}

// appendEvolveInput encodes in as {"fact":{...},"state"}.
func appendEvolveInput(b *bytes.Buffer, in *abi.EvolveInput) error {
	b.WriteString(`{"fact":`)
	if err := appendFact(b, &in.Fact); err != nil {
		return err
	}
	b.WriteString(`,"state":`)
	if err := appendRaw(b, in.State, "state"); err != nil {
		return err
	}
	b.WriteByte('}')
	return nil
}

// appendHandleInput encodes in as {"handler","fact":{...}}.
func appendHandleInput(b *bytes.Buffer, in *abi.HandleInput) error {
	b.WriteString(`{"handler":`)
	appendString(b, in.Handler)
	b.WriteString(`,"fact":`)
	if err := appendFact(b, &in.Fact); err != nil {
		return err
	}
	b.WriteByte('}')
	return nil
}

// appendFact follows the json tags of abi.Fact, omitempty included.
func appendFact(b *bytes.Buffer, f *abi.Fact) error {
	b.WriteString(`{"id":`)
	appendString(b, f.ID)
	b.WriteString(`,"type":`)
	appendString(b, f.Type)
	for _, s := range [...]struct{ key, v string }{
		{`,"subtype":`, f.Subtype}, {`,"tenant_id":`, f.TenantID}, {`,"entity_id":`, f.EntityID},
		{`,"entity_type":`, f.EntityType},
	} {
		if s.v != "" {
			b.WriteString(s.key)
			appendString(b, s.v)
		}
	}
	if f.Seq != 0 {
		b.WriteString(`,"seq":`)
		appendInt(b, f.Seq)
	}
	if f.Position != 0 {
		b.WriteString(`,"position":`)
		appendInt(b, f.Position)
	}
	if f.SourceID != "" {
		b.WriteString(`,"source_id":`)
		appendString(b, f.SourceID)
	}
	b.WriteString(`,"timestamp":`)
	appendInt(b, f.Timestamp)
	if len(f.Data) > 0 {
		b.WriteString(`,"data":`)
		if err := appendRaw(b, f.Data, "fact.data"); err != nil {
			return err
		}
	}
	b.WriteByte('}')
	return nil
}

func appendInt(b *bytes.Buffer, v int64) {
	var tmp [20]byte
	b.Write(strconv.AppendInt(tmp[:0], v, 10))
}

// appendRaw writes raw compacted, or null when it is empty, as
// encoding/json does for a json.RawMessage.
func appendRaw(b *bytes.Buffer, raw json.RawMessage, what string) error {
	if len(raw) == 0 {
		b.WriteString("null")
		return nil
	}
	if err := json.Compact(b, raw); err != nil {
		return fmt.Errorf("%s is not valid JSON: %w", what, err)
	}
	return nil
}

// appendString writes s as a JSON string the way encoding/json does
// without HTML escaping: invalid UTF-8 becomes U+FFFD, and U+2028 and
// U+2029 are escaped.
func appendString(b *bytes.Buffer, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b.WriteString(s[start:i])
			switch c {
			case '"', '\\':
				b.WriteByte('\\')
				b.WriteByte(c)
			case '\n':
				b.WriteString(`\n`)
			case '\r':
				b.WriteString(`\r`)
			case '\t':
				b.WriteString(`\t`)
			case '\b':
				b.WriteString(`\b`)
			case '\f':
				b.WriteString(`\f`)
			default:
				b.WriteString(`\u00`)
				b.WriteByte(hex[c>>4])
				b.WriteByte(hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteString(s[start:i])
			b.WriteString(`\ufffd`)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b.WriteString(s[start:i])
			b.WriteString(`\u202`)
			b.WriteByte(hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b.WriteString(s[start:])
	b.WriteByte('"')
}
