package comments

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"

	commentsv1 "github.com/collab/collab/proto/collab/comments/v1"
)

// An end user's writes are budgeted (WriteBurst at once, then WriteRate a second); a backend's
// are not; reads are not.
func TestEndUserWriteBudget(t *testing.T) {
	s, _ := newServer(t, NewMemoryStore())
	add(t, s, "d", thread("a1", "x"))
	mark := func(ctx context.Context) error {
		_, err := s.MarkRead(ctx, &commentsv1.MarkReadRequest{OrganizationId: "o", DocumentId: "d", UserId: "ed", AnnotationIds: []string{"a1"}})
		return err
	}
	refused := 0
	for range WriteBurst + 20 {
		if err := mark(as("t:ed")); err != nil {
			wantCode(t, err, codes.ResourceExhausted, "a write past the budget")
			refused++
		}
	}
	if refused < 15 {
		t.Fatalf("%d of %d writes refused, want about 20", refused, WriteBurst+20)
	}
	if _, err := s.GetCommentAnnotations(as("t:ed"), &commentsv1.GetCommentAnnotationsRequest{OrganizationId: "o", DocumentId: "d"}); err != nil {
		t.Fatalf("a read after the budget is spent: %v", err)
	}
	for range WriteBurst + 20 {
		if err := mark(k1); err != nil {
			t.Fatalf("a backend's write: %v", err)
		}
	}
}

// A comment holds at most maxReactionKinds different emoji; a thread at most maxReaders read
// marks (on both stores).
func TestReactionAndReaderCaps(t *testing.T) {
	stores(t, func(t *testing.T, newStore func(t *testing.T) Store) {
		st := newStore(t)
		s, _ := newServer(t, st)
		add(t, s, "d", thread("a1", "x"))
		react := func(emoji string) error {
			_, err := s.AddReaction(k1, &commentsv1.AddReactionRequest{OrganizationId: "o", DocumentId: "d", AnnotationId: "a1", CommentId: 1, Emoji: emoji, User: user("u")})
			return err
		}
		for i := range maxReactionKinds {
			if err := react(fmt.Sprint("e", i)); err != nil {
				t.Fatal(err)
			}
		}
		wantCode(t, react("one-more"), codes.FailedPrecondition, "a reaction kind past the cap")
		if err := react("e1"); err != nil {
			t.Fatalf("an existing kind past the cap: %v", err)
		}
		r := Ref{APIKey: "k1", OrganizationID: "o", OrgGen: "g1", DocumentID: "d", DocGen: "dg-d"}
		got, _ := st.Get(context.Background(), r, []string{"a1"})
		full := got["a1"].clone()
		for i := range maxReaders {
			full.ReadBy = append(full.ReadBy, fmt.Sprint("r", i))
		}
		full.Version++
		if err := st.Swap(context.Background(), got["a1"], full); err != nil {
			t.Fatal(err)
		}
		found, err := st.MarkRead(context.Background(), r, "late", []string{"a1"})
		if err != nil || len(found) != 1 {
			t.Fatalf("mark read on a full thread: %v %v", found, err)
		}
		got, _ = st.Get(context.Background(), r, []string{"a1"})
		if n := len(got["a1"].ReadBy); n != maxReaders {
			t.Fatalf("%d read marks, want the cap %d", n, maxReaders)
		}
	})
}

// A stream resumed with an id the feed never gave (ahead of it) is told to read again, then
// gets the next change.
func TestStreamResetAheadOfTheFeed(t *testing.T) {
	s, _ := newServer(t, NewMemoryStore())
	s.bus = nil
	url := streamServer(t, s)
	add(t, s, "d", thread("a1", "x"))
	c, _ := openStream(t, url, "t:vi", "500")
	if ev := c.next(t); ev.event != "reset" {
		t.Fatalf("got %+v, want reset", ev)
	}
}
