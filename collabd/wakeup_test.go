package collabd

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/collab/collab/internal/testkit/natstest"
)

// The wake-up engine's flags refuse what is not an engine's address, credentials in the
// address, a token or CA for no engine, and a safety poll out of its range; the environment
// twins work as the flags.
func TestWakeupFlags(t *testing.T) {
	for _, bad := range [][]string{
		{"--wakeup-url=http://nats:4222"},
		{"--wakeup-url=nats://"},
		{"--wakeup-url=nats://user:pass@nats:4222"},
		{"--wakeup-url=nats://a:4222,redis://b:6379"},
		{"--wakeup-token=abc"},
		{"--wakeup-tls-ca-file=/ca.pem"},
		{"--wakeup-url=nats://nats:4222", "--wakeup-safety-poll=100ms"},
		{"--wakeup-url=nats://nats:4222", "--wakeup-safety-poll=1h"},
	} {
		if _, err := parse(t, nil, bad...); err == nil {
			t.Errorf("%v accepted", bad)
		} else if strings.Contains(err.Error(), "pass") {
			t.Errorf("%v: the error shows the credentials: %v", bad, err)
		}
	}
	c, err := parse(t, map[string]string{"COLLAB_WAKEUP_URL": "tls://a:4222, tls://b:4222", "COLLAB_WAKEUP_TOKEN": "s3cret"},
		"--wakeup-tls-ca-file=/ca.pem", "--wakeup-safety-poll=2s")
	if err != nil {
		t.Fatal(err)
	}
	if c.WakeupURL != "tls://a:4222, tls://b:4222" || c.WakeupToken != "s3cret" || c.WakeupCAFile != "/ca.pem" || c.WakeupSafetyPoll != 2*time.Second {
		t.Fatalf("parsed %+v", c)
	}
	if c, _ := parse(t, nil); c.WakeupURL != "" || c.WakeupSafetyPoll != 5*time.Second {
		t.Fatalf("defaults: %q %s", c.WakeupURL, c.WakeupSafetyPoll)
	}
}

// With the engine configured and down, the process starts and stays ready (everything works
// at the safety poll's latency), /readyz says the engine is unreachable and the gauge shows it;
// once the engine is up, /readyz is plain ready again.
func TestReadyzSaysWakeupEngineDown(t *testing.T) {
	s := natstest.Server(t, natstest.Options{Token: "s3cret"})
	p := startProcess(t, "--metrics-addr=127.0.0.1:0", "--wakeup-url="+s.ClientURL(), "--wakeup-token=s3cret")
	waitReady := func(want string) string {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			code, body := get(t, "http://"+p.MetricsAddr+"/readyz")
			if code == http.StatusOK && strings.Contains(body, want) {
				return body
			}
			if time.Now().After(deadline) {
				t.Fatalf("/readyz: %d %s, want 200 with %q", code, body, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if body := waitReady(`"ready"`); body != `{"status":"ready"}` {
		t.Fatalf("/readyz with the engine up: %s", body)
	}
	_, metricsBody := get(t, "http://"+p.MetricsAddr+"/metrics")
	if !strings.Contains(metricsBody, "collab_wakeup_engine_up 1") {
		t.Fatal("the gauge does not show the engine up")
	}
	s.Shutdown()
	waitReady("wake-up engine (--wakeup-url) is unreachable")
	_, metricsBody = get(t, "http://"+p.MetricsAddr+"/metrics")
	if !strings.Contains(metricsBody, "collab_wakeup_engine_up 0") {
		t.Fatal("the gauge does not show the engine down")
	}
}
