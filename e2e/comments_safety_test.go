package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/collab/collab/internal/testkit/xsstest"
)

// refusedHTML reports whether the content rule refuses html as sent (docs/comments.md,
// "Text, sizes and refusals"): invalid UTF-8, or a control character other than tab, line feed
// and carriage return.
func refusedHTML(html string) bool {
	if !utf8.ValidString(html) {
		return true
	}
	return strings.ContainsFunc(html, func(r rune) bool {
		return r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r >= 0x7f && r <= 0x9f
	})
}

// commentsOf reads a thread's comments with Get Comments, by commentText.
func commentsOf(t *testing.T, s *system, k map[string]string, doc, ann string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, c := range s.call("/v2/commentannotations/comments/get", k, map[string]any{"organizationId": "o", "documentId": doc, "annotationId": ann}).ok(t)["data"].([]any) {
		m := c.(map[string]any)
		text, _ := m["commentText"].(string)
		out[text] = m
	}
	return out
}

// Every XSS vector of the sanitiser's list (services/comments/richtext/testdata/xss.txt), sent as
// commentHtml through Add Comments over HTTP in batches of 30, comes back inert: as Get
// Comments reads it, and as the live stream's real EventSource receives it, where it is the
// same HTML. The checker parses it as a browser would (internal/testkit/xsstest). A vector the
// content rule refuses (control characters) is refused whole, with the field named, and adds
// nothing (docs/comments.md, "Content safety").
func TestCommentsXSSThroughTheAPI(t *testing.T) {
	t.Parallel()
	vectors, err := xsstest.Vectors()
	if err != nil {
		t.Fatal(err)
	}
	s := newSystem(t)
	k := s.devKey()
	s.restrictedDocs(t, k, "d")
	stream := openStream(t, s.streamURL("o", "d", s.commentToken(t, k, "vi", "viewer", "d")))

	var accepted, refusedVs []xsstest.Vector
	for _, v := range vectors {
		if refusedHTML(v.HTML) {
			refusedVs = append(refusedVs, v)
		} else {
			accepted = append(accepted, v)
		}
	}
	if len(accepted) < 50 || len(refusedVs) == 0 {
		t.Fatalf("%d vectors accepted by the rule and %d refused: the list changed", len(accepted), len(refusedVs))
	}
	text := func(v xsstest.Vector) string { return fmt.Sprintf("vector of line %d", v.Line) }
	byText := map[string]xsstest.Vector{}
	threads := map[string][]xsstest.Vector{}
	for i := 0; i < len(accepted); i += 30 {
		batch := accepted[i:min(i+30, len(accepted))]
		ann := fmt.Sprintf("x%d", i/30)
		addThread(t, s, k, "d", ann, "opening")
		var data []any
		for _, v := range batch {
			data = append(data, map[string]any{"commentText": text(v), "commentHtml": v.HTML, "from": map[string]any{"userId": "u1"}})
			byText[text(v)] = v
		}
		ids := s.call("/v2/commentannotations/comments/add", k, map[string]any{"organizationId": "o", "documentId": "d", "annotationId": ann, "commentData": data}).
			ok(t)["data"].([]any)
		if len(ids) != len(batch) {
			t.Fatalf("batch %s: %d ids for %d comments", ann, len(ids), len(batch))
		}
		threads[ann] = batch
	}

	// Get Comments.
	stored := map[string]string{}
	checked := 0
	for ann, batch := range threads {
		got := commentsOf(t, s, k, "d", ann)
		for _, v := range batch {
			c, ok := got[text(v)]
			if !ok {
				t.Fatalf("%s: the comment of line %d is missing", ann, v.Line)
			}
			html, _ := c["commentHtml"].(string)
			if p := xsstest.ActiveContent(html); len(p) > 0 {
				t.Errorf("line %d: %q came back from Get Comments as %q, active: %v", v.Line, v.HTML, html, p)
			}
			stored[text(v)] = html
			checked++
		}
	}
	// The live stream: every comment of every event's annotation, as EventSource received it.
	seen := map[string]bool{}
	for range len(threads) + len(accepted) {
		ch := nextChange(t, stream)
		for _, c := range ch.comments() {
			txt, _ := c["commentText"].(string)
			v, isVector := byText[txt]
			if !isVector {
				continue
			}
			html, _ := c["commentHtml"].(string)
			if p := xsstest.ActiveContent(html); len(p) > 0 {
				t.Errorf("line %d: %q came on the stream as %q, active: %v", v.Line, v.HTML, html, p)
			}
			if html != stored[txt] {
				t.Errorf("line %d: the stream says %q, Get Comments %q", v.Line, html, stored[txt])
			}
			seen[txt] = true
		}
	}
	if len(seen) != len(accepted) || checked != len(accepted) {
		t.Fatalf("checked %d vectors from Get and %d from the stream, of %d", checked, len(seen), len(accepted))
	}

	// Refused vectors: the whole request, with the field named; nothing added, nothing on
	// the stream (the next event is the next change).
	for _, v := range refusedVs {
		r := s.call("/v2/commentannotations/comments/add", k, map[string]any{"organizationId": "o", "documentId": "d", "annotationId": "x0",
			"commentData": []any{map[string]any{"commentText": text(v), "commentHtml": v.HTML, "from": map[string]any{"userId": "u1"}}}})
		r.fails(t, 400, "INVALID_ARGUMENT", "")
		if msg := r.body["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "commentHtml") {
			t.Errorf("line %d refused with %q, which does not name commentHtml", v.Line, msg)
		}
	}
	if n := len(commentsOf(t, s, k, "d", "x0")); n != 31 {
		t.Fatalf("thread x0 holds %d comments after the refusals, want 31", n)
	}
	reply(t, s, k, "d", "x0", "after the refusals")
	if ch := nextChange(t, stream); ch.typ != "comment.add" || ch.annID != "x0" || ch.commentID != 32 {
		t.Fatalf("after the refusals the stream sent %+v", ch)
	}
	t.Logf("%d vectors inert through Get Comments and the stream, %d refused by the content rule", len(accepted), len(refusedVs))
}

// Bad input over HTTP, with K headers and with end users' JWTs: ids with characters they may
// not hold, sizes past the limits, values of the wrong JSON type, another workspace's key
// naming the first's organization and threads, a viewer acting on another's comment or as
// another user, an expired token. Each gets a clear 4xx in the error envelope, and nothing
// changes: Get reads the thread as it was, and the live stream's next event is the next valid
// change (docs/comments.md, "Limits", "End users", "Content safety").
func TestCommentsBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	k := s.devKey()
	s.restrictedDocs(t, k, "d")
	ed := map[string]string{"Authorization": "Bearer " + s.commentToken(t, k, "ed", "editor", "d")}
	vi := map[string]string{"Authorization": "Bearer " + s.commentToken(t, k, "vi", "viewer", "d")}
	stream := openStream(t, s.streamURL("o", "d", strings.TrimPrefix(vi["Authorization"], "Bearer ")))
	s.call("/v2/commentannotations/add", ed, map[string]any{"organizationId": "o", "documentId": "d", "commentAnnotations": []any{map[string]any{
		"annotationId": "a1", "commentData": []any{map[string]any{"commentText": "the editor's", "commentHtml": "<b>the editor's</b>"}}}}}).data(t, "")
	before := nextChange(t, stream)

	// A second workspace's key: the first's organization does not exist for it.
	wsID, wsToken := s.newWorkspace("other-tenant@example.com")
	key2, auth2 := s.newKey(wsID, wsToken)
	k2 := keyHeaders(key2, auth2)

	loc := func(extra map[string]any) map[string]any {
		out := map[string]any{"organizationId": "o", "documentId": "d"}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	comment := func(fields map[string]any) []any {
		c := map[string]any{"commentText": "x", "from": map[string]any{"userId": "u1"}}
		for k, v := range fields {
			c[k] = v
		}
		return []any{c}
	}
	ids := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = fmt.Sprintf("id%d", i)
		}
		return out
	}
	const (
		add     = "/v2/commentannotations/add"
		get     = "/v2/commentannotations/get"
		update  = "/v2/commentannotations/update"
		del     = "/v2/commentannotations/delete"
		cAdd    = "/v2/commentannotations/comments/add"
		cUpdate = "/v2/commentannotations/comments/update"
		cDelete = "/v2/commentannotations/comments/delete"
		react   = "/v2/commentannotations/comments/reactions/add"
	)
	for _, c := range []struct {
		name    string
		headers map[string]string
		path    string
		data    any
		status  int
		code    string
		message string
	}{
		// Ids.
		{"an annotationId with a space", k, add, loc(map[string]any{"commentAnnotations": []any{map[string]any{"annotationId": "a b", "commentData": comment(nil)}}}),
			400, "INVALID_ARGUMENT", "commentAnnotations[0].annotationId may contain only letters, digits, _ and -."},
		{"an annotationId of 257 characters", k, cAdd, loc(map[string]any{"annotationId": strings.Repeat("a", 257), "commentData": comment(nil)}),
			400, "INVALID_ARGUMENT", "annotationId must be at most 256 characters."},
		{"an organizationId with a NUL", k, get, map[string]any{"organizationId": "o\x00", "documentId": "d"}, 400, "INVALID_ARGUMENT", "organizationId must not contain control characters."},
		{"a userId with a line feed", k, cAdd, loc(map[string]any{"annotationId": "a1", "commentData": comment(map[string]any{"from": map[string]any{"userId": "u\n"}})}),
			400, "INVALID_ARGUMENT", "commentData[0].from.userId must not start or end with white space."},
		{"31 annotationIds", k, del, loc(map[string]any{"annotationIds": ids(31)}), 400, "INVALID_ARGUMENT", ""},
		{"a commentId of 1.5", k, react, loc(map[string]any{"annotationId": "a1", "commentId": 1.5, "emoji": "x", "user": map[string]any{"userId": "u1"}}), 400, "INVALID_ARGUMENT", ""},
		{"a commentId of 0", k, cDelete, loc(map[string]any{"annotationId": "a1", "commentIds": []any{0}}), 400, "INVALID_ARGUMENT", "commentIds[0] must be a whole number from 1 to 9007199254740991."},
		// Sizes.
		{"a commentText of 16 KiB and a byte", k, cAdd, loc(map[string]any{"annotationId": "a1", "commentData": comment(map[string]any{"commentText": strings.Repeat("x", 16385)})}),
			400, "INVALID_ARGUMENT", "commentData[0].commentText must be at most 16384 bytes."},
		{"a commentHtml of 64 KiB and a byte", k, cAdd, loc(map[string]any{"annotationId": "a1", "commentData": comment(map[string]any{"commentHtml": strings.Repeat("x", 65537)})}),
			400, "INVALID_ARGUMENT", "commentData[0].commentHtml must be at most 65536 bytes."},
		{"4097 tags", k, cAdd, loc(map[string]any{"annotationId": "a1", "commentData": comment(map[string]any{"commentHtml": strings.Repeat("<b>", 4097)})}),
			400, "INVALID_ARGUMENT", "commentData[0].commentHtml must have at most 4096 tags."},
		{"257 links", k, cUpdate, loc(map[string]any{"annotationId": "a1", "commentIds": []any{1}, "updatedData": map[string]any{"commentHtml": strings.Repeat(`<a href="https://e.com">x</a>`, 257)}}),
			400, "INVALID_ARGUMENT", ""},
		{"an emoji of 33 bytes", k, react, loc(map[string]any{"annotationId": "a1", "commentId": 1, "emoji": strings.Repeat("x", 33), "user": map[string]any{"userId": "u1"}}),
			400, "INVALID_ARGUMENT", "emoji must be at most 32 bytes."},
		{"31 comments", k, cAdd, loc(map[string]any{"annotationId": "a1", "commentData": append(append(comment(nil), comment(nil)...), make([]any, 29)...)}), 400, "INVALID_ARGUMENT", ""},
		// Wrong JSON types.
		{"commentData a string", k, cAdd, loc(map[string]any{"annotationId": "a1", "commentData": "x"}), 400, "INVALID_ARGUMENT", "data.commentData must be an array of objects."},
		{"commentText a number", k, cAdd, loc(map[string]any{"annotationId": "a1", "commentData": comment(map[string]any{"commentText": 5})}),
			400, "INVALID_ARGUMENT", "data.commentData[0].commentText must be a string."},
		{"annotationIds an object", k, del, loc(map[string]any{"annotationIds": map[string]any{"a1": true}}), 400, "INVALID_ARGUMENT", "data.annotationIds must be an array of strings."},
		{"status a string", k, update, loc(map[string]any{"annotations": []any{map[string]any{"annotationId": "a1", "status": "DONE"}}}),
			400, "INVALID_ARGUMENT", "data.annotations[0].status must be an object."},
		{"data an array", k, get, []any{1}, 400, "INVALID_ARGUMENT", "data must be an object."},
		// Another workspace's key names the first's organization and thread.
		{"another tenant reads", k2, get, loc(nil), 404, "NOT_FOUND", "Organization does not exist."},
		{"another tenant comments", k2, cAdd, loc(map[string]any{"annotationId": "a1", "commentData": comment(nil)}), 404, "NOT_FOUND", "Organization does not exist."},
		{"another tenant edits", k2, cUpdate, loc(map[string]any{"annotationId": "a1", "commentIds": []any{1}, "updatedData": map[string]any{"commentText": "hijacked"}}), 404, "NOT_FOUND", "Organization does not exist."},
		{"another tenant resolves", k2, update, loc(map[string]any{"annotations": []any{map[string]any{"annotationId": "a1", "status": map[string]any{"id": "DONE", "type": "terminal"}}}}), 404, "NOT_FOUND", "Organization does not exist."},
		{"another tenant deletes", k2, del, loc(map[string]any{"annotationIds": []any{"a1"}}), 404, "NOT_FOUND", "Organization does not exist."},
		{"another tenant reacts", k2, react, loc(map[string]any{"annotationId": "a1", "commentId": 1, "emoji": "x", "user": map[string]any{"userId": "u1"}}), 404, "NOT_FOUND", "Organization does not exist."},
		// A viewer and another's comment, or acting as someone else.
		{"a viewer edits the editor's comment", vi, cUpdate, loc(map[string]any{"annotationId": "a1", "commentIds": []any{1}, "updatedData": map[string]any{"commentText": "hijacked"}}),
			403, "PERMISSION_DENIED", "You may change only your own comments."},
		{"a viewer deletes the editor's comment", vi, cDelete, loc(map[string]any{"annotationId": "a1", "commentIds": []any{1}}), 403, "PERMISSION_DENIED", ""},
		{"a viewer deletes the editor's thread", vi, del, loc(map[string]any{"annotationIds": []any{"a1"}}), 403, "PERMISSION_DENIED", ""},
		{"a viewer resolves", vi, update, loc(map[string]any{"annotations": []any{map[string]any{"annotationId": "a1", "status": map[string]any{"id": "DONE", "type": "terminal"}}}}),
			403, "PERMISSION_DENIED", "Changing a comment annotation's status, priority, assignee, context or location needs the editor role."},
		{"a viewer comments as the editor", vi, cAdd, loc(map[string]any{"annotationId": "a1", "commentData": comment(map[string]any{"from": map[string]any{"userId": "ed"}})}), 403, "PERMISSION_DENIED", ""},
		{"a viewer reacts as the editor", vi, react, loc(map[string]any{"annotationId": "a1", "commentId": 1, "emoji": "x", "user": map[string]any{"userId": "ed"}}), 403, "PERMISSION_DENIED", ""},
		{"a viewer asks to create its document", vi, add, loc(map[string]any{"createDocument": true,
			"commentAnnotations": []any{map[string]any{"commentData": []any{map[string]any{"commentText": "x"}}}}}), 403, "PERMISSION_DENIED", ""},
		{"a viewer creates a document", vi, add, map[string]any{"organizationId": "o", "documentId": "new", "createDocument": true,
			"commentAnnotations": []any{map[string]any{"commentData": []any{map[string]any{"commentText": "x"}}}}}, 404, "NOT_FOUND", "Document does not exist."},
		{"a tampered token", map[string]string{"Authorization": tampered(ed["Authorization"])}, cAdd, loc(map[string]any{"annotationId": "a1", "commentData": []any{map[string]any{"commentText": "x"}}}),
			403, "PERMISSION_DENIED", ""},
	} {
		s.call(c.path, c.headers, c.data).fails(t, c.status, c.code, c.message)
	}

	// Nothing changed: the thread as it was, nothing published.
	check := func() {
		t.Helper()
		a := s.call(get, k, loc(nil)).ok(t)["data"].([]any)
		if len(a) != 1 || a[0].(map[string]any)["status"].(map[string]any)["id"] != "OPEN" {
			t.Fatalf("the threads after the refusals: %v", a)
		}
		cs := commentsOf(t, s, k, "d", "a1")
		c, ok := cs["the editor's"]
		if len(cs) != 1 || !ok || c["commentHtml"] != "<b>the editor&#39;s</b>" || fmt.Sprint(c["reactions"]) != "[]" {
			t.Fatalf("the comments after the refusals: %v", cs)
		}
	}
	check()
	s.call(get, k, map[string]any{"organizationId": "o", "documentId": "new"}).fails(t, 404, "NOT_FOUND", "")
	// The other tenant's organization o and thread a1 are its own, and so is its stream of
	// document d: it gets none of the first's changes.
	s.call(add, k2, loc(map[string]any{"createOrganization": true, "createDocument": true, "commentAnnotations": []any{map[string]any{"annotationId": "a1", "from": map[string]any{"userId": "u1"}, "commentData": comment(nil)}}})).data(t, "")
	otherStream := openStream(t, s.streamURL("o", "d", s.commentToken(t, k2, "vi", "viewer", "d")))
	s.call(cAdd, vi, loc(map[string]any{"annotationId": "a1", "commentData": []any{map[string]any{"commentText": "the viewer's"}}})).data(t, "")
	s.call(del, k2, loc(map[string]any{"annotationIds": []any{"a1"}})).data(t, "")
	if ch := nextChange(t, otherStream); ch.typ != "comment_annotation.delete" || ch.id != 2 {
		t.Fatalf("the other tenant's stream got %+v first, want its own deletion as 2", ch)
	}
	if ch := nextChange(t, stream); ch.id != before.id+1 || ch.typ != "comment.add" || ch.commentID != 2 {
		t.Fatalf("the stream's next event %+v, want the viewer's comment as %d: a refusal published something", ch, before.id+1)
	}
	if cs := commentsOf(t, s, k, "d", "a1"); len(cs) != 2 || cs["the editor's"]["commentHtml"] != "<b>the editor&#39;s</b>" {
		t.Fatalf("the first tenant's thread after the other's deletion: %v", cs)
	}

	// An expired token (Generate Token's last two days): refused, and nothing changes.
	s.clock.Advance(49 * time.Hour)
	s.call(cAdd, ed, loc(map[string]any{"annotationId": "a1", "commentData": []any{map[string]any{"commentText": "late"}}})).fails(t, 403, "PERMISSION_DENIED", "")
	s.do("GET", strings.TrimPrefix(s.streamURL("o", "d", strings.TrimPrefix(ed["Authorization"], "Bearer ")), s.base), nil, nil).fails(t, 403, "PERMISSION_DENIED", "")
	if n := len(commentsOf(t, s, k, "d", "a1")); n != 2 {
		t.Fatalf("%d comments after the expired token's attempt, want 2", n)
	}
}
