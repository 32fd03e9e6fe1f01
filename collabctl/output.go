package collabctl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// printJSON writes raw JSON indented, as the API sent it (field order and numbers kept).
func printJSON(w io.Writer, raw json.RawMessage) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return fmt.Errorf("the answer is not valid JSON: %w", err)
	}
	buf.WriteByte('\n')
	_, err := w.Write(terminalSafeJSON(buf.Bytes()))
	return err
}

// printValue writes v as indented JSON.
func printValue(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("writing JSON: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", terminalSafeJSON(b))
	return err
}

// terminalSafeJSON escapes in JSON text what a terminal would act on and JSON lets through
// raw: characters that are not printable (C1 controls such as U+009B, DEL, bidirectional
// overrides) become \uXXXX escapes, and bytes that are not UTF-8 U+FFFD. Text from the server
// (a webhook receiver's answer) reaches the operator's terminal with -o json too. Outside its
// strings JSON is ASCII, so only strings change, and they decode to the same text.
func terminalSafeJSON(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf && c != 0x7f {
			out = append(out, c)
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			out = append(out, `\ufffd`...)
		case unicode.IsPrint(r):
			out = append(out, b[i:i+size]...)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
		default:
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		i += size
	}
	return out
}

// table writes rows under a header, aligned, every cell made safe for a terminal.
type table struct {
	tw *tabwriter.Writer
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	if len(header) > 0 {
		t.row(header...)
	}
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		cells[i] = sanitize(c)
		if cells[i] == "" {
			cells[i] = "-"
		}
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// sanitize makes text from the server safe to print: control characters (a terminal's escape
// sequences, line breaks in a webhook receiver's answer) and bytes that are not UTF-8 (0x9b is
// an escape sequence's start to some terminals) become visible escapes.
func sanitize(s string) string {
	safe := func(r rune, size int) bool {
		return (unicode.IsPrint(r) || r == ' ') && !(r == utf8.RuneError && size == 1)
	}
	clean := true
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !safe(r, size) {
			clean = false
			break
		}
		i += size
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case safe(r, size):
			b.WriteString(s[i : i+size])
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	return b.String()
}

// cell renders a JSON value for a table: strings as they are, anything else as compact JSON.
func cell(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case json.Number:
		return x.String()
	case bool:
		return fmt.Sprint(x)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// decode reads raw JSON keeping numbers exact.
func decode(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("the answer is not valid JSON: %w", err)
	}
	return v, nil
}

// printGeneric writes any JSON value as a table: an array of objects as rows under the union of
// their keys, an object as NAME/VALUE rows (an object holding one array of objects, a page,
// as that array's table and then its other fields), anything else as it is.
func printGeneric(w io.Writer, v any) error {
	switch x := v.(type) {
	case []any:
		// An empty list prints as [] below: a table without rows would print nothing at all.
		if rows, ok := objects(x); ok && len(rows) > 0 {
			return objectTable(w, rows)
		}
	case map[string]any:
		// Results keyed by id (Add Organizations' {"o1": {...}}): a table with the key first.
		if keys := sortedKeys(x); len(keys) > 0 {
			rows := make([]map[string]any, 0, len(keys))
			for _, k := range keys {
				if m, ok := x[k].(map[string]any); ok {
					rows = append(rows, m)
				}
			}
			if len(rows) == len(keys) {
				return keyedTable(w, keys, rows)
			}
		}
		var listKey string
		for k, f := range x {
			if l, ok := f.([]any); ok && len(l) > 0 {
				if _, ok := objects(l); ok {
					if listKey != "" {
						listKey = ""
						break
					}
					listKey = k
				}
			}
		}
		if listKey != "" {
			rows, _ := objects(x[listKey].([]any))
			if err := objectTable(w, rows); err != nil {
				return err
			}
		}
		t := newTable(w)
		for _, k := range sortedKeys(x) {
			if k != listKey {
				t.row(k+":", cell(x[k]))
			}
		}
		return t.flush()
	}
	_, err := fmt.Fprintln(w, sanitize(cell(v)))
	return err
}

func objects(l []any) ([]map[string]any, bool) {
	rows := make([]map[string]any, 0, len(l))
	for _, e := range l {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, false
		}
		rows = append(rows, m)
	}
	return rows, true
}

func objectTable(w io.Writer, rows []map[string]any) error {
	return keyedTable(w, nil, rows)
}

// keyedTable writes rows under the union of their fields, each after its key when keys is set.
func keyedTable(w io.Writer, keys []string, rows []map[string]any) error {
	seen := map[string]bool{}
	var cols []string
	for _, r := range rows {
		for _, k := range sortedKeys(r) {
			if !seen[k] {
				seen[k] = true
				cols = append(cols, k)
			}
		}
	}
	sort.Strings(cols)
	var header []string
	if keys != nil {
		header = append(header, "KEY")
	}
	for _, c := range cols {
		header = append(header, strings.ToUpper(c))
	}
	t := newTable(w, header...)
	for i, r := range rows {
		var cells []string
		if keys != nil {
			cells = append(cells, keys[i])
		}
		for _, c := range cols {
			cells = append(cells, cell(r[c]))
		}
		t.row(cells...)
	}
	return t.flush()
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// field walks nested objects by key: field(v, "data", "settings").
func field(v any, path ...string) any {
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}
