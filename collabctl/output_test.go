package collabctl

import (
	"bytes"
	"strings"
	"testing"
)

// Tables of any result: rows of a list, rows of results keyed by id, name/value pairs; text from
// the server cannot reach the terminal as control characters.
func TestPrintGeneric(t *testing.T) {
	for _, c := range []struct {
		name, raw string
		want      []string
	}{
		{"list", `[{"b": 1, "a": "x"}, {"a": "y", "c": true}]`, []string{"A  B  C", "x  1  -", "y  -  true"}},
		{"empty list", `[]`, []string{"[]"}},
		{"keyed", `{"o2": {"success": false, "message": "no"}, "o1": {"success": true}}`, []string{"KEY  MESSAGE  SUCCESS", "o1   -        true", "o2   no       false"}},
		{"page", `{"items": [{"id": "i1"}], "done": true, "next": null}`, []string{"ID", "i1", "done:  true", "next:  -"}},
		{"pairs", `{"name": "n", "tags": ["a", "b"], "n": 12345678901234567890}`, []string{"n:     12345678901234567890", "name:  n", `tags:  ["a","b"]`}},
		{"escapes", `{"response": "ok\u001b[31m red\nnext"}`, []string{`response:  ok\x1b[31m red\nnext`}},
	} {
		v, err := decode([]byte(c.raw))
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := printGeneric(&out, v); err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, l := range strings.Split(strings.TrimRight(out.String(), "\n"), "\n") {
			lines = append(lines, strings.TrimRight(l, " "))
		}
		if strings.Join(lines, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("%s:\n%s\nwant:\n%s", c.name, strings.Join(lines, "\n"), strings.Join(c.want, "\n"))
		}
	}
}

// Text that is not JSON (an error's words, which may quote what a server sent) is escaped too,
// bytes that are not UTF-8 among it: 0x9b starts an escape sequence on some terminals.
func TestSanitize(t *testing.T) {
	for in, want := range map[string]string{
		"plain text, é and 漢字":     "plain text, é and 漢字",
		"a\x9b31mb":                `a\x9b31mb`,
		"bell\a tab\t esc\x1b[0m":  `bell\a tab\t esc\x1b[0m`,
		"rtl\u202eoverride":        `rtl\u202eoverride`,
		"cut \xe6\xbc":             `cut \xe6\xbc`,
		"replacement \ufffd stays": "replacement \ufffd stays",
	} {
		if got := sanitize(in); got != want {
			t.Errorf("sanitize(%q) = %q, want %q", in, got, want)
		}
	}
}
