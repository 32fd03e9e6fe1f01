// Command crdthostile runs hostile live-sync clients (issue 19) against real collabd
// processes, one fresh process per scenario, and prints what each attack cost the server: the
// outcome the attacker saw (a close code, or accepted), the server's peak RSS growth and CPU
// time during the attack (read from /proc, never from the server's own figures), the wall
// time, and whether two honest clients of the attacked document still worked afterwards.
//
// The scenarios, one per finding of the attack pass (main_test.go asserts each fixed
// behaviour; this program only measures):
//
//  1. step-1 amplification: 3 viewer sockets send 500 step 1s each for a 3.9 MB text and
//     never read;
//     2a. awareness states of 7.9 MiB (16 clients of one viewer), and one just over 8 KiB;
//     2b. 200 users' connections with a 7 KiB awareness state each, then a joiner;
//     3a. one live update of about 5 MiB: a long insert and a delete set removing every
//     second character;
//     3b. the same through REST within its limits (40k, 80k, 320k characters), then an
//     Update of the text;
//  4. an editor pushing 12 MB of text through live sync in 4 MB frames;
//  5. one token opening 1000 connections to one editor's room.
//
// A watchdog samples the server's RSS every 50 ms during each attack and kills the server
// past -cap bytes of growth (3 GiB), so a broken server cannot take the machine with it. An
// attack ends when the server has gone idle after it (at most -settle) or when a REST call
// passes -rest-timeout.
//
//	go run ./bench/crdthostile [-run regexp] [-cap 3221225472] [-settle 20s] [-rest-timeout 3m]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"regexp"
	"runtime"
	"strings"
	"time"

	"github.com/collab/collab/bench/collabproc"
)

// scenario is one row of the program's table.
type scenario struct {
	name string
	run  func(ctx context.Context, cfg config) Result
}

// scenarios are the program's rows, in order.
func scenarios() []scenario {
	return []scenario{
		{nameStep1, func(ctx context.Context, cfg config) Result { return runStep1(ctx, cfg).Result }},
		{nameAwarenessLarge, func(ctx context.Context, cfg config) Result { return runAwarenessLarge(ctx, cfg).Result }},
		{nameAwarenessMany, func(ctx context.Context, cfg config) Result { return runAwarenessMany(ctx, cfg).Result }},
		{nameHolesLive, func(ctx context.Context, cfg config) Result { return runHolesLive(ctx, cfg).Result }},
		{nameHolesREST(40_000), func(ctx context.Context, cfg config) Result { return runHolesREST(ctx, cfg, 40_000).Result }},
		{nameHolesREST(80_000), func(ctx context.Context, cfg config) Result { return runHolesREST(ctx, cfg, 80_000).Result }},
		{nameHolesREST(holesRESTChars), func(ctx context.Context, cfg config) Result { return runHolesREST(ctx, cfg, holesRESTChars).Result }},
		{nameTwoLimits, func(ctx context.Context, cfg config) Result { return runTwoLimits(ctx, cfg).Result }},
		{nameConnCap, func(ctx context.Context, cfg config) Result { return runConnCap(ctx, cfg).Result }},
	}
}

func main() {
	only := flag.String("run", "", "run only the scenarios whose name matches this regular expression")
	growthCap := flag.Int64("cap", hardCap, "RSS growth in bytes at which the watchdog kills the server")
	restTimeout := flag.Duration("rest-timeout", 3*time.Minute, "time limit of one REST call of an attack")
	settle := flag.Duration("settle", 20*time.Second, "how long an attack waits at most for the server to go idle after its last frame")
	flag.Parse()
	match, err := regexp.Compile(*only)
	if err != nil {
		log.Fatal(err)
	}
	defer collabproc.Cleanup()
	cfg := config{watchLimit: func(int64) int64 { return *growthCap }, restTimeout: *restTimeout, settleMax: *settle}
	var rows []Result
	for _, s := range scenarios() {
		if !match.MatchString(s.name) {
			continue
		}
		log.Printf("running %s", s.name)
		rows = append(rows, s.run(context.Background(), cfg))
	}
	fmt.Printf("collabd on loopback, memory store, one fresh process per scenario; watchdog at +%d MiB; Go %s, %d CPUs\n\n",
		*growthCap>>20, runtime.Version(), runtime.NumCPU())
	fmt.Print(table(rows))
}

// table writes the rows as markdown.
func table(rows []Result) string {
	var b strings.Builder
	b.WriteString("| scenario | outcome (attacker) | server peak RSS growth | server CPU | wall | honest client |\n|---|---|---|---|---|---|\n")
	for _, r := range rows {
		if r.Err != nil {
			fmt.Fprintf(&b, "| %s | not run: %v | | | | |\n", r.Name, r.Err)
			continue
		}
		outcome := r.Outcome
		switch {
		case errors.Is(r.Watchdog, collabproc.ErrOverLimit):
			outcome += fmt.Sprintf("; **server killed by the watchdog past %s**", mib(r.Limit))
		case r.Watchdog != nil:
			outcome += "; **the server died: " + r.Watchdog.Error() + "**"
		}
		honest := fmt.Sprintf("yes (edit arrived in %v)", r.HonestTook.Round(100*time.Microsecond))
		switch {
		case errors.Is(r.Honest, errNotChecked):
			honest = "not checked"
		case r.Honest != nil:
			honest = "no: " + r.Honest.Error()
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %.1f s | %.1f s | %s |\n", r.Name, cell(outcome), mib(r.Growth), r.CPU.Seconds(), r.Wall.Seconds(), cell(honest))
	}
	return b.String()
}

func mib(n int64) string {
	if n >= 1<<30 {
		return fmt.Sprintf("+%.2f GiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("+%d MiB", n>>20)
}

// cell keeps a table cell on one line.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
