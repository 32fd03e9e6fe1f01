// Command webhooks measures the webhook engine: signed deliveries per second to a loopback
// receiver with 1 endpoint and with 100, the same while one endpoint never answers, how
// closely a rateLimit is kept, and how long a tenant's test event takes while another tenant's
// endpoints hang. Each delivery rate is given as a share of the signed-POST limit measured just
// before it in the same run: a plain Go client with 8 senders signing each POST the Standard
// Webhooks way, the same body, the same receiver (limit.go). A delivery counts when the
// receiver has it. It prints markdown for docs/benchmarks.md.
//
// By default events are handed to the webhooks service in this process (its HandleEvent, as
// the events relay does), on the memory store and on the MongoDB store of an embedded FerretDB,
// so the HTTP publish path is not measured; -publish http runs a whole collabd and publishes
// over HTTP instead.
//
//	go run ./bench/webhooks [-events 20000] [-mongo-events 5000] [-stores memory,mongo] [-publish inproc|http] [-rate 50]
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/collab/collab/services/webhooks"
)

type config struct {
	events      int // deliveries of each case on the memory store
	mongoEvents int // on the MongoDB store
	stores      []string
	publish     string // inproc or http
	rate        int
	rateSeconds int           // how long the rate case runs
	limitFor    time.Duration // how long each limit measurement runs
	repeat      int           // runs of each case; the median is reported
	fairness    bool
	timeout     time.Duration // for one case's deliveries
	cpuProfile  string
	memProfile  string
}

func parseFlags(args []string) (config, error) {
	fs := flag.NewFlagSet("webhooks", flag.ContinueOnError)
	c := config{}
	fs.IntVar(&c.events, "events", 20000, "deliveries of each case on the memory store: the 1-endpoint case publishes this many events, the 100-endpoint cases a hundredth of it")
	fs.IntVar(&c.mongoEvents, "mongo-events", 5000, "deliveries of each case on the MongoDB store (embedded FerretDB)")
	stores := fs.String("stores", "memory,mongo", "stores to measure, comma-separated: memory, mongo (in-process publishing only)")
	fs.StringVar(&c.publish, "publish", "inproc", "inproc: events handed to the service in this process; http: a whole collabd, events published over HTTP (memory store)")
	fs.IntVar(&c.rate, "rate", 50, "rateLimit of the rate case (0: no rate case)")
	fs.IntVar(&c.repeat, "repeat", 3, "runs of each delivery case, each with its own limit measurement; the run with the median share is reported")
	fs.DurationVar(&c.limitFor, "limit-for", 3*time.Second, "how long each measurement of the signed-POST limit runs")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	fs.StringVar(&c.memProfile, "memprofile", "", "write a heap profile (allocations of the whole run) to this file")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	c.rateSeconds, c.fairness, c.timeout = 12, true, 5*time.Minute
	for s := range strings.SplitSeq(*stores, ",") {
		switch s = strings.TrimSpace(s); s {
		case "memory", "mongo":
			c.stores = append(c.stores, s)
		default:
			return c, fmt.Errorf("-stores: %q is neither memory nor mongo", s)
		}
	}
	switch {
	case c.publish != "inproc" && c.publish != "http":
		return c, errors.New("-publish must be inproc or http")
	case c.events < 100 || c.mongoEvents < 100:
		return c, errors.New("-events and -mongo-events must be at least 100")
	case c.rate < 0 || c.limitFor <= 0 || c.repeat < 1:
		return c, errors.New("-rate must be 0 or more, -limit-for positive and -repeat at least 1")
	}
	return c, nil
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		log.Fatal(err)
	}
	if err := profiled(cfg.cpuProfile, func() error {
		_, err := run(context.Background(), cfg, os.Stdout)
		return err
	}); err != nil {
		log.Fatal(err)
	}
	if cfg.memProfile != "" {
		if err := writeHeapProfile(cfg.memProfile); err != nil {
			log.Fatal(err)
		}
	}
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	return errors.Join(pprof.Lookup("allocs").WriteTo(f, 0), f.Close())
}

// profiled runs f, under a CPU profile written to path when path is set.
func profiled(path string, f func() error) error {
	if path == "" {
		return f()
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		return err
	}
	err = f()
	pprof.StopCPUProfile()
	return errors.Join(err, out.Close())
}

// target is a webhooks service under measurement.
type target interface {
	createEndpoint(url string, filterTypes []string, rateLimit int) (string, error)
	deleteEndpoint(id string) error
	publish(prefix, typ string, n int) error
	close()
}

// row is one measured case.
type row struct {
	store, name       string
	events, delivered int
	took              time.Duration
	perSec, limit     float64
	cpu, limitCPU     time.Duration // this process's CPU time per delivery, per signed POST
	allocs, limAllocs float64       // heap objects allocated per delivery, per signed POST
	load              string
	shares            []float64 // of every run, in order
}

func (r row) share() float64 { return 100 * r.perSec / r.limit }

// cpuShare is the delivery's CPU cost against the signed POST's: what the share would be
// if both had the whole machine, whatever else runs on it.
func (r row) cpuShare() float64 { return 100 * float64(r.limitCPU) / float64(r.cpu) }

// report is what a run measured.
type report struct {
	rows     []row
	rate     []rateResult
	fairness []fairResult
}

type rateResult struct {
	store        string
	limit, total int
	over         time.Duration
	measured     float64
}

type fairResult struct {
	store   string
	latency time.Duration
}

func run(ctx context.Context, cfg config, out io.Writer) (*report, error) {
	r, err := startReceiver()
	if err != nil {
		return nil, err
	}
	defer r.close()
	rep := &report{}
	how := "events handed to the service in this process (HandleEvent) by 4 goroutines"
	if cfg.publish == "http" {
		how = "events published over HTTP by 16 callers to a whole collabd"
	}
	fmt.Fprintf(out, "Webhook deliveries to a loopback receiver in the same process, %s; GOMAXPROCS %d, %s; load average at the start %s\n\n",
		how, runtime.GOMAXPROCS(0), runtime.Version(), loadAvg())
	stores := cfg.stores
	if cfg.publish == "http" {
		stores = []string{"memory"}
	}
	for _, store := range stores {
		if err := runStore(ctx, cfg, store, r, rep); err != nil {
			return rep, fmt.Errorf("%s store: %w", store, err)
		}
	}
	printReport(out, rep)
	return rep, nil
}

func newTarget(cfg config, store string) (target, error) {
	switch {
	case cfg.publish == "http":
		return newOverHTTP()
	case store == "mongo":
		return newMongoInproc()
	}
	return newInproc(webhooks.NewMemoryStore(), nil)
}

// runStore runs every case on one store.
func runStore(ctx context.Context, cfg config, store string, r *receiver, rep *report) error {
	tg, err := newTarget(cfg, store)
	if err != nil {
		return err
	}
	defer tg.close()
	events := cfg.events
	label := "memory"
	if store == "mongo" {
		events, label = cfg.mongoEvents, "MongoDB (embedded FerretDB)"
	}
	if cfg.publish == "http" {
		label = "memory, published over HTTP"
	}
	if err := warmUp(ctx, cfg, tg, r, label); err != nil {
		return err
	}
	cr := caseRun{ctx: ctx, cfg: cfg, tg: tg, r: r, rep: rep, label: label}
	measureCase := cr.measure

	one, err := tg.createEndpoint(r.addr+"/one", []string{"one.event"}, 0)
	if err != nil {
		return err
	}
	if err := measureCase("1 endpoint", "one", "one.event", events, int64(events)); err != nil {
		return err
	}
	if err := tg.deleteEndpoint(one); err != nil {
		return err
	}
	many := make([]string, 100)
	for i := range many {
		if many[i], err = tg.createEndpoint(fmt.Sprintf("%s/many%d", r.addr, i), []string{"many.event"}, 0); err != nil {
			return err
		}
	}
	n := events / 100
	if err := measureCase("100 endpoints", "many", "many.event", n, int64(n*100)); err != nil {
		return err
	}
	// An API key has at most 100 endpoints: one of them makes room for the dead one.
	if err := tg.deleteEndpoint(many[99]); err != nil {
		return err
	}
	dead, err := tg.createEndpoint(r.addr+"/dead", []string{"many.event"}, 0)
	if err != nil {
		return err
	}
	if err := measureCase("99 endpoints + 1 that never answers", "dead", "many.event", n, int64(n*99)); err != nil {
		return err
	}
	r.release("/dead")
	for _, id := range append(many[:99], dead) {
		if err := tg.deleteEndpoint(id); err != nil {
			return err
		}
	}
	if cfg.rate > 0 {
		res, err := rateCase(cfg, tg, r)
		if err != nil {
			return err
		}
		res.store = label
		rep.rate = append(rep.rate, res)
	}
	if p, ok := tg.(*inproc); ok && cfg.fairness {
		lat, err := p.testEventLatency(r)
		r.release("/dead/fair")
		if errors.Is(err, errNotArrived) {
			lat = -1
		} else if err != nil {
			return err
		}
		rep.fairness = append(rep.fairness, fairResult{store: label, latency: lat})
	}
	return nil
}

// warmUp sends a first delivery, which gives the limit its body: the engine's own.
func warmUp(ctx context.Context, cfg config, tg target, r *receiver, label string) error {
	warm, err := tg.createEndpoint(r.addr+"/warm", []string{"warm.event"}, 0)
	if err != nil {
		return err
	}
	if _, err := measure(ctx, cfg, tg, r, "warm", "warm.event", 1, 1); err != nil {
		return err
	}
	log.Printf("%s: the body the engine sends, and the limit too, is %d bytes", label, len(r.firstBody()))
	return tg.deleteEndpoint(warm)
}

// caseRun measures the delivery cases of one store.
type caseRun struct {
	ctx   context.Context
	cfg   config
	tg    target
	r     *receiver
	rep   *report
	label string
}

// measure runs a case cfg.repeat times, each after a measurement of the signed-POST limit,
// and adds the run with the median share to the report.
func (c caseRun) measure(name, prefix, typ string, n int, want int64) error {
	var runs []row
	for i := range c.cfg.repeat {
		lim, err := signedPostLimit(c.ctx, c.r.addr+"/limit", c.r.firstBody(), c.cfg.limitFor)
		if err != nil {
			return err
		}
		load, cpu0, allocs0 := loadAvg(), cpuTime(), mallocs()
		took, err := measure(c.ctx, c.cfg, c.tg, c.r, fmt.Sprintf("%s%d_", prefix, i), typ, n, want)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		rw := row{store: c.label, name: name, events: n, delivered: int(want), took: took, perSec: float64(want) / took.Seconds(),
			limit: lim.perSec, cpu: (cpuTime() - cpu0) / time.Duration(want), limitCPU: lim.cpu, load: load + " / " + loadAvg(),
			allocs: float64(mallocs()-allocs0) / float64(want), limAllocs: lim.allocs}
		log.Printf("%s, %s: %.0f/s, %.0f%% of %.0f/s; CPU %v per delivery, %v per POST (%.0f%%); allocs %.0f / %.0f; load average %s",
			rw.store, rw.name, rw.perSec, rw.share(), rw.limit, rw.cpu, rw.limitCPU, rw.cpuShare(), rw.allocs, rw.limAllocs, rw.load)
		runs = append(runs, rw)
	}
	median := slices.Clone(runs)
	slices.SortFunc(median, func(a, b row) int { return cmp.Compare(a.share(), b.share()) })
	rw := median[len(median)/2]
	for _, x := range runs {
		rw.shares = append(rw.shares, x.share())
	}
	c.rep.rows = append(c.rep.rows, rw)
	return nil
}

// measure publishes n events and returns the time until want more deliveries have arrived.
func measure(ctx context.Context, cfg config, tg target, r *receiver, prefix, typ string, n int, want int64) (time.Duration, error) {
	start := time.Now()
	base := r.total.Load()
	if err := tg.publish(prefix, typ, n); err != nil {
		return 0, err
	}
	at, ok := r.waitFor(base, want, cfg.timeout)
	if !ok || ctx.Err() != nil {
		return 0, fmt.Errorf("%d of %d deliveries in %v", r.total.Load()-base, want, cfg.timeout)
	}
	return at.Sub(start), nil
}

// rateCase sends rate × rateSeconds deliveries to an endpoint limited to rate per second and
// measures the rate over the whole seconds between the first and the last.
func rateCase(cfg config, tg target, r *receiver) (rateResult, error) {
	id, err := tg.createEndpoint(r.addr+"/rate", []string{"rate.event"}, cfg.rate)
	if err != nil {
		return rateResult{}, err
	}
	before := len(r.rateTimes())
	total := cfg.rate * cfg.rateSeconds
	if err := tg.publish("rate", "rate.event", total); err != nil {
		return rateResult{}, err
	}
	deadline := time.Now().Add(time.Duration(cfg.rateSeconds)*time.Second + time.Minute)
	for len(r.rateTimes())-before < total {
		if time.Now().After(deadline) {
			return rateResult{}, fmt.Errorf("rate case: %d of %d", len(r.rateTimes())-before, total)
		}
		time.Sleep(10 * time.Millisecond)
	}
	times := r.rateTimes()[before:]
	// The rate over whole seconds, leaving out the first and last (partly filled) ones.
	first, last := times[0].Truncate(time.Second).Add(time.Second), times[len(times)-1].Truncate(time.Second)
	inside := 0
	for _, t := range times {
		if !t.Before(first) && t.Before(last) {
			inside++
		}
	}
	res := rateResult{limit: cfg.rate, total: total, over: last.Sub(first)}
	if res.over > 0 {
		res.measured = float64(inside) / res.over.Seconds()
	}
	return res, tg.deleteEndpoint(id)
}

func printReport(out io.Writer, rep *report) {
	fmt.Fprintln(out, "The run with the median share of each case; the shares of every run beside it. CPU: this process's CPU time per")
	fmt.Fprintln(out, "delivery and per signed POST of the limit (both with the receiver's); their ratio is the share with the machine to itself.")
	fmt.Fprintln(out)
	fmt.Fprintln(out, "| store | case | events | deliveries | time | deliveries/s | signed-POST limit (8 senders) | share of the limit | every run's share | CPU per delivery / per POST | CPU share | allocations per delivery / per POST | load average (before limit / after case) |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rep.rows {
		shares := make([]string, len(r.shares))
		for i, x := range r.shares {
			shares[i] = fmt.Sprintf("%.0f%%", x)
		}
		fmt.Fprintf(out, "| %s | %s | %d | %d | %s | %.0f | %.0f/s | %.0f%% | %s | %s / %s | %.0f%% | %.0f / %.0f | %s |\n", r.store, r.name, r.events, r.delivered,
			r.took.Round(time.Millisecond), r.perSec, r.limit, r.share(), strings.Join(shares, ", "),
			r.cpu.Round(time.Microsecond), r.limitCPU.Round(time.Microsecond), r.cpuShare(), r.allocs, r.limAllocs, r.load)
	}
	if len(rep.rate) > 0 {
		fmt.Fprintln(out, "\n| store | rateLimit | deliveries | measured over | rate | off by |\n|---|---|---|---|---|---|")
		for _, r := range rep.rate {
			fmt.Fprintf(out, "| %s | %d/s | %d | %s | %.1f/s | %.1f%% |\n", r.store, r.limit, r.total, r.over, r.measured,
				100*(r.measured-float64(r.limit))/float64(r.limit))
		}
	}
	if len(rep.fairness) > 0 {
		fmt.Fprintln(out, "\n| store | tenant A's test event while tenant B's 20 endpoints hang (30 events) |\n|---|---|")
		for _, f := range rep.fairness {
			lat := f.latency.Round(time.Millisecond).String()
			if f.latency < 0 {
				lat = "not within a minute"
			}
			fmt.Fprintf(out, "| %s | %s |\n", f.store, lat)
		}
	}
}

// loadAvg is the machine's 1-minute load average, "?" where /proc has none.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "?"
}
