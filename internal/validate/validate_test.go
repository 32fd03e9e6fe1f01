package validate

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/status"
)

func msg(err error) string { return status.Convert(err).Message() }

func TestID(t *testing.T) {
	if err := ID("documentId", "doc-1 é/ü:#"); err != nil {
		t.Fatalf("ordinary id refused: %v", err)
	}
	cases := map[string]string{
		"":                         "documentId is required.",
		strings.Repeat("a", 257):   "documentId must be at most 256 characters.",
		" padded":                  "documentId must not start or end with white space.",
		"tab\tinside":              "documentId must not contain control characters.",
		"nul\x00":                  "documentId must not contain control characters.",
		"unit\x1fsep":              "documentId must not contain control characters.",
		string([]byte{0xff, 0xfe}): "documentId must be valid UTF-8.",
	}
	for v, want := range cases {
		if got := msg(ID("documentId", v)); got != want {
			t.Errorf("ID(%q) = %q, want %q", v, got, want)
		}
	}
	if OptionalID("folderId", "") != nil || OptionalID("folderId", "a\nb") == nil {
		t.Error("OptionalID")
	}
}

func TestIDs(t *testing.T) {
	got, err := IDs("documentIds", []string{"a", "b", "a"}, true, 30)
	if err != nil || !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("%v %v", got, err)
	}
	many := make([]string, 31)
	for i := range many {
		many[i] = "d" + strconv.Itoa(i)
	}
	for _, c := range []struct {
		vs       []string
		required bool
		want     string
	}{
		{nil, true, "documentIds must contain at least one id."},
		{many, false, "documentIds must contain at most 30 ids."},
		{[]string{"a", ""}, false, "documentIds[1] must not be empty."},
		{[]string{"a", "b\nc"}, false, "documentIds[1] must not contain control characters."},
	} {
		if _, err := IDs("documentIds", c.vs, c.required, 30); msg(err) != c.want {
			t.Errorf("IDs(%v) = %q, want %q", c.vs, msg(err), c.want)
		}
	}
	if got, err := IDs("x", nil, false, 0); err != nil || len(got) != 0 {
		t.Fatalf("optional empty list: %v %v", got, err)
	}
	// A long list keeps the first-seen order without duplicates, as a short one does.
	long, want := make([]string, 0, 20_000), make([]string, 0, 10_000)
	for i := range 10_000 {
		id := "u" + strconv.Itoa((i*7919)%10_000)
		long = append(long, id, id)
		want = append(want, id)
	}
	if got, err := IDs("userIds", long, true, 0); err != nil || !slices.Equal(got, want) {
		t.Fatalf("long list: %d ids, %v", len(got), err)
	}
}

func TestAccessTypeAndRole(t *testing.T) {
	for _, v := range []string{"public", "organizationPrivate", "restricted"} {
		if AccessType("accessType", v) != nil {
			t.Errorf("%s refused", v)
		}
	}
	if msg(AccessType("accessType", "private")) != "accessType must be one of organizationPrivate, restricted, public." || msg(AccessType("accessType", "")) != "accessType is required." {
		t.Error("AccessType refusals")
	}
	if AccessRole("accessRole", "", true) != nil || msg(AccessRole("accessRole", "", false)) != "accessRole is required." || msg(AccessRole("accessRole", "admin", true)) != "accessRole must be one of viewer, editor." {
		t.Error("AccessRole")
	}
	if MaxLength("name", "ééé", 3) != nil || MaxLength("name", "éééé", 3) == nil {
		t.Error("MaxLength counts characters")
	}
}

func TestName(t *testing.T) {
	// Scripts and emoji that need format characters stay writable.
	for _, ok := range []string{
		"", "Ann's team", "Café Zürich", "日本語の名前", "\u0645\u0631\u062D\u0628\u0627",
		"family \U0001F468\u200D\U0001F469\u200D\U0001F467", "\u0645\u06CC\u200C\u062E\u0648\u0627\u0647\u0645", "a\u200Eb", "co\u00ADop", "\u2764\uFE0F",
	} {
		if err := Name("workspaceName", ok, 200); err != nil {
			t.Errorf("Name(%q) refused: %v", ok, err)
		}
	}
	for v, want := range map[string]string{
		"Acme\r\nBcc: evil@example.com": "workspaceName must not contain control characters.",
		"a\nb":                          "workspaceName must not contain control characters.",
		"a\tb":                          "workspaceName must not contain control characters.",
		"nul\x00":                       "workspaceName must not contain control characters.",
		"del\x7f":                       "workspaceName must not contain control characters.",
		"c1\u0085next-line":             "workspaceName must not contain control characters.",
		"csi\u009b":                     "workspaceName must not contain control characters.",
		"line\u2028sep":                 "workspaceName must not contain control characters.",
		"para\u2029sep":                 "workspaceName must not contain control characters.",
		"invoice\u202Efdp.exe":          "workspaceName must not contain control characters.",
		"embed\u202Ax":                  "workspaceName must not contain control characters.",
		"isolate\u2066x\u2069":          "workspaceName must not contain control characters.",
		strings.Repeat("é", 201):        "workspaceName must be at most 200 characters.",
		string([]byte{'a', 0xff}):       "workspaceName must be valid UTF-8.",
	} {
		if got := msg(Name("workspaceName", v, 200)); got != want {
			t.Errorf("Name(%q) = %q, want %q", v, got, want)
		}
	}
}

func TestIsEmailAndURL(t *testing.T) {
	for v, want := range map[string]bool{
		"a@example.com": true, "dev@localhost": true, "a@example": false, "Ann <a@example.com>": false,
		" a@example.com": false, "not-an-email": false, strings.Repeat("a", 250) + "@x.co": false,
	} {
		if IsEmail(v) != want {
			t.Errorf("IsEmail(%q) = %v", v, !want)
		}
	}
	for v, want := range map[string]bool{
		"https://example.com/a.png": true, "http://localhost:3000": true, "javascript:alert(1)": false,
		"/relative": false, "https://": false, "https://x.co/" + strings.Repeat("a", 2048): false,
	} {
		if IsHTTPURL(v) != want {
			t.Errorf("IsHTTPURL(%q) = %v", v, !want)
		}
	}
}

func TestEventType(t *testing.T) {
	for _, ok := range []string{"comment.add", "crdt.update_data", "message.attempt.exhausted", "comment_annotation.status_change", "a1.b2"} {
		if err := EventType("type", ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	form := "type must have the form <feature>.<action>: lowercase letters, digits and _, joined by dots (e.g. comment.add)."
	for v, want := range map[string]string{
		"":                       "type is required.",
		"comment":                form,
		"Comment.add":            form,
		"comment.":               form,
		".add":                   form,
		"comment..add":           form,
		"comment.add ":           form,
		"comment.1add":           form,
		"comment.a-b":            form,
		"comment.ädd":            form,
		strings.Repeat("a.", 60): "type must be at most 100 characters.",
	} {
		if got := msg(EventType("type", v)); got != want {
			t.Errorf("EventType(%q) = %q, want %q", v, got, want)
		}
	}
}

func TestTokenID(t *testing.T) {
	for _, ok := range []string{"", "evt_1", "A-b_9", strings.Repeat("x", 128)} {
		if err := TokenID("id", ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for v, want := range map[string]string{
		"has space":              "id may contain only letters, digits, _ and -.",
		"slash/":                 "id may contain only letters, digits, _ and -.",
		"é":                      "id may contain only letters, digits, _ and -.",
		strings.Repeat("x", 129): "id must be at most 128 characters.",
	} {
		if got := msg(TokenID("id", v)); got != want {
			t.Errorf("TokenID(%q) = %q, want %q", v, got, want)
		}
	}
}
