package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/factline/factline/internal/host/platform"
	"github.com/factline/factline/internal/host/store"
)

// defaultFields are the fact object's fields when include_fields is not
// set: the contract's id, type, subtype, timestamp and data.
var defaultFields = []string{"fact_id", "fact_type", "fact_subtype", "timestamp", "data"}

// isoMillis is the ISO 8601 form of the delivered body's timestamp.
const isoMillis = "2006-01-02T15:04:05.000Z07:00"

// iso renders t in UTC with milliseconds, for example
// 2026-11-21T15:04:05.123Z.
func iso(t time.Time) string { return t.UTC().Format(isoMillis) }

// body is the delivered body, with the contract's fields in a fixed order.
type body struct {
	DeliveryID    string             `json:"delivery_id"`
	Timestamp     string             `json:"timestamp"`
	Trigger       string             `json:"trigger"`
	ConfigVersion int64              `json:"config_version"`
	Fact          json.RawMessage    `json:"fact"`
	FullFact      *platform.FactView `json:"full_fact,omitempty"`
}

// BuildPayload renders the body delivered for fact f under payload
// settings p. The fact object holds the default fields (id, type, subtype,
// timestamp, data) or those include_fields names, in that order, with
// field_mapping's renames applied; a renamed data.<key> moves out of data
// to the fact object under its new name. include_full_fact adds
// full_fact, the fact as GET /v1/facts/:id returns it.
func BuildPayload(p PayloadSettings, f *store.Fact, deliveryID, trigger string, configVersion int64, created time.Time) ([]byte, error) {
	fact, err := factObject(p, f)
	if err != nil {
		return nil, err
	}
	return payloadWith(p, f, fact, deliveryID, trigger, configVersion, created)
}

// payloadWith renders the body around the fact object factObject made
// (compact JSON), which configs with the same payload settings share.
func payloadWith(p PayloadSettings, f *store.Fact, fact json.RawMessage, deliveryID, trigger string, configVersion int64, created time.Time) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if p.IncludeFullFact {
		v := platform.NewFactView(f)
		b := body{DeliveryID: deliveryID, Timestamp: iso(created), Trigger: trigger, ConfigVersion: configVersion, Fact: fact, FullFact: &v}
		if err := enc.Encode(b); err != nil {
			return nil, err
		}
		return bytes.TrimRight(buf.Bytes(), "\n"), nil
	}
	// The body's fields written in place: the encoder would check and
	// compact the fact object again for every delivery of the fact.
	buf.Grow(len(fact) + len(deliveryID) + len(trigger) + 112)
	buf.WriteString(`{"delivery_id":`)
	if err := enc.Encode(deliveryID); err != nil {
		return nil, err
	}
	buf.Truncate(buf.Len() - 1)
	buf.WriteString(`,"timestamp":"`)
	buf.WriteString(iso(created))
	buf.WriteString(`","trigger":`)
	if err := enc.Encode(trigger); err != nil {
		return nil, err
	}
	buf.Truncate(buf.Len() - 1)
	buf.WriteString(`,"config_version":`)
	buf.WriteString(strconv.FormatInt(configVersion, 10))
	buf.WriteString(`,"fact":`)
	buf.Write(fact)
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// object writes a JSON object with keys in insertion order.
type object struct {
	buf  bytes.Buffer
	keys map[string]bool
}

func (o *object) add(key string, raw []byte) {
	if o.keys == nil {
		o.keys = map[string]bool{}
		o.buf.WriteByte('{')
	}
	if o.keys[key] {
		return
	}
	if len(o.keys) > 0 {
		o.buf.WriteByte(',')
	}
	o.keys[key] = true
	k, _ := json.Marshal(key)
	o.buf.Write(k)
	o.buf.WriteByte(':')
	o.buf.Write(raw)
}

func (o *object) bytes() []byte {
	if o.keys == nil {
		return []byte("{}")
	}
	return append(o.buf.Bytes(), '}')
}

func factObject(p PayloadSettings, f *store.Fact) (json.RawMessage, error) {
	fields := p.IncludeFields
	if len(fields) == 0 {
		fields = defaultFields
	}
	var (
		data     map[string]json.RawMessage
		dataKeys []string
	)
	if needsDataKeys(p) {
		var err error
		if data, dataKeys, err = decodeData(f.Data); err != nil {
			return nil, fmt.Errorf("fact %s data: %w", f.ID, err)
		}
	}
	var out object
	var partial object // data.<key> fields kept inside data
	havePartial := false
	for _, name := range fields {
		if k, ok := strings.CutPrefix(name, "data."); ok {
			v, present := data[k]
			if !present {
				continue
			}
			if to := p.FieldMapping[name]; to != "" {
				out.add(to, v)
			} else {
				partial.add(k, v)
				havePartial = true
			}
			continue
		}
		key := outputKey(name, p.FieldMapping)
		if name == "data" && data == nil {
			// The whole data object, as recorded.
			var buf bytes.Buffer
			raw := f.Data
			if len(bytes.TrimSpace(raw)) == 0 {
				raw = json.RawMessage("{}")
			}
			if err := json.Compact(&buf, raw); err != nil {
				return nil, fmt.Errorf("fact %s data: %w", f.ID, err)
			}
			out.add(key, buf.Bytes())
			continue
		}
		if name == "data" {
			// A renamed data.<key> leaves the data object.
			var d object
			for _, k := range dataKeys {
				if to := p.FieldMapping["data."+k]; to != "" {
					continue
				}
				d.add(k, data[k])
			}
			out.add(key, d.bytes())
			for _, k := range dataKeys {
				if to := p.FieldMapping["data."+k]; to != "" {
					out.add(to, data[k])
				}
			}
			continue
		}
		out.add(key, scalarField(name, f))
	}
	if havePartial {
		out.add(outputKey("data", p.FieldMapping), partial.bytes())
	}
	if data == nil {
		return out.bytes(), nil // every part is compact already
	}
	// Values picked from the data keep their inner spacing: compact once.
	var compact bytes.Buffer
	if err := json.Compact(&compact, out.bytes()); err != nil {
		return nil, fmt.Errorf("fact %s: %w", f.ID, err)
	}
	return compact.Bytes(), nil
}

// needsDataKeys reports whether the payload picks or renames single keys
// of the data (otherwise data is sent whole, without decoding it).
func needsDataKeys(p PayloadSettings) bool {
	for _, f := range p.IncludeFields {
		if strings.HasPrefix(f, "data.") {
			return true
		}
	}
	for f := range p.FieldMapping {
		if strings.HasPrefix(f, "data.") {
			return true
		}
	}
	return false
}

// scalarField renders one non-data field of the fact.
func scalarField(name string, f *store.Fact) []byte {
	var v any
	switch name {
	case "fact_id":
		v = f.ID
	case "fact_type":
		v = f.Type
	case "fact_subtype":
		v = f.Subtype
	case "timestamp":
		v = f.Timestamp
	case "entity_id":
		v = f.EntityID
	case "entity_type":
		v = f.EntityType
	case "source_id":
		v = f.SourceID
	case "trace_id":
		v = f.TraceID
	case "created_at":
		v = f.CreatedAt
	}
	b, _ := json.Marshal(v)
	return b
}

// decodeData splits a fact's data object into raw values (numbers stay as
// written) and its keys in document order.
func decodeData(raw json.RawMessage) (map[string]json.RawMessage, []string, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return map[string]json.RawMessage{}, nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, nil, fmt.Errorf("not a JSON object")
	}
	vals := map[string]json.RawMessage{}
	var keys []string
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		k, _ := kt.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, err
		}
		if _, dup := vals[k]; !dup {
			keys = append(keys, k)
		}
		vals[k] = v
	}
	return vals, keys, nil
}
