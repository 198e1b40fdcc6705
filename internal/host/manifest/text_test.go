package manifest

import (
	"strings"
	"testing"
)

// TestUnparsableManifestsHavePositions: files YAML cannot read, empty
// files, undefined aliases and extra documents are problems at a real line
// and column, the same for both kinds of manifest.
func TestUnparsableManifestsHavePositions(t *testing.T) {
	t.Parallel()
	const head = "name: g\nversion: \"1\"\n"
	for _, tc := range []struct {
		name, src string
		want      string // line:col: message
	}{
		{"empty file", "", "1:1: empty manifest"},
		{"blank lines", "\n\n  \n", "1:1: empty manifest"},
		{"only comments", "# later\n", "1:1: empty manifest"},
		{"NUL byte", head + "x: a\x00b\n", "3:5: NUL byte: a manifest is UTF-8 text"},
		{"invalid UTF-8", head + "x: caf\xe9\n", "3:7: invalid UTF-8 (byte 0xE9): a manifest is UTF-8 text"},
		{"truncated UTF-8", head + "x: \xe2\x82", "3:4: invalid UTF-8 (byte 0xE2): a manifest is UTF-8 text"},
		{"columns count characters", head + "x: \u00e9\u00e9\xff\n", "3:6: invalid UTF-8 (byte 0xFF): a manifest is UTF-8 text"},
		{"CR LF line ends", "name: g\r\nversion: \"1\"\r\nx: \x01\r\n", "3:4: control character U+0001 is not allowed in YAML"},
		{"binary", "\x7fELF\x02\x01\x01\x00", "1:1: control character U+007F is not allowed in YAML"},
		{"UTF-16", "\xff\xfen\x00", "1:1: invalid UTF-8 (byte 0xFF): a manifest is UTF-8 text"},
		{"undefined alias", head + "# *a in a comment\nx: [1, *a]\n", "4:8: YAML syntax error: unknown anchor 'a' referenced"},
		{"undefined alias at the start", "*a\n", "1:1: YAML syntax error: unknown anchor 'a' referenced"},
		{"second document", head + "---\nname: h\n", "3:1: a manifest file holds one YAML document; a second starts here"},
		{"second document of garbage", head + "---\n  garbage: {\n", "4:12: YAML syntax error: did not find expected node content"},
		{"tab as indentation", head + "x:\n  a: 1\n\tb: 2\n", "5:1: YAML syntax error: found a tab character that violates indentation"},
		{"character no token starts with", head + "x: @a\n", "3:4: YAML syntax error: found character that cannot start any token"},
		{"second mapping value on a line", head + "x: a: b\n", "3:5: YAML syntax error: mapping values are not allowed in this context"},
		{"quote never closed", head + "x: [a, \"b]\ny: 1\n", "3:8: YAML syntax error: found unexpected end of stream"},
		{"bracket never closed", head + "x: [a, b\ny: 1\n", "3:4: YAML syntax error: did not find expected ',' or ']'"},
		{"bad line after a flow sequence over lines", head + "x:\n  y: [1,\n    2,\n    3]\n  z: 3\n w: 4\n", "8:2: YAML syntax error: did not find expected key"},
		{"bad line after a quoted scalar over lines", head + "x:\n  y: \"multi\n    line\"\n  z: 3\n w: 4\n", "7:2: YAML syntax error: did not find expected key"},
		{"tab before a character no token starts with", head + "x:   \t  @y\n", "3:9: YAML syntax error: found character that cannot start any token"},
		{"bracket never closed before blank lines", head + "x: [a,\n\n\n\n", "3:4: YAML syntax error: did not find expected node content"},
		{"lone CR line ends", "name: g\rversion: \"1\"\rx:\r  a: 1\r b: 2\r", "5:2: YAML syntax error: did not find expected key"},
		{"item indented less than its sequence", head + "x:\n  - a\n - b\n", "5:2: YAML syntax error: did not find expected key"},
		{"item indented more than its sequence", "routes:\n  - path: /a\n    method: GET\n   entity: e\n", "4:4: YAML syntax error: did not find expected '-' indicator (in the sequence that starts at line 2)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, gerr := ParseGateway("m.yaml", []byte(tc.src), nil)
			_, derr := ParseDomain("m.yaml", []byte(tc.src))
			for kind, err := range map[string]error{"gateway": gerr, "domain": derr} {
				diags := Diagnostics("m.yaml", err)
				checkPositions(t, diags)
				// The first problem is the one under test; a manifest with
				// a second document also has the first one's problems.
				found := false
				for _, d := range diags {
					if d.String() == "m.yaml:"+tc.want {
						found = true
					}
				}
				if !found {
					t.Errorf("%s manifest: want m.yaml:%s, got:\n%v", kind, tc.want, err)
				}
			}
		})
	}
}

// TestSecondDocumentStillChecksTheFirst: refusing the second document does
// not hide the first one's problems.
func TestSecondDocumentStillChecksTheFirst(t *testing.T) {
	t.Parallel()
	src := "name: g\nversion: \"1\"\nroutes: []\n---\nname: h\n"
	_, err := ParseGateway("m.yaml", []byte(src), nil)
	got := err.Error()
	for _, want := range []string{"m.yaml:3:9: routes must list at least one route", "m.yaml:4:1: a manifest file holds one YAML document; a second starts here"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
}

// TestFileProblemsHaveNoFakePosition: a problem with the file itself (it
// cannot be read) is printed without a line and column rather than 0:0.
func TestFileProblemsHaveNoFakePosition(t *testing.T) {
	t.Parallel()
	_, err := LoadGatewayFile("testdata/no-such-file.yaml", nil)
	diags := Diagnostics("testdata/no-such-file.yaml", err)
	if len(diags) != 1 || !strings.HasPrefix(diags[0].String(), "testdata/no-such-file.yaml: read gateway manifest: ") {
		t.Fatalf("got %v", diags)
	}
}

// TestDisplayControl: the characters a name may not hold are the control
// characters (C0, DEL, C1) and the bidirectional embeddings, overrides
// and isolates; a description may hold tabs and line breaks.
func TestDisplayControl(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s     string
		lines bool
		want  rune
	}{
		{"Claims v2 — café", false, -1},
		{"a\x00b", false, 0},
		{"a\tb", false, '\t'},
		{"a\tb\nc", true, -1},
		{"a\rb", true, '\r'},
		{"\x1f", true, 0x1F},
		{"\x7f", true, 0x7F},
		{"\u0080", true, 0x80},
		{"\u009f", true, 0x9F},
		{"\u00a0", false, -1},
		{"\u2029\u200f", false, -1}, // a separator and a mark, which reorder nothing
		{"ab\u202acd", false, 0x202A},
		{"\u202e", true, 0x202E},
		{"\u2066", true, 0x2066},
		{"\u2069", true, 0x2069},
		{"\u206a\u2029", false, -1},
	} {
		if got := displayControl(tc.s, tc.lines); got != tc.want {
			t.Errorf("displayControl(%q, %v) = %U, want %U", tc.s, tc.lines, got, tc.want)
		}
	}
}

// TestSortDiagnostics: each file's diagnostics by line, then column,
// the files in the order of their first; those at one place keep their
// order.
func TestSortDiagnostics(t *testing.T) {
	t.Parallel()
	d := func(file string, line, col int, msg string) Diagnostic {
		return Diagnostic{File: file, Line: line, Column: col, Message: msg}
	}
	got := []Diagnostic{d("b", 5, 1, "b5"), d("a", 9, 2, "a9"), d("b", 2, 7, "b2"), d("a", 9, 1, "a9.1"),
		d("b", 5, 1, "b5 again"), d("a", 0, 0, "a read"), d("b", 2, 3, "b2.3")}
	SortDiagnostics(got)
	var msgs []string
	for _, x := range got {
		msgs = append(msgs, x.Message)
	}
	if want := "b2.3 b2 b5 b5 again a read a9.1 a9"; strings.Join(msgs, " ") != want {
		t.Fatalf("got %q\nwant %q", strings.Join(msgs, " "), want)
	}
}
