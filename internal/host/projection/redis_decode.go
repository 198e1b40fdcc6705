package projection

import (
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// Decoding bucket hashes and load replies.

// hashField says what a bucket hash field holds (see redis_lua.go): the
// fact count, or of one aggregated field the count of numeric values, the
// minimum, the maximum or one limb of the sum at one scale.
type hashField struct {
	kind  byte // hfN, hfCount, hfLo, hfHi or hfSum
	field int  // index into schema.fields
	scale int32
	limb  int
}

const (
	hfN byte = iota + 1
	hfCount
	hfLo
	hfHi
	hfSum
)

// hashFieldsOf lists the bucket hash fields of a schema by name: n, and per
// field c|, lo|, hi| and the sum limbs s|<name>|<scale>|<limb> for scales
// up to 18 and limbs up to 2 (the ones numbers of input facts produce).
// Other names go through hashDecoder.other.
func hashFieldsOf(s *schema) map[string]hashField {
	m := make(map[string]hashField, 1+len(s.fields)*(3+19*3))
	m["n"] = hashField{kind: hfN}
	for i := range s.fields {
		fs := &s.fields[i]
		m[fs.cName] = hashField{kind: hfCount, field: i}
		m[fs.loName] = hashField{kind: hfLo, field: i}
		m[fs.hiName] = hashField{kind: hfHi, field: i}
		for sc := range fs.sNames {
			for li := range fs.sNames[sc] {
				m[fs.sNames[sc][li]] = hashField{kind: hfSum, field: i, scale: int32(sc), limb: li}
			}
		}
	}
	return m
}

// limbKey identifies the sum of one field at one scale.
type limbKey struct {
	field int
	scale int32
}

// hashDecoder decodes the fields of one bucket hash into a cell.
type hashDecoder struct {
	s     *schema
	c     *cell
	names map[string]int // field name -> index, for hash fields outside s.hashFields
	// limbs collects sums with limbs beyond the first, which need big
	// arithmetic.
	limbs map[limbKey]*big.Int
}

// bytesOrString is what hash fields and values arrive as: strings from
// go-redis replies, bytes from raw replies.
type bytesOrString interface{ ~string | ~[]byte }

// decodeField decodes one field and its value.
func decodeField[T bytesOrString](d *hashDecoder, f, v T) error {
	hf, ok := d.s.hashFields[string(f)]
	if !ok {
		return d.other(string(f), string(v))
	}
	c := d.c
	switch hf.kind {
	case hfN:
		c.n, _ = atoi64(v)
	case hfCount:
		c.f[hf.field].cnt, _ = atoi64(v)
	case hfLo, hfHi:
		n, ok := parseStored(string(v))
		if !ok {
			return fmt.Errorf("projection: corrupt bucket value %s=%q", f, v)
		}
		if hf.kind == hfLo {
			c.f[hf.field].lo = n
		} else {
			c.f[hf.field].hi = n
		}
	case hfSum:
		lv, ok := atoi64(v)
		if !ok {
			return fmt.Errorf("projection: corrupt bucket sum %s=%q", f, v)
		}
		d.addLimb(hf.field, hf.scale, hf.limb, lv)
	}
	return nil
}

// atoi64 parses a decimal integer as strconv.ParseInt(v, 10, 64) does,
// without converting bytes to a string.
func atoi64[T bytesOrString](v T) (int64, bool) {
	if len(v) == 0 || len(v) > 19 {
		n, err := strconv.ParseInt(string(v), 10, 64)
		return n, err == nil
	}
	i, neg := 0, false
	switch v[0] {
	case '-':
		neg, i = true, 1
	case '+':
		i = 1
	}
	if i == len(v) {
		return 0, false
	}
	var u uint64 // 18 digits and a sign at most here: no overflow
	for ; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		u = u*10 + uint64(c-'0')
	}
	if len(v) == 19 && v[0] != '-' && v[0] != '+' {
		// 19 digits may overflow an int64.
		n, err := strconv.ParseInt(string(v), 10, 64)
		return n, err == nil
	}
	if neg {
		return -int64(u), true
	}
	return int64(u), true
}

// addLimb adds limb li (base 10^9) of a sum at a scale.
func (d *hashDecoder) addLimb(fi int, scale int32, li int, lv int64) {
	fc := &d.c.f[fi]
	if li == 0 {
		fc.sum = addNumbers(fc.sum, number{m: lv, scale: scale})
		return
	}
	if d.limbs == nil {
		d.limbs = map[limbKey]*big.Int{}
	}
	lk := limbKey{fi, scale}
	if d.limbs[lk] == nil {
		d.limbs[lk] = new(big.Int)
	}
	t := big.NewInt(lv)
	t.Mul(t, new(big.Int).Exp(big.NewInt(limbBase), big.NewInt(int64(li)), nil))
	d.limbs[lk].Add(d.limbs[lk], t)
}

// other decodes a field that is not in s.hashFields: a sum at a scale
// above 18 or a limb above 2; fields of other configurations are ignored.
func (d *hashDecoder) other(f, v string) error {
	bar := strings.IndexByte(f, '|')
	if bar < 0 {
		return nil
	}
	kind, rest := f[:bar], f[bar+1:]
	if kind != "s" {
		return nil
	}
	// s|<field>|<scale>|<limb>; the field name has no '|'.
	b1 := strings.IndexByte(rest, '|')
	if b1 < 0 {
		return nil
	}
	fi, ok := d.names[rest[:b1]]
	if !ok {
		return nil
	}
	sl := rest[b1+1:]
	b2 := strings.IndexByte(sl, '|')
	if b2 < 0 {
		return nil
	}
	sc, err1 := strconv.Atoi(sl[:b2])
	li, err2 := strconv.Atoi(sl[b2+1:])
	lv, err3 := strconv.ParseInt(v, 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return fmt.Errorf("projection: corrupt bucket sum %s=%q", f, v)
	}
	d.addLimb(fi, int32(sc), li, lv)
	return nil
}

// finish adds the sums that had several limbs.
func (d *hashDecoder) finish() {
	for lk, m := range d.limbs {
		d.c.f[lk.field].sum = addNumbers(d.c.f[lk.field].sum, normalizeBig(m, lk.scale))
	}
	d.limbs = nil
}

// cellFromFields decodes a bucket hash (field, value, field, value, ...).
func cellFromFields(s *schema, h []string, names map[string]int) (*cell, error) {
	c := newCell(s)
	d := hashDecoder{s: s, c: c, names: names}
	for i := 0; i+1 < len(h); i += 2 {
		if err := decodeField(&d, h[i], h[i+1]); err != nil {
			return nil, err
		}
	}
	d.finish()
	return c, nil
}

// cellFromHash decodes a bucket hash given as a reply array.
func cellFromHash(s *schema, h []any, names map[string]int) (*cell, error) {
	fields := make([]string, len(h))
	for i, v := range h {
		fields[i], _ = v.(string)
	}
	return cellFromFields(s, fields, names)
}

// decodeRawHash decodes the raw reply of HGETALL, a RESP3 map or a RESP2
// array of field and value strings, into c (whose fields are zero).
func decodeRawHash(d *hashDecoder, c *cell, raw []byte) error {
	typ, n, p, err := respLine(raw, 0)
	if err != nil {
		return err
	}
	switch {
	case typ == '%':
	case typ == '*' && n%2 == 0:
		n /= 2
	default:
		return fmt.Errorf("projection: unexpected reply to HGETALL: %.40q", raw)
	}
	d.c = c
	var f, v []byte
	for i := 0; i < n; i++ {
		if f, p, err = respString(raw, p); err != nil {
			return err
		}
		if v, p, err = respString(raw, p); err != nil {
			return err
		}
		if err := decodeField(d, f, v); err != nil {
			return err
		}
	}
	d.finish()
	return nil
}

var errRESP = errors.New("projection: malformed Redis reply")

// respLine reads the RESP line at raw[p:]: its type byte, the length it
// carries (-1 for a null), and the position after it. An error reply is
// returned as an error.
func respLine(raw []byte, p int) (typ byte, n int, next int, err error) {
	if p >= len(raw) {
		return 0, 0, 0, errRESP
	}
	typ = raw[p]
	end := p + 1
	for end < len(raw) && raw[end] != '\r' {
		end++
	}
	if end+1 >= len(raw) || raw[end+1] != '\n' {
		return 0, 0, 0, errRESP
	}
	line := raw[p+1 : end]
	next = end + 2
	switch typ {
	case '-', '!':
		if typ == '!' {
			// A blob error: its text follows.
			m, ok := atoi64(line)
			if !ok || m < 0 || next+int(m) > len(raw) {
				return 0, 0, 0, errRESP
			}
			line = raw[next : next+int(m)]
		}
		return 0, 0, 0, fmt.Errorf("projection: Redis: %s", line)
	case '+':
		return typ, len(line), next, nil
	case '_':
		return typ, -1, next, nil
	}
	m, ok := atoi64(line)
	if !ok || m < -1 {
		return 0, 0, 0, errRESP
	}
	return typ, int(m), next, nil
}

// respString reads a bulk or simple string at raw[p:].
func respString(raw []byte, p int) ([]byte, int, error) {
	typ, n, next, err := respLine(raw, p)
	if err != nil {
		return nil, 0, err
	}
	switch typ {
	case '+':
		return raw[p+1 : p+1+n], next, nil
	case '$':
		if n < 0 || next+n+2 > len(raw) || raw[next+n] != '\r' || raw[next+n+1] != '\n' {
			return nil, 0, errRESP
		}
		return raw[next : next+n], next + n + 2, nil
	}
	return nil, 0, errRESP
}

// respSkip returns the position after the RESP value at raw[p:].
func respSkip(raw []byte, p int) (int, error) {
	if p >= len(raw) {
		return 0, errRESP
	}
	switch raw[p] {
	case '+', ',', '#', '(':
		end := p + 1
		for end < len(raw) && raw[end] != '\r' {
			end++
		}
		if end+1 >= len(raw) || raw[end+1] != '\n' {
			return 0, errRESP
		}
		return end + 2, nil
	}
	typ, n, next, err := respLine(raw, p)
	if err != nil {
		return 0, err
	}
	switch typ {
	case ':', '_':
		return next, nil
	case '$', '=':
		if n < 0 {
			return next, nil
		}
		if next+n+2 > len(raw) {
			return 0, errRESP
		}
		return next + n + 2, nil
	case '*', '~', '>', '%', '|':
		if typ == '%' || typ == '|' {
			n *= 2
		}
		for i := 0; i < n; i++ {
			if next, err = respSkip(raw, next); err != nil {
				return 0, err
			}
		}
		if typ == '|' { // an attribute precedes the value it is about
			return respSkip(raw, next)
		}
		return next, nil
	}
	return 0, errRESP
}

func fieldNames(s *schema) map[string]int {
	names := make(map[string]int, len(s.fields))
	for i, f := range s.fields {
		names[f.name] = i
	}
	return names
}

func distinctFields(s *schema) (names []string, idx []int) {
	for i, f := range s.fields {
		if f.distinct {
			names = append(names, f.name)
			idx = append(idx, i)
		}
	}
	return names, idx
}
