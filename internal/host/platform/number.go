package platform

import (
	"encoding/json"
	"math/big"
	"strconv"
	"strings"
)

// WholeNumber reads a JSON number that is a whole number in int64, in any
// spelling JSON allows (1700000000000, 1.7e12, 1700000000000.0).
func WholeNumber(n json.Number) (int64, bool) {
	if i, err := n.Int64(); err == nil {
		return i, true
	}
	// The bounds keep big.Rat from building a huge power of ten; a value
	// past them is no int64 anyway.
	if len(n) > 400 || strings.ContainsAny(string(n), "eE") && exponentTooLarge(string(n)) {
		return 0, false
	}
	r, ok := new(big.Rat).SetString(string(n))
	if !ok || !r.IsInt() || !r.Num().IsInt64() {
		return 0, false
	}
	return r.Num().Int64(), true
}

// exponentTooLarge reports an exponent beyond ±400.
func exponentTooLarge(s string) bool {
	i := strings.IndexAny(s, "eE")
	e, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
	return err != nil || e > 400 || e < -400
}
