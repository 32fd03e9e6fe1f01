package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	eventsv1 "github.com/collab/collab/proto/collab/events/v1"
	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"
)

// recording returns handlers for every kind, each logging its call.
func recording(log *[]string) Handlers {
	add := func(format string, args ...any) error {
		*log = append(*log, fmt.Sprintf(format, args...))
		return nil
	}
	return Handlers{
		OrganizationDeleted: func(_ context.Context, s Scope) error {
			return add("org %s %s %s", s.APIKey, s.OrganizationID, s.OrganizationGeneration)
		},
		DocumentsDeleted: func(_ context.Context, s Scope, docs []Incarnation) error {
			return add("docs %s %v", s.OrgRef(), docs)
		},
		FolderDeleted: func(_ context.Context, s Scope, f Incarnation) error {
			return add("folder %s %s@%s", s.OrganizationID, f.ID, f.Generation)
		},
		DocumentMigrated: func(_ context.Context, s Scope, m Migration) error {
			return add("migrated %s %s->%s@%s (%s)", s.OrganizationID, m.From, m.To, m.Generation, m.ID)
		},
		UsersRemoved: func(_ context.Context, s Scope, r *lifecyclev1.UsersRemoved) error {
			return add("users %s %v", s.OrganizationID, r.GetUserIds())
		},
		Domain: func(_ context.Context, d *eventsv1.Event) error { return add("domain %s", d.GetType()) },
		LocationDataDeleted: func(_ context.Context, s Scope, l Location) error {
			return add("location %s %s/%s/%s", s.OrganizationID, l.DocumentID, l.ID, l.Name)
		},
	}
}

func scoped(p any) *lifecyclev1.Event {
	e := &lifecyclev1.Event{Id: "e1", ApiKey: "k", OrganizationId: "o", OrganizationGeneration: "og"}
	switch p := p.(type) {
	case *lifecyclev1.OrganizationDeleted:
		e.Payload = &lifecyclev1.Event_OrganizationDeleted{OrganizationDeleted: p}
	case *lifecyclev1.DocumentsDeleted:
		e.Payload = &lifecyclev1.Event_DocumentsDeleted{DocumentsDeleted: p}
	case *lifecyclev1.FolderDeleted:
		e.Payload = &lifecyclev1.Event_FolderDeleted{FolderDeleted: p}
	case *lifecyclev1.DocumentMigrated:
		e.Payload = &lifecyclev1.Event_DocumentMigrated{DocumentMigrated: p}
	case *lifecyclev1.UsersRemoved:
		e.Payload = &lifecyclev1.Event_UsersRemoved{UsersRemoved: p}
	case *lifecyclev1.LocationDataDeleted:
		e.Payload = &lifecyclev1.Event_LocationDataDeleted{LocationDataDeleted: p}
	case *eventsv1.Event:
		e.Payload = &lifecyclev1.Event_Domain{Domain: p}
	}
	return e
}

// Dispatch calls the handler of the event's payload with what it checked and read from the
// event.
func TestDispatchCallsTheHandlerOfThePayload(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		e    *lifecyclev1.Event
		want string // "" when skipped
	}{
		{scoped(&lifecyclev1.OrganizationDeleted{}), "org k o og"},
		{scoped(&lifecyclev1.DocumentsDeleted{DocumentIds: []string{"d1", "d2"}, Generations: []string{"g1", "g2"}}), "docs o\x1eog [{d1 g1} {d2 g2}]"},
		{scoped(&lifecyclev1.DocumentsDeleted{DocumentIds: []string{"d1"}}), "docs o\x1eog [{d1 }]"},
		{scoped(&lifecyclev1.FolderDeleted{FolderId: "f", Generation: "fg"}), "folder o f@fg"},
		{scoped(&lifecyclev1.DocumentMigrated{FromDocumentId: "a", ToDocumentId: "b", Generation: "g", MigrationId: "m"}), "migrated o a->b@g (m)"},
		{scoped(&lifecyclev1.UsersRemoved{UserIds: []string{"u"}}), "users o [u]"},
		{scoped(&eventsv1.Event{Type: "comment.add"}), "domain comment.add"},
		// A domain event needs no scope in the envelope: its handler checks what it needs.
		{&lifecyclev1.Event{Id: "e1", Payload: &lifecyclev1.Event_Domain{Domain: &eventsv1.Event{Type: "x.y"}}}, "domain x.y"},
		{scoped(&lifecyclev1.LocationDataDeleted{LocationId: "l"}), "location o /l/"},
		{scoped(&lifecyclev1.LocationDataDeleted{DocumentId: "d", LocationName: "n"}), "location o d//n"},
		{func() *lifecyclev1.Event {
			e := scoped(&lifecyclev1.LocationDataDeleted{LocationId: "l"})
			e.OrganizationId = ""
			return e
		}(), "location  /l/"},
		{scoped(nil), ""}, // no payload (one this version does not know)
	} {
		var log []string
		handled, err := Dispatch(ctx, c.e, recording(&log))
		want := []string{c.want}
		if c.want == "" {
			want = nil
		}
		if err != nil || handled != (c.want != "") || !slices.Equal(log, want) {
			t.Errorf("%v: handled %v, log %q (%v), want %q", c.e.GetPayload(), handled, log, err, want)
		}
	}
}

// An event without what its kind needs is refused for good (InvalidArgument, naming the event
// and what it lacks), and no handler runs; a kind without a handler is skipped unchecked.
func TestDispatchRefusesIncompleteEvents(t *testing.T) {
	ctx := context.Background()
	unscoped := func(e *lifecyclev1.Event) *lifecyclev1.Event { e.ApiKey = ""; return e }
	noOrg := func(e *lifecyclev1.Event) *lifecyclev1.Event { e.OrganizationId = ""; return e }
	for _, c := range []struct {
		e    *lifecyclev1.Event
		want string
	}{
		{unscoped(scoped(&lifecyclev1.OrganizationDeleted{})), "api key or organization"},
		{noOrg(scoped(&lifecyclev1.DocumentsDeleted{DocumentIds: []string{"d"}})), "api key or organization"},
		{noOrg(scoped(&lifecyclev1.UsersRemoved{UserIds: []string{"u"}})), "api key or organization"},
		{scoped(&lifecyclev1.DocumentsDeleted{DocumentIds: []string{"d1", "d2"}, Generations: []string{"g1"}}), "generation for every document"},
		{scoped(&lifecyclev1.FolderDeleted{Generation: "fg"}), "folder id"},
		{scoped(&lifecyclev1.DocumentMigrated{FromDocumentId: "a", Generation: "g"}), "document ids"},
		{scoped(&lifecyclev1.DocumentMigrated{ToDocumentId: "b", Generation: "g"}), "document ids"},
		{scoped(&lifecyclev1.LocationDataDeleted{DocumentId: "d"}), "location id or name"},
	} {
		var log []string
		handled, err := Dispatch(ctx, c.e, recording(&log))
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "has no "+c.want) || !strings.Contains(err.Error(), "e1") || !handled || len(log) != 0 {
			t.Errorf("%v: handled %v, log %q, error %v; want InvalidArgument naming %q", c.e.GetPayload(), handled, log, err, c.want)
		}
		if handled, err := Dispatch(ctx, c.e, Handlers{}); handled || err != nil {
			t.Errorf("%v without handlers: handled %v, %v", c.e.GetPayload(), handled, err)
		}
	}
}

// A handler's error comes back as it is, so its code decides whether the event is retried.
func TestDispatchReturnsTheHandlersError(t *testing.T) {
	failed := errors.New("store down")
	h := Handlers{OrganizationDeleted: func(context.Context, Scope) error { return failed }}
	if handled, err := Dispatch(context.Background(), scoped(&lifecyclev1.OrganizationDeleted{}), h); !handled || !errors.Is(err, failed) {
		t.Fatalf("handled %v, %v", handled, err)
	}
}
