package comments

import (
	"context"
	"encoding/json"
	"strconv"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/collab/collab/internal/wakeup"
)

// feedSubject is the wake-up subject of a document's feed: a digest of its incarnation, as ids
// hold characters subjects may not (docs/comments.md, "Live stream").
func feedSubject(r Ref) string {
	return "collab.comments.feed." + wakeup.Digest(r.APIKey, r.OrganizationID, r.OrgGen, r.DocGen)
}

// feed appends a change to its document's feed and wakes the streams of the document in every
// process. The change is stored already: a failure here is logged, and the streams miss the
// event (their clients read the threads with Get when they reconnect past the window).
func (s *Server) feed(ctx context.Context, typ string, a *Annotation, cm *Comment) {
	// version orders a thread's events for the client: concurrent writers on several
	// processes may append them in another order than their changes (docs/comments.md,
	// "Live stream").
	ev := map[string]any{"type": typ, "annotationId": a.ID, "annotation": streamAnnotation(a, typ), "version": float64(a.Version)}
	if cm != nil {
		ev["commentId"] = float64(cm.ID)
		ev["comment"] = jsonOf(commentProto(cm))
	}
	data, err := json.Marshal(ev)
	if err != nil {
		s.log.ErrorContext(ctx, "comments feed", "annotation_id", a.ID, "error", err)
		return
	}
	c := Change{Type: typ, AnnotationID: a.ID, Data: string(data), At: s.now()}
	if acc := accessOf(a); acc != nil {
		if b, err := protojson.Marshal(acc); err == nil {
			c.Access = string(b)
		}
	}
	seq, err := s.store.AppendChange(ctx, a.Ref, c)
	if err != nil {
		s.log.ErrorContext(ctx, "comments feed: append", "annotation_id", a.ID, "error", err)
		return
	}
	if s.bus != nil {
		s.bus.Publish(feedSubject(a.Ref), []byte(strconv.FormatInt(seq, 10)))
	}
}

// streamAnnotation is the annotation as the live stream carries it: whole for a new thread,
// without its comments for every other change (the changed comment comes whole beside it), so
// that a feed entry weighs what changed, not the thread (docs/comments.md, "Live stream").
func streamAnnotation(a *Annotation, typ string) any {
	p := annotationProto(a)
	if typ != eventAnnotationAdd {
		p.Comments = nil
	}
	return jsonOf(p)
}
