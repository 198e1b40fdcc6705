package manifest

import (
	"bytes"
	"fmt"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// badText returns the offset of the first byte YAML cannot hold (invalid
// UTF-8, NUL, other control characters) with a problem naming it, or -1.
// The allowed characters are those of the YAML spec, as yaml.v3 checks
// them; yaml.v3 reports such bytes without a position. UTF-16 files are
// refused too (their byte order mark is not UTF-8): a manifest is UTF-8.
func badText(src []byte) (int, string) {
	for off := 0; off < len(src); {
		r, size := utf8.DecodeRune(src[off:])
		switch {
		case r == utf8.RuneError && size <= 1:
			return off, fmt.Sprintf("invalid UTF-8 (byte 0x%02X): a manifest is UTF-8 text", src[off])
		case r == 0:
			return off, "NUL byte: a manifest is UTF-8 text"
		case !yamlPrintable(r):
			return off, fmt.Sprintf("control character U+%04X is not allowed in YAML", r)
		}
		off += size
	}
	return -1, ""
}

func yamlPrintable(r rune) bool {
	return r == '\t' || r == '\n' || r == '\r' || (r >= 0x20 && r <= 0x7E) || r == 0x85 ||
		(r >= 0xA0 && r <= 0xD7FF) || (r >= 0xE000 && r <= 0xFFFD) || (r >= 0x10000 && r <= 0x10FFFF)
}

// position returns the 1-based line and column of byte offset off, counting
// lines and columns as yaml.v3 does: CR LF, CR, LF, NEL, LS and PS end a
// line, and a column is a character.
func position(src []byte, off int) (line, col int) {
	line, col = 1, 1
	for i := 0; i < off && i < len(src); {
		r, size := utf8.DecodeRune(src[i:])
		switch {
		case r == '\r' && i+1 < len(src) && src[i+1] == '\n':
			// The LF ends the line.
			col++
		case r == '\n' || r == '\r' || r == 0x85 || r == 0x2028 || r == 0x2029:
			line, col = line+1, 1
		default:
			col++
		}
		i += size
	}
	return line, col
}

// aliasOffset finds the first alias *name in src (preceded by a line start,
// a space or a flow indicator, and followed by the end, a space or a flow
// indicator), skipping comments. yaml.v3 names an alias without an anchor
// but not its place. It returns -1 when there is none.
func aliasOffset(src []byte, name string) int {
	if name == "" {
		return -1
	}
	needle := []byte("*" + name)
	for from := 0; from < len(src); {
		i := bytes.Index(src[from:], needle)
		if i < 0 {
			return -1
		}
		i += from
		end := i + len(needle)
		before := i == 0 || bytes.IndexByte([]byte(" \t\r\n[{,:-?"), src[i-1]) >= 0
		after := end == len(src) || bytes.IndexByte([]byte(" \t\r\n]},"), src[end]) >= 0
		if !before || !after {
			from = i + 1
			continue
		}
		if !inComment(src, i) {
			return i
		}
		// The rest of a comment's line holds no alias.
		if nl := bytes.IndexByte(src[i:], '\n'); nl >= 0 {
			from = i + nl + 1
		} else {
			return -1
		}
	}
	return -1
}

// inComment reports whether offset i follows a " #" or a line-leading #
// on its line (a # inside quotes is taken for a comment too: good enough
// to place a message).
func inComment(src []byte, i int) bool {
	start := bytes.LastIndexByte(src[:i], '\n') + 1
	line := src[start:i]
	return bytes.HasPrefix(bytes.TrimLeft(line, " \t"), []byte("#")) || bytes.Contains(line, []byte(" #"))
}

// displayControl returns the first character of s that does not display
// as itself, or -1: a control character (C0, DEL, C1; a tab and a line
// break are text where lines is set) or a bidirectional control, which
// reorders how the text around it is displayed (U+202A-U+202E,
// U+2066-U+2069). YAML lets a double-quoted scalar hold any of them
// through an escape ("\0", "\x00", "\u202E").
func displayControl(s string, lines bool) rune {
	for _, r := range s {
		switch {
		case lines && (r == '\t' || r == '\n'):
		case r < 0x20, r >= 0x7F && r <= 0x9F:
			return r
		case r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069:
			return r
		}
	}
	return -1
}

// text refuses, in the string n holds for what, a character that does
// not display as itself (see displayControl): names, versions, ledger and
// handler names, enum values and descriptions are shown in logs, the console and
// problems, where a NUL cuts the text short and a right-to-left override
// makes it read as something else. A name is one line; a description may
// hold tabs and line breaks. Nothing is said of a node reported already.
func (c *checker) text(n *yaml.Node, what string, lines bool) {
	if n == nil || c.wrongKind[n] {
		return
	}
	switch r := displayControl(n.Value, lines); {
	case r < 0:
	case r >= 0x202A:
		c.at(n, "%s: bidirectional control character U+%04X is not allowed: it changes the order in which the text displays", what, r)
	default:
		c.at(n, "%s: control character U+%04X is not allowed", what, r)
	}
}
