package main

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/collab/collab/bench/collabproc"
	"github.com/collab/collab/internal/yjs"
)

// The per-finding regression tests of issue 19: each runs its attack against a fresh collabd
// process (built without the race detector) and asserts the fixed server's behaviour, with
// the bounds next to each scenario (their comments say what the old server measured). A
// watchdog kills a server whose memory passes the bound by half again, and the test fails
// with the figure.

func TestMain(m *testing.M) {
	code := m.Run()
	collabproc.Cleanup()
	os.Exit(code)
}

// testConfig stops a server soon after it breaks a bound, and gives the timed REST Update
// of finding 3 a little more than its bound, so that a slow answer is measured, not waited for.
func testConfig() config {
	return config{watchLimit: limitFor, restTimeout: holesUpdateWithin + 2*time.Second, settleMax: 3 * time.Second}
}

// scenarioContext bounds one scenario: its steps have their own shorter limits.
func scenarioContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// ran logs the scenario's row and stops the test when it could not run or the watchdog
// stopped it.
func ran(t *testing.T, r Result) {
	t.Helper()
	t.Logf("\n%s", table([]Result{r}))
	if r.Err != nil {
		t.Fatalf("the scenario could not run: %v", r.Err)
	}
	if r.Watchdog != nil {
		t.Fatalf("the watchdog stopped the attack at a peak RSS growth of %s (its limit %s, the scenario's bound and half again): %v; CPU %.1f s within %.1f s; attacker saw: %s",
			mib(r.Growth), mib(r.Limit), r.Watchdog, r.CPU.Seconds(), r.Wall.Seconds(), r.Outcome)
	}
}

func growthUnder(t *testing.T, r Result, bound int64) {
	t.Helper()
	if r.Growth >= bound {
		t.Errorf("the server's peak RSS grew by %s during the attack, want under %s", mib(r.Growth), mib(bound))
	}
}

func honestWorked(t *testing.T, r Result) {
	t.Helper()
	if r.Honest != nil {
		t.Errorf("an honest client's edit did not reach another honest client within %v: %v", honestWithin, r.Honest)
	}
}

// Finding 1: repeated step 1s coalesce into at most one outstanding answer per connection.
func TestStep1Amplification(t *testing.T) {
	r := runStep1(scenarioContext(t), testConfig())
	ran(t, r.Result)
	growthUnder(t, r.Result, step1MaxGrowth)
	honestWorked(t, r.Result)
}

// Finding 2: a state over 8 KiB closes its connection (4413), and a room keeps at most 1 MiB
// of states, so a joiner's first frame is bounded.
func TestAwarenessBound(t *testing.T) {
	t.Run("large states", func(t *testing.T) {
		r := runAwarenessLarge(scenarioContext(t), testConfig())
		ran(t, r.Result)
		if code := r.Probe.code(); code != statusTooLarge {
			t.Errorf("a state of %d bytes: the socket is %s, want closed %d", awarenessOverBytes, r.Probe, statusTooLarge)
		}
		if !r.Giant.ended() {
			t.Errorf("%d states of %d bytes sent: the socket is %s, want closed", r.GiantSent, awarenessGiantBytes, r.Giant)
		}
		growthUnder(t, r.Result, awarenessMaxGrowth)
		if r.JoinerFrame > joinerFrameMax {
			t.Errorf("a joiner's awareness frame is %s, want at most %s", size(r.JoinerFrame), size(joinerFrameMax))
		}
	})
	t.Run("many states", func(t *testing.T) {
		r := runAwarenessMany(scenarioContext(t), testConfig())
		ran(t, r.Result)
		if r.JoinerFrame > crowdJoinerFrameMax {
			t.Errorf("after %d connections' states of %d bytes, a joiner's awareness frame is %s, want at most %s",
				r.Sent, crowdStateBytes, size(r.JoinerFrame), size(crowdJoinerFrameMax))
		}
	})
}

// Finding 3: a delete set splitting a text into pieces is refused live, and replacing a text
// of many pieces through REST is not quadratic.
func TestDeleteSetPieces(t *testing.T) {
	t.Run("live", func(t *testing.T) {
		r := runHolesLive(scenarioContext(t), testConfig())
		ran(t, r.Result)
		if code := r.Attacker.code(); code != statusTooLarge && code != statusMalformed {
			t.Errorf("a frame of %d bytes: the socket is %s, want closed %d or %d", r.FrameBytes, r.Attacker, statusTooLarge, statusMalformed)
		}
		if string(r.After) != string(r.Before) {
			t.Errorf("the editor's data changed: Get answers %s, before the attack %s", size(int64(len(r.After))), r.Before)
		}
		growthUnder(t, r.Result, holesMaxGrowth)
		honestWorked(t, r.Result)
	})
	t.Run("rest", func(t *testing.T) {
		r := runHolesREST(scenarioContext(t), testConfig(), holesRESTChars)
		ran(t, r.Result)
		if r.UpdateErr != nil || r.UpdateTook >= holesUpdateWithin {
			t.Fatalf("Update CRDT Data after %d pieces: %v after %.1f s, want an answer within %v", holesRESTChars/2, r.UpdateErr, r.UpdateTook.Seconds(), holesUpdateWithin)
		}
		if r.Text != "z" {
			t.Errorf("Get reads %q after the Update, want \"z\"", r.Text)
		}
	})
}

// Finding 4: live sync refuses (4413) what would take an editor's encoded state past REST's
// 5 MiB, so Get CRDT Data keeps answering.
func TestTwoLimits(t *testing.T) {
	r := runTwoLimits(scenarioContext(t), testConfig())
	ran(t, r.Result)
	if code := r.Attacker.code(); code != statusTooLarge {
		t.Errorf("%d frames of %d characters sent: the socket is %s, want closed %d", r.Sent, limitFrameChars, r.Attacker, statusTooLarge)
	}
	if r.EditorErr != nil {
		t.Errorf("Get CRDT Data of the editor: %v", r.EditorErr)
	}
	if r.DocumentErr != nil {
		t.Errorf("Get CRDT Data of the document: %v", r.DocumentErr)
	}
}

// Finding 5: one user's connections to a room are capped (4429), and another user still
// connects and syncs.
func TestConnectionCap(t *testing.T) {
	r := runConnCap(scenarioContext(t), testConfig())
	ran(t, r.Result)
	if r.Admitted < 1 || r.Admitted > floodPerUser {
		t.Errorf("%d of one token's %d connections admitted, want 1 to %d", r.Admitted, floodConns, floodPerUser)
	}
	if refused := r.Closed[floodRefusal]; refused != floodConns-r.Admitted {
		t.Errorf("%d connections closed %d, want every one not admitted (%d)%s", refused, floodRefusal, floodConns-r.Admitted, r.refusals())
	}
	honestWorked(t, r.Result)
}

// The live attack's update holds what it says: the insert, and every second character
// deleted.
func TestHolesFrame(t *testing.T) {
	insert, err := insertText(holesClient, 11)
	if err != nil {
		t.Fatal(err)
	}
	d := yjs.NewDoc()
	if err := d.Apply(append(insert[:len(insert)-1], everySecond(holesClient, 11)...)); err != nil {
		t.Fatal(err)
	}
	if got := d.JSON("content", yjs.Text); got != "aaaaaa" {
		t.Errorf("the text reads %q, want \"aaaaaa\" (ababababab a with every second deleted)", got)
	}
	f, err := holesFrame(3000)
	if err != nil {
		t.Fatal(err)
	}
	if len(f) > 3000 || len(f) < 2900 {
		t.Errorf("holesFrame(3000) is %d bytes, want just under 3000", len(f))
	}
}

// The close codes the fixed server refuses with (services/crdt/live).
const (
	statusMalformed = websocket.StatusCode(4400)
	statusTooLarge  = websocket.StatusCode(4413)
)
