package lifecycle

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"
)

func TestDispatcherRoutesByService(t *testing.T) {
	d := NewDispatcher()
	var got []string
	d.Register("users", HandlerFunc(func(_ context.Context, e *lifecyclev1.Event) error {
		got = append(got, "users:"+e.GetId())
		return nil
	}))
	d.Register("access", HandlerFunc(func(context.Context, *lifecyclev1.Event) error {
		return status.Error(codes.AlreadyExists, "conflict")
	}))
	ctx := context.Background()
	if _, err := d.HandleEvent(ctx, &lifecyclev1.HandleEventRequest{Service: "users", Event: &lifecyclev1.Event{Id: "e1"}}); err != nil || len(got) != 1 || got[0] != "users:e1" {
		t.Fatalf("%v %v", got, err)
	}
	_, err := d.HandleEvent(ctx, &lifecyclev1.HandleEventRequest{Service: "access", Event: &lifecyclev1.Event{Id: "e1"}})
	if !Permanent(err) {
		t.Fatalf("handler's permanent error lost: %v", err)
	}
	_, err = d.HandleEvent(ctx, &lifecyclev1.HandleEventRequest{Service: "crdt", Event: &lifecyclev1.Event{Id: "e1"}})
	if Permanent(err) || status.Code(err) != codes.Unavailable {
		t.Fatalf("unknown service must be retried: %v", err)
	}
	if _, err := d.HandleEvent(ctx, &lifecyclev1.HandleEventRequest{Service: "users"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("event without id: %v", err)
	}
}

func TestPermanent(t *testing.T) {
	for code, want := range map[codes.Code]bool{
		codes.InvalidArgument: true, codes.FailedPrecondition: true, codes.AlreadyExists: true, codes.NotFound: true,
		codes.Unavailable: false, codes.Internal: false, codes.DeadlineExceeded: false,
	} {
		if Permanent(status.Error(code, "x")) != want {
			t.Errorf("%v: want permanent=%v", code, want)
		}
	}
	if Permanent(errors.New("plain")) {
		t.Error("a plain error is permanent")
	}
}

func TestScoped(t *testing.T) {
	k, o, err := Scoped(&lifecyclev1.Event{ApiKey: "k", OrganizationId: "o"})
	if err != nil || k != "k" || o != "o" {
		t.Fatalf("%q %q %v", k, o, err)
	}
	for _, e := range []*lifecyclev1.Event{{ApiKey: "k"}, {OrganizationId: "o"}} {
		if _, _, err := Scoped(e); !Permanent(err) {
			t.Fatalf("event without scope: %v must fail for good", err)
		}
	}
}

// Refs of two generations of one id differ, and the empty generation keys by the bare id, so
// records from before generations keep working.
func TestRefsAndDeletedDocuments(t *testing.T) {
	if Ref("d", "") != "d" || Ref("d", "g1") == Ref("d", "g2") || Ref("d", "g1") == "d" {
		t.Fatalf("refs %q %q %q", Ref("d", ""), Ref("d", "g1"), Ref("d", "g2"))
	}
	for _, in := range []Incarnation{{"d", ""}, {"d", "g1"}, {"doc with spaces", "0123456789abcdef"}} {
		if id, gen := SplitRef(in.Ref()); id != in.ID || gen != in.Generation {
			t.Fatalf("SplitRef(%q) = %q, %q", in.Ref(), id, gen)
		}
	}
	if a, b := NewGeneration(), NewGeneration(); a == b || len(a) < 16 {
		t.Fatalf("generations %q %q", a, b)
	}
	e := &lifecyclev1.Event{Id: "e", Type: DocumentDeleted}
	got, err := DeletedDocuments(e, &lifecyclev1.DocumentsDeleted{DocumentIds: []string{"a", "b"}, Generations: []string{"ga", "gb"}})
	if err != nil || len(got) != 2 || got[1] != (Incarnation{ID: "b", Generation: "gb"}) || Refs(got)[0] != Ref("a", "ga") {
		t.Fatalf("%+v %v", got, err)
	}
	if got, err := DeletedDocuments(e, &lifecyclev1.DocumentsDeleted{DocumentIds: []string{"a"}}); err != nil || got[0].Ref() != "a" {
		t.Fatalf("an event from before generations: %+v %v", got, err)
	}
	if _, err := DeletedDocuments(e, &lifecyclev1.DocumentsDeleted{DocumentIds: []string{"a", "b"}, Generations: []string{"ga"}}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("generations missing: %v", err)
	}
}

func TestDomainKeyIsPerTenantAndStable(t *testing.T) {
	a, b, c := DomainKey("k1", "e"), DomainKey("k1", "e"), DomainKey("k2", "e")
	if a != b || a == c || DomainKey("k1", "e2") == a {
		t.Fatalf("%s %s %s", a, b, c)
	}
	// No concatenation of key and id collides with another split of the same text.
	if DomainKey("k1e", "") == DomainKey("k1", "e") {
		t.Fatal("split ambiguity")
	}
}

func TestReservedTypes(t *testing.T) {
	for typ, want := range map[string]bool{"document.deleted": true, "organization.deleted": true, "message.attempt.exhausted": true, "notification.add": true,
		"comment.add": false, "document.opened": false, "custom.message": false} {
		if Reserved(typ) != want {
			t.Errorf("Reserved(%q) = %v", typ, !want)
		}
	}
}
