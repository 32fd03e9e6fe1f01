// Command notifications measures Add Notifications with notifyAll to an organization of 10,000
// users on the memory store: how long the add takes to answer, how long until the fan-out has
// filed every inbox entry, how fast the queued emails (every user's email config set to ALL) are
// written out (to --mail-dir, so the mail server's speed is not what is measured), what the
// notifications cost the process's memory (the heap after a collection, and RSS), and how long
// a member's inbox takes to read. It prints markdown tables for docs/benchmarks.md.
//
//	go run ./bench/notifications [-users 10000] [-rounds 3]
//
// The scenario of issue 20 (finding 4), 30 notifications of about 11 KB to everyone, no email:
//
//	go run ./bench/notifications -rounds 30 -headline-bytes 1000 -body-bytes 10000 -email=false
//
// The fan-out quotas are off unless -quotas (30 rounds to 10,000 users pass the default of
// 200,000 recipients a minute).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/collab/collab/bench/apiclient"
	"github.com/collab/collab/bench/collabproc"
	"github.com/collab/collab/collabd"
	"github.com/collab/collab/services"
)

// options are the program's flags.
type options struct {
	users, rounds int
	// headlineBytes and bodyBytes pad the headline template and the body to that length (0:
	// an ordinary headline and body).
	headlineBytes, bodyBytes int
	email                    bool // every user's email config ALL (else NONE)
	quotas                   bool // the process's fan-out quotas as they default
	reads                    int  // inbox reads timed after the rounds
	// readsWithoutGC times the reads with the garbage collector off, so that their CPU is the
	// reads' own and not the collections their garbage causes (which cost what the live heap
	// is: more for a bigger one, and more often for a smaller one).
	readsWithoutGC bool
}

func main() {
	o := options{}
	flag.IntVar(&o.users, "users", 10000, "members of the organization")
	flag.IntVar(&o.rounds, "rounds", 3, "notifications added, one after the other")
	flag.IntVar(&o.headlineBytes, "headline-bytes", 0, "the headline template padded to this length (0: an ordinary one; at most 1000)")
	flag.IntVar(&o.bodyBytes, "body-bytes", 0, "the body padded to this length (0: an ordinary one; at most 10000)")
	flag.BoolVar(&o.email, "email", true, "every user's email config ALL (false: NONE, no mail is sent)")
	flag.BoolVar(&o.quotas, "quotas", false, "keep the fan-out quotas at their defaults (else off)")
	flag.IntVar(&o.reads, "reads", 200, "reads of a member's inbox (a page of 50) timed after the rounds")
	flag.BoolVar(&o.readsWithoutGC, "reads-without-gc", false, "time the reads with the garbage collector off (their garbage stays until they are done)")
	flag.Parse()
	if err := runWith(o); err != nil {
		log.Fatal(err)
	}
}

// run measures users and rounds with the other options at their defaults: the program's entry
// before its other flags, kept for callers in tests (a smoke run of every bench program).
func run(users, rounds int) error {
	return runWith(options{users: users, rounds: rounds, email: true, reads: 200})
}

// bench is a running measurement: the process and how to call it.
type bench struct {
	o       options
	base    string
	hdr     map[string]string
	mailDir string
}

func runWith(o options) error {
	if o.users < 2 || o.rounds < 1 || o.headlineBytes > 1000 || o.bodyBytes > 10000 {
		return errors.New("-users must be at least 2, -rounds at least 1, -headline-bytes at most 1000, -body-bytes at most 10000")
	}
	mailDir, err := os.MkdirTemp("", "bench-mail-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(mailDir) }() // best effort: a leftover temp dir is harmless
	args := []string{"--http-addr=127.0.0.1:0", "--grpc-addr=127.0.0.1:0", "--rate-limit=off", "--log-level=error", "--mail-dir=" + mailDir}
	if !o.quotas {
		args = append(args, "--notifications-recipients-per-minute=off", "--notifications-inbox-limit=off")
	}
	cfg, err := collabd.ParseFlags(services.All(), args, func(string) string { return "" })
	if err != nil {
		return err
	}
	p, err := collabd.Start(context.Background(), cfg, collabd.Deps{LogOutput: io.Discard})
	if err != nil {
		return err
	}
	// The measurement is over by then; a failed stop changes none of it.
	defer func() { _ = p.Shutdown(context.Background()) }()
	b := &bench{o: o, base: "http://" + p.HTTPAddr, hdr: map[string]string{"x-service-api-key": p.Dev.APIKey, "x-service-auth-token": p.Dev.AuthToken}, mailDir: mailDir}
	if err := b.seed(); err != nil {
		return err
	}
	before, err := memory()
	if err != nil {
		return err
	}
	if err := b.rounds(); err != nil {
		return err
	}
	after, err := memory()
	if err != nil {
		return err
	}
	b.printMemory(before, after)
	return b.reads()
}

// seed adds the organization's members, in batches of 100, each with inbox config ALL and
// email config ALL (or NONE).
func (b *bench) seed() error {
	start := time.Now()
	mail := "NONE"
	if b.o.email {
		mail = "ALL"
	}
	for first := 0; first < b.o.users; first += 100 {
		var batch []any
		var ids []string
		for i := first; i < min(first+100, b.o.users); i++ {
			id := fmt.Sprintf("u%05d", i)
			ids = append(ids, id)
			batch = append(batch, map[string]any{"userId": id, "name": "User " + id, "email": id + "@example.com"})
		}
		if err := apiclient.Post(b.base+"/v2/users/add", b.hdr, map[string]any{"organizationId": "bench", "createOrganization": true, "documentId": "d", "createDocument": true, "users": batch}, nil); err != nil {
			return err
		}
		if err := apiclient.Post(b.base+"/v2/notifications/config/set", b.hdr, map[string]any{"organizationId": "bench", "documentIds": []string{"d"}, "userIds": ids,
			"config": map[string]any{"inbox": "ALL", "email": mail, "slack": "NONE"}}, nil); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "seeded %d users in %s\n", b.o.users, time.Since(start).Round(time.Millisecond))
	return nil
}

// padded is s padded with dots to n bytes (s when n is not more).
func padded(s string, n int) string {
	if n <= len(s) {
		return s
	}
	return s + strings.Repeat(".", n-len(s))
}

// rounds adds the notifications one after the other and times each.
func (b *bench) rounds() error {
	fmt.Printf("Add Notifications with notifyAll, %d members (every email config %v), memory store, mail to files, GOMAXPROCS %d, %s\n\n",
		b.o.users, map[bool]string{true: "ALL", false: "NONE"}[b.o.email], runtime.GOMAXPROCS(0), runtime.Version())
	fmt.Println("| round | add answered | every inbox entry filed | emails queued per second (fan-out) | all emails written | emails written per second |")
	fmt.Println("|---|---|---|---|---|---|")
	sent := 0
	for round := range b.o.rounds {
		id := fmt.Sprintf("n%d", round)
		start := time.Now()
		if err := apiclient.Post(b.base+"/v2/notifications/add", b.hdr, map[string]any{"organizationId": "bench", "documentId": "d", "notificationId": id,
			"actionUser":                     map[string]any{"userId": "u00000", "name": "Ada"},
			"displayHeadlineMessageTemplate": padded("{{actionUser}} wrote to {{recipientUser}}", b.o.headlineBytes),
			"displayBodyMessage":             padded("A body of an ordinary length, a sentence or two.", b.o.bodyBytes),
			"notifyUsers":                    []any{}}, nil); err != nil {
			return err
		}
		answered := time.Since(start)
		filed, err := b.filed(id, start)
		if err != nil {
			return err
		}
		if !b.o.email {
			fmt.Printf("| %d | %s | %s | - | - | - |\n", round+1, answered.Round(time.Microsecond), filed.Round(time.Millisecond))
			continue
		}
		sent += b.o.users - 1
		mailed, err := b.mailed(sent, start)
		if err != nil {
			return err
		}
		fmt.Printf("| %d | %s | %s | %.0f | %s | %.0f |\n", round+1, answered.Round(time.Microsecond), filed.Round(time.Millisecond),
			float64(b.o.users-1)/(filed-answered).Seconds(), mailed.Round(time.Millisecond), float64(b.o.users-1)/(mailed-filed).Seconds())
	}
	return nil
}

// filed waits until the notification lists its recipients, which the fan-out sets once done,
// and returns the time since start.
func (b *bench) filed(id string, start time.Time) (time.Duration, error) {
	for {
		var got struct {
			Result struct {
				Data []struct {
					NotifyUserIDs []string `json:"notifyUserIds"`
				} `json:"data"`
			} `json:"result"`
		}
		if err := apiclient.Post(b.base+"/v2/notifications/get", b.hdr, map[string]any{"organizationId": "bench", "notificationIds": []string{id}}, &got); err != nil {
			return 0, err
		}
		if len(got.Result.Data) == 1 && len(got.Result.Data[0].NotifyUserIDs) == b.o.users-1 {
			return time.Since(start), nil
		}
		if time.Since(start) > 5*time.Minute {
			return 0, fmt.Errorf("fan-out of %s not done in 5 minutes", id)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// mailed waits until sent emails are written and returns the time since start.
func (b *bench) mailed(sent int, start time.Time) (time.Duration, error) {
	for {
		entries, err := os.ReadDir(b.mailDir)
		if err != nil {
			return 0, err
		}
		if len(entries) >= sent {
			return time.Since(start), nil
		}
		if time.Since(start) > 10*time.Minute {
			return 0, fmt.Errorf("%d of %d emails written in 10 minutes", len(entries), sent)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// usage is the process's memory: its live heap after a collection, and its RSS.
type usage struct{ heap, rss int64 }

func memory() (usage, error) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	st, err := collabproc.ReadStats(os.Getpid())
	return usage{heap: int64(m.HeapAlloc), rss: st.RSS}, err //nolint:gosec // G115: a heap is far below 2^63 bytes
}

func (b *bench) printMemory(before, after usage) {
	n, recipients := float64(b.o.rounds), float64(b.o.rounds*(b.o.users-1))
	fmt.Printf("\nMemory of the %d notifications (every fan-out and mail done; the heap after a collection):\n\n", b.o.rounds)
	fmt.Println("| measure | grew by | per notification | per recipient |")
	fmt.Println("|---|---|---|---|")
	for _, m := range []struct {
		name string
		d    int64
	}{{"heap", after.heap - before.heap}, {"RSS", after.rss - before.rss}} {
		fmt.Printf("| %s | %.1f MB | %.2f MB | %.0f bytes |\n", m.name, float64(m.d)/(1<<20), float64(m.d)/(1<<20)/n, float64(m.d)/recipients)
	}
}

// reads times reads of a member's inbox, a page of 50, newest first.
func (b *bench) reads() error {
	if b.o.reads <= 0 {
		return nil
	}
	times := make([]time.Duration, 0, b.o.reads)
	if b.o.readsWithoutGC {
		runtime.GC()
		defer debug.SetGCPercent(debug.SetGCPercent(-1))
	}
	cpuBefore, err := collabproc.ReadStats(os.Getpid())
	if err != nil {
		return err
	}
	for range b.o.reads {
		start := time.Now()
		if err := apiclient.Post(b.base+"/v2/notifications/get", b.hdr, map[string]any{"organizationId": "bench", "userId": "u00001", "pageSize": 50}, nil); err != nil {
			return err
		}
		times = append(times, time.Since(start))
	}
	cpuAfter, err := collabproc.ReadStats(os.Getpid())
	if err != nil {
		return err
	}
	slices.Sort(times)
	fmt.Printf("\nInbox of u00001 (%d notifications to %d members each), a page of 50 over HTTP, %d reads, garbage collector %s (CPU: the process's, client included, which depends less on the machine's load):\n\n",
		min(b.o.rounds, 50), b.o.users-1, b.o.reads, map[bool]string{true: "off", false: "on"}[b.o.readsWithoutGC])
	fmt.Println("| median | p90 | p99 | CPU per read |")
	fmt.Println("|---|---|---|---|")
	fmt.Printf("| %s | %s | %s | %s |\n", apiclient.Percentile(times, 0.5).Round(time.Microsecond), apiclient.Percentile(times, 0.9).Round(time.Microsecond),
		apiclient.Percentile(times, 0.99).Round(time.Microsecond), ((cpuAfter.CPU - cpuBefore.CPU) / time.Duration(b.o.reads)).Round(10*time.Microsecond))
	return nil
}
