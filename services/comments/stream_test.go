package comments

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	commentsv1 "github.com/collab/collab/proto/collab/comments/v1"

	"github.com/collab/collab/internal/racetest"
	"github.com/collab/collab/internal/testkit/natstest"
	"github.com/collab/collab/internal/wakeup"
)

// sseEvent is one event of a stream as a client reads it.
type sseEvent struct{ id, event, data string }

// sseClient reads a stream's events into a channel.
type sseClient struct {
	resp   *http.Response
	events chan sseEvent
}

func openStream(t testing.TB, url, token, lastID string) (*sseClient, int) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url+"o/d?token="+token, nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, resp.StatusCode
	}
	c := &sseClient{resp: resp, events: make(chan sseEvent, 4096)}
	t.Cleanup(func() { resp.Body.Close() })
	go func() {
		defer close(c.events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 4<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.event != "" || ev.data != "" {
					c.events <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				ev.event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	return c, resp.StatusCode
}

func (c *sseClient) next(t testing.TB) sseEvent {
	t.Helper()
	select {
	case ev, ok := <-c.events:
		if !ok {
			t.Fatal("the stream ended")
		}
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5s")
	}
	return sseEvent{}
}

func streamServer(t testing.TB, s *Server) string {
	t.Helper()
	hub := newStreamHub(s)
	srv := httptest.NewServer(hub)
	t.Cleanup(func() { hub.Close(); srv.Close() })
	return srv.URL + StreamPrefix
}

func reply(t testing.TB, s *Server, text string) {
	t.Helper()
	if _, err := s.AddComments(k1, &commentsv1.AddCommentsRequest{OrganizationId: "o", DocumentId: "d", AnnotationId: "a1",
		CommentData: []*commentsv1.NewComment{{CommentText: text, From: user("u")}}}); err != nil {
		t.Fatal(err)
	}
}

// A stream gets one event per change, with its type, id and the changed annotation; a client
// that comes back with Last-Event-ID gets what it missed, in order
// (docs/comments.md, "Live stream").
func TestStreamSendsChangesAndResumes(t *testing.T) {
	stores(t, func(t *testing.T, newStore func(t *testing.T) Store) {
		s, _ := newServer(t, newStore(t))
		s.bus, s.poll = wakeup.NewInProcess(nil), time.Minute // only wake-ups deliver
		url := streamServer(t, s)
		c, _ := openStream(t, url, "t:vi", "")
		add(t, s, "d", thread("a1", "first"))
		ev := c.next(t)
		if ev.event != eventAnnotationAdd || !strings.Contains(ev.data, `"annotationId":"a1"`) || ev.id == "" {
			t.Fatalf("first event %+v", ev)
		}
		reply(t, s, "second")
		ev2 := c.next(t)
		if ev2.event != eventCommentAdd || !strings.Contains(ev2.data, `"commentText":"second"`) || !strings.Contains(ev2.data, `"version":2`) || !strings.Contains(ev.data, `"version":1`) {
			t.Fatalf("second event %+v", ev2)
		}
		c.resp.Body.Close()
		reply(t, s, "third")
		reply(t, s, "fourth")
		back, _ := openStream(t, url, "t:vi", ev2.id)
		for _, want := range []string{"third", "fourth"} {
			if ev := back.next(t); ev.event != eventCommentAdd || !strings.Contains(ev.data, want) {
				t.Fatalf("resumed: %+v, want the comment %q", ev, want)
			}
		}
	})
}

// A client whose position the feed's window has passed is told to read again (reset).
func TestStreamResetPastTheWindow(t *testing.T) {
	s, _ := newServer(t, NewMemoryStore())
	s.bus = wakeup.NewInProcess(nil)
	url := streamServer(t, s)
	add(t, s, "d", thread("a1", "x"))
	r := Ref{APIKey: "k1", OrganizationID: "o", OrgGen: "g1", DocumentID: "d", DocGen: "dg-d"}
	for range FeedWindow + 10 {
		if _, err := s.store.AppendChange(context.Background(), r, Change{Type: eventCommentAdd, Data: "{}"}); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := openStream(t, url, "t:vi", "1")
	if ev := c.next(t); ev.event != "reset" {
		t.Fatalf("got %+v, want reset", ev)
	}
}

// Refusals before a stream opens are the API's envelope with their status; the per-user limit
// holds under concurrent opens.
func TestStreamRefusals(t *testing.T) {
	s, _ := newServer(t, NewMemoryStore())
	url := streamServer(t, s)
	for _, c := range []struct {
		token string
		want  int
	}{{"", 403}, {"forged", 403}, {"t:stranger", 403}, {"t:ed:org=p", 403}} {
		if _, code := openStream(t, url, c.token, ""); code != c.want {
			t.Fatalf("token %q: %d, want %d", c.token, code, c.want)
		}
	}
	resp, err := http.Get(url + "o/ghost?token=t:vi")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("an unknown document: %d", resp.StatusCode)
	}
	// The envelope's status is the API's name of the code, as the gateway writes it.
	if resp, err = http.Get(url + "o/d"); err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `{"error":{"message":"A token is required: pass the JWT of Generate Token as the token query parameter.","status":"PERMISSION_DENIED"}}`; string(body) != want {
		t.Fatalf("no token: %s, want %s", body, want)
	}
	var mu sync.Mutex
	codes := map[int]int{}
	racetest.N(MaxStreamsPerUser+4, func(int) {
		_, code := openStream(t, url, "t:ed", "")
		mu.Lock()
		codes[code]++
		mu.Unlock()
	})
	if codes[200] != MaxStreamsPerUser || codes[429] != 4 {
		t.Fatalf("opened %v, want %d 200s and 4 429s", codes, MaxStreamsPerUser)
	}
}

// Streams on another process are woken over the engine: with a poll of a minute, a change
// made through one server reaches the stream of another at once.
func TestStreamAcrossProcesses(t *testing.T) {
	store := NewMemoryStore()
	engine := natstest.Server(t, natstest.Options{})
	dial := func() wakeup.Bus {
		b, err := wakeup.DialNATS(wakeup.NATSConfig{URL: engine.ClientURL()}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		return b
	}
	writer, _ := newServer(t, store)
	writer.bus = dial()
	reader, _ := newServer(t, store)
	reader.bus, reader.poll = dial(), time.Minute
	c, _ := openStream(t, streamServer(t, reader), "t:vi", "")
	time.Sleep(100 * time.Millisecond) // the subscription reaches the engine
	start := time.Now()
	add(t, writer, "d", thread("a1", "x"))
	if ev := c.next(t); ev.event != eventAnnotationAdd {
		t.Fatalf("got %+v", ev)
	}
	t.Logf("across processes in %v", time.Since(start))
}

// Concurrent appends to one feed get distinct, consecutive numbers on both stores, and a
// reader after any of them sees the rest in order.
func TestFeedAppendsConcurrently(t *testing.T) {
	stores(t, func(t *testing.T, newStore func(t *testing.T) Store) {
		st := newStore(t)
		r := Ref{APIKey: "k1", OrganizationID: "o", OrgGen: "g1", DocumentID: "d", DocGen: "dg-d"}
		const n = 20
		var mu sync.Mutex
		seen := map[int64]bool{}
		racetest.N(n, func(i int) {
			seq, err := st.AppendChange(context.Background(), r, Change{Type: "comment.add", AnnotationID: "a", Data: "{}"})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if seen[seq] {
				t.Errorf("number %d given twice", seq)
			}
			seen[seq] = true
		})
		cs, oldest, newest, err := st.Changes(context.Background(), r, 5, 0)
		if err != nil || oldest != 1 || newest != n || len(cs) != n-5 || cs[0].Seq != 6 {
			t.Fatalf("after 5: %d changes from %v, oldest %d newest %d, %v", len(cs), cs[0].Seq, oldest, newest, err)
		}
	})
}

// A stream sends every change of its document once, in the feed's order, when the feed grows
// faster than its room reads it (more than the room keeps between two reads) and when writers
// append concurrently (MongoDB's Changes may return changes past the newest it read). The
// room once counted the feed's newest instead of what it had read, and its recent list lost
// its order: changes were skipped or repeated, and a stream could panic.
func TestStreamSendsEachChangeOnceInOrder(t *testing.T) {
	stores(t, func(t *testing.T, newStore func(t *testing.T) Store) {
		st := newStore(t)
		s, _ := newServer(t, st)
		s.bus = wakeup.NewInProcess(nil)
		url := streamServer(t, s)
		add(t, s, "d", thread("a1", "x")) // change 1
		c, _ := openStream(t, url, "t:vi", "")
		r := Ref{APIKey: "k1", OrganizationID: "o", OrgGen: "g1", DocumentID: "d", DocGen: "dg-d"}
		// On the memory store, 600 changes and then one wake-up: more than the room reads at
		// once. On the embedded server (slower), fewer, each with its wake-up, from racing
		// writers.
		writers, each, wakeEach := 4, 150, false
		if _, mem := st.(*MemoryStore); !mem {
			writers, each, wakeEach = 4, 30, true
		}
		racetest.N(writers, func(int) {
			for range each {
				if _, err := s.store.AppendChange(context.Background(), r, Change{Type: eventCommentAdd, AnnotationID: "a1", Data: "{}"}); err != nil {
					t.Error(err)
					return
				}
				if wakeEach {
					s.bus.Publish(feedSubject(r), nil)
				}
			}
		})
		s.bus.Publish(feedSubject(r), nil)
		for want := 2; want <= 1+writers*each; want++ {
			if ev := c.next(t); ev.id != strconv.Itoa(want) {
				t.Fatalf("got event %s, want %d", ev.id, want)
			}
		}
	})
}
