package jsoncodec

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"
	usersv1 "github.com/collab/collab/proto/collab/users/v1"
	workspacev1 "github.com/collab/collab/proto/collab/workspace/v1"
)

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b  string
		limit int
		want  int
	}{
		{"documentId", "documentId", 2, 0},
		{"documentID", "documentId", 0, 0}, // case does not count
		{"DOCUMENT_ID", "document_id", 0, 0},
		{"documnetId", "documentId", 2, 1}, // two adjacent letters swapped
		{"docmentId", "documentId", 2, 1},
		{"documentIdd", "documentId", 2, 1},
		{"documantId", "documentId", 2, 1},
		{"docmntId", "documentId", 2, 2},
		{"dcmntId", "documentId", 2, 3}, // past the limit: limit+1
		{"userIds", "userId", 1, 1},
		{"usrIdz", "userId", 1, 2},
		{"abc", "cab", 2, 2},
		{"ca", "abc", 3, 3}, // optimal string alignment, not full Damerau–Levenshtein
		{"", "abcd", 4, 4},
		{strings.Repeat("a", 100), strings.Repeat("a", 100), 2, 3}, // longer than any field name: never a near miss
		{"é", "e", 2, 2},                                           // bytes, not letters, outside ASCII
	} {
		if got := editDistance(c.a, c.b, c.limit); got != c.want {
			t.Errorf("editDistance(%q, %q, %d) = %d, want %d", c.a, c.b, c.limit, got, c.want)
		}
	}
}

// osaDistance is the textbook optimal string alignment distance, the full table, ASCII letters
// folded: the reference for editDistance's banded, early-stopping one.
func osaDistance(a, b string) int {
	a, b = strings.ToLower(a), strings.ToLower(b)
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

func TestEditDistanceMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	word := func() string {
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = "abAB_c"[r.IntN(6)]
		}
		return string(b)
	}
	for range 200000 {
		a, b, limit := word(), word(), r.IntN(4)
		want := min(osaDistance(a, b), limit+1)
		if got := editDistance(a, b, limit); got != want {
			t.Fatalf("editDistance(%q, %q, %d) = %d, want %d", a, b, limit, got, want)
		}
	}
}

func TestNearMissRule(t *testing.T) {
	del := desc(&usersv1.DeleteUsersRequest{})
	jwk := desc(&accessv1.Jwk{})
	list := desc(&workspacev1.ListApiKeysRequest{})
	for _, c := range []struct {
		md   protoreflect.MessageDescriptor
		name string
		want string
	}{
		{del, "documentID", "documentId"},
		{del, "DocumentId", "documentId"},
		{del, "document_ID", "documentId"},
		{del, "documentid", "documentId"},
		{del, "documnetId", "documentId"},
		{del, "docmntId", "documentId"}, // two edits of a name of 8 or more
		{del, "organisationId", "organizationId"},
		{del, "userID", "userIds"},  // one edit (and case) from userIds
		{del, "user_id", "userIds"}, // one edit from user_ids
		{del, "folderID", "folderId"},
		{del, "fodlerId", "folderId"},
		{del, "foldId", "folderId"}, // two edits of a name of 8
		{del, "fldId", ""},          // three
		{del, "notifyUsers", ""},    // unrelated: ignored
		{del, "isAdmin", ""},
		{jwk, "X", "x"}, // case alone, however short
		{jwk, "kd", ""}, // an edit of a name under 4 characters
		{jwk, "kty2", ""},
		{list, "pageSze", "pageSize"},
		{list, "pageTokens", "pageToken"},
		{list, "page", ""},
		{list, "pageNumber", ""},
	} {
		if got := nearMiss(c.md, c.name); got != c.want {
			t.Errorf("nearMiss(%s, %q) = %q, want %q", c.md.Name(), c.name, got, c.want)
		}
	}
}

// The rule has no false positives among the API's own names: no field of an API message (by
// either of its names) is a near miss of another field of the same message.
func TestNoAPIFieldIsANearMissOfAnother(t *testing.T) {
	pairs := 0
	for _, mt := range apiTypes(t) {
		fields := mt.Descriptor().Fields()
		for i := 0; i < fields.Len(); i++ {
			for j := 0; j < fields.Len(); j++ {
				if i == j {
					continue
				}
				a, b := fields.Get(i), fields.Get(j)
				for _, an := range []string{a.JSONName(), string(a.Name())} {
					for _, bn := range []string{b.JSONName(), string(b.Name())} {
						pairs++
						if limit := allowedEdits(len(bn)); editDistance(an, bn, limit) <= limit {
							t.Errorf("%s: field %s is a near miss of %s", mt.Descriptor().FullName(), an, bn)
						}
					}
				}
			}
		}
	}
	if pairs < 1000 {
		t.Fatalf("only %d pairs of names compared", pairs)
	}
}

func TestUnmarshalRefusesNearMisses(t *testing.T) {
	for _, c := range []struct {
		name string
		m    proto.Message
		body string
		want string
	}{
		{"the Delete Users case", &usersv1.DeleteUsersRequest{},
			`{"data":{"organizationId":"o","documentID":"d1","userIds":["u1"]}}`, "Unknown field data.documentID; did you mean documentId?"},
		{"in a list of messages", &usersv1.AddUsersRequest{},
			`{"data":{"organizationId":"o","users":[{"userId":"a"},{"userID":"b"}]}}`, "Unknown field data.users[1].userID; did you mean userId?"},
		{"in a map value", &workspacev1.Workspace{},
			`{"data":{"apiKeyList":{"k1":{"apiKeyNmae":"n"}}}}`, "Unknown field data.apiKeyList.k1.apiKeyNmae; did you mean apiKeyName?"},
		{"in a nested message, on protojson's path (a Struct)", &accessv1.AddPermissionsRequest{},
			`{"data":{"user":{"userID":"u"},"permissions":{"context":{"access":{"a":1}}}}}`, "Unknown field data.user.userID; did you mean userId?"},
		{"on protojson's path (a number in a string)", &workspacev1.ListApiKeysRequest{},
			`{"data":{"pageSize":"10","pageTokn":"t"}}`, "Unknown field data.pageTokn; did you mean pageToken?"},
		{"the first fault written wins: a near miss", &workspacev1.ListApiKeysRequest{},
			`{"data":{"PageSize":1,"pageToken":5}}`, "Unknown field data.PageSize; did you mean pageSize?"},
		{"the first fault written wins: a type", &workspacev1.ListApiKeysRequest{},
			`{"data":{"pageToken":5,"PageSize":1}}`, "data.pageToken must be a string."},
		{"a near miss beside a field protojson refuses for its own reasons", &workspacev1.ListApiKeysRequest{},
			`{"data":{"pageSize":" 7 ","pageTokn":"t"}}`, "Unknown field data.pageTokn; did you mean pageToken?"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Unmarshal([]byte(c.body), c.m)
			var ie *InputError
			if !errors.As(err, &ie) || err.Error() != c.want {
				t.Fatalf("Unmarshal = %v, want %q", err, c.want)
			}
			if !proto.Equal(c.m, c.m.ProtoReflect().Type().New().Interface()) {
				t.Fatalf("refused, but the message was filled: %v", c.m)
			}
		})
	}
}

// Unknown fields that are no near miss are still ignored, on both paths.
func TestUnmarshalIgnoresOtherUnknownFields(t *testing.T) {
	var del usersv1.DeleteUsersRequest
	if err := Unmarshal([]byte(`{"data":{"organizationId":"o","documentId":"d","userIds":["u"],"notifyUsers":true,"reason":"x"}}`), &del); err != nil {
		t.Fatal(err)
	}
	if del.GetDocumentId() != "d" || del.GetOrganizationId() != "o" {
		t.Fatalf("decoded %v", &del)
	}
	var add accessv1.AddPermissionsRequest
	if err := Unmarshal([]byte(`{"data":{"user":{"userId":"u","isAdmin":true},"permissions":{"context":{"access":{"documentID":1}}},"extra":{"userID":1}}}`), &add); err != nil {
		t.Fatal(err) // Struct keys are free-form; unknown fields' contents are not looked into
	}
}

// The quick scan that spares most bodies the check's tree never misses a near miss the check
// finds: bodies of random API messages with one key misspelt somewhere.
func TestNearMissScanAgreesWithCheck(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	found := 0
	for _, mt := range apiTypes(t) {
		for range 30 {
			m := mt.New()
			fill(r, m, 3)
			data, err := protojson.MarshalOptions{UseProtoNames: r.IntN(2) == 0}.Marshal(m.Interface())
			if err != nil {
				continue
			}
			data = misspellKey(r, data)
			parsed, err := parseJSON(data)
			if err != nil {
				continue // the misspelling broke an escape
			}
			msg := nearMissIn("data", parsed, mt.Descriptor())
			ahead := (&fastDecoder{b: data}).nearMissAhead(mt.Descriptor())
			if msg != "" {
				found++
				if !ahead {
					t.Fatalf("%s: the scan missed %q in\n%s", mt.Descriptor().FullName(), msg, data)
				}
			}
		}
	}
	if found < 100 {
		t.Fatalf("only %d near misses made: the test hardly compares", found)
	}
}

// misspellKey changes one object key of a JSON text: a letter's case, two letters swapped, or
// one dropped.
func misspellKey(r *rand.Rand, data []byte) []byte {
	var keys [][2]int
	for i := 0; i < len(data); i++ {
		if data[i] != '"' {
			continue
		}
		j := i + 1
		for j < len(data) && data[j] != '"' {
			if data[j] == '\\' {
				j++
			}
			j++
		}
		if k := j + 1; k < len(data) && (data[k] == ':' || data[k] == ' ' && k+1 < len(data) && data[k+1] == ':') {
			keys = append(keys, [2]int{i + 1, j})
		}
		i = j
	}
	if len(keys) == 0 {
		return data
	}
	k := keys[r.IntN(len(keys))]
	key := []byte(string(data[k[0]:k[1]]))
	if len(key) < 2 {
		return data
	}
	p := r.IntN(len(key) - 1)
	switch r.IntN(3) {
	case 0:
		key[p] ^= 0x20
	case 1:
		key[p], key[p+1] = key[p+1], key[p]
	default:
		key = append(key[:p], key[p+1:]...)
	}
	return append(append(append([]byte{}, data[:k[0]]...), key...), data[k[1]:]...)
}
