package comments

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/collab/collab/internal/wakeup"
)

// BenchmarkStreamFanOut measures Add Comments until every one of 100 live streams of the
// document has the comment (docs/benchmarks.md, "Comments (issue 24)"): the server path (the
// change, its event and feed append, the wake-up, one read of the feed for the document, the
// writes to each stream) and the clients' reading, on loopback. Reports p50 and p99.
func BenchmarkStreamFanOut(b *testing.B) {
	s, _ := newServer(b, NewMemoryStore())
	s.bus, s.poll = wakeup.NewInProcess(nil), time.Minute
	url := streamServer(b, s)
	add(b, s, "d", thread("a1", "x"))
	const n = 100
	clients := make([]*sseClient, n)
	for i := range clients {
		var code int
		if clients[i], code = openStream(b, url, fmt.Sprint("t:reader", i), ""); code != 200 {
			b.Fatalf("stream %d: %d", i, code)
		}
	}
	lags := make([]float64, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		reply(b, s, "ping")
		for _, c := range clients {
			for {
				ev := c.next(b)
				if ev.event == eventCommentAdd && strings.Contains(ev.data, "ping") {
					break
				}
			}
		}
		lags = append(lags, float64(time.Since(start).Microseconds())/1000)
	}
	b.StopTimer()
	slices.Sort(lags)
	b.ReportMetric(lags[len(lags)/2], "p50-ms")
	b.ReportMetric(lags[min(len(lags)-1, len(lags)*99/100)], "p99-ms")
}
