package webhooks

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/collab/collab/internal/racetest"
	"github.com/collab/collab/internal/testkit/mongotest"
)

// indexOfWinner reads back which swap wrote a secret "whsec_<round>_<i>".
func indexOfWinner(secret string) int {
	i := strings.LastIndexByte(secret, '_')
	n, _ := strconv.Atoi(secret[i+1:])
	return n
}

// replicas returns two stores on the same data, as two processes of one deployment have: the
// memory store's one instance twice, or two MongoDB stores on one database (each with its own
// in-process locks, which do not reach the other).
type replicas func(t *testing.T) [2]Store

func memoryReplicas(t *testing.T) [2]Store {
	s := NewMemoryStore()
	t.Cleanup(func() { checkMemoryStore(t, s) })
	return [2]Store{s, s}
}

func mongoReplicas(t *testing.T) [2]Store {
	db := mongotest.Connect(t).Database("webhooks")
	var out [2]Store
	for i := range out {
		s, err := NewMongoStore(context.Background(), db)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = s
	}
	return out
}

// runConcurrencySuite proves that what the engine and the handlers rely on from MongoDB's
// single-document atomicity holds across processes: concurrent updates of one endpoint or
// config, each to fields of its own, all land; a delivery is claimed by one worker; a rate
// slot counts every call (issue 20, finding 1; the embedded server lost updates between
// processes, which the stores' in-process locks do not cover).
func runConcurrencySuite(t *testing.T, newReplicas replicas) {
	ctx := context.Background()
	t.Run("secrets swapped over the same read: exactly one swap lands, across replicas", func(t *testing.T) {
		t.Parallel()
		r := newReplicas(t)
		for round := range 10 {
			id := fmt.Sprint("s", round)
			must(t, r[0].CreateEndpoint(ctx, endpoint("k1", id)))
			read, err := r[1].Endpoint(ctx, "k1", id)
			must(t, err)
			var won atomic.Int64
			errs := make([]error, 4)
			racetest.N(len(errs), func(i int) {
				errs[i] = r[i%2].SwapSecrets(ctx, "k1", id, read.Secrets, []Secret{{Value: fmt.Sprint("whsec_", round, "_", i)}}, at(sec))
				if errs[i] == nil {
					won.Add(1)
				}
			})
			for i, err := range errs {
				if err != nil && !errors.Is(err, ErrChanged) {
					t.Fatalf("round %d, swap %d: %v", round, i, err)
				}
			}
			got, err := r[0].Endpoint(ctx, "k1", id)
			must(t, err)
			if won.Load() != 1 || len(got.Secrets) != 1 || errs[indexOfWinner(got.Secrets[0].Value)] != nil {
				t.Fatalf("round %d: %d swaps over the same read landed (stored %v, errors %v): want exactly one", round, won.Load(), got.Secrets, errs)
			}
		}
		wantErr(t, "swap of no endpoint", r[0].SwapSecrets(ctx, "k1", "nope", nil, nil, t0), ErrNotFound)
	})

	t.Run("concurrent updates of one endpoint's fields all land across replicas", func(t *testing.T) {
		t.Parallel()
		r := newReplicas(t)
		fail := func(_ any, err error) {
			if err != nil {
				t.Error(err)
			}
		}
		for round := range 10 {
			id := fmt.Sprint("e", round)
			must(t, r[0].CreateEndpoint(ctx, endpoint("k1", id)))
			url, desc, uid := fmt.Sprint("https://example.com/new/", round), fmt.Sprint("new ", round), fmt.Sprint("new-uid-", round)
			secrets := []Secret{{Value: fmt.Sprint("whsec_", round)}}
			since := at(time.Duration(round) * sec)
			racetest.Together(
				func() { fail(r[0].UpdateEndpoint(ctx, "k1", id, EndpointPatch{URL: &url}, at(sec))) },
				func() { fail(r[1].UpdateEndpoint(ctx, "k1", id, EndpointPatch{Description: &desc}, at(sec))) },
				func() { fail(r[0].UpdateEndpoint(ctx, "k1", id, EndpointPatch{UID: &uid}, at(sec))) },
				func() {
					fail(r[1].UpdateEndpoint(ctx, "k1", id, EndpointPatch{Clear: EndpointFields{RateLimit: true, FilterTypes: true}}, at(sec)))
				},
				func() { fail(nil, r[1].SetSecrets(ctx, "k1", id, secrets, at(sec))) },
				func() { fail(nil, r[0].SetFailing(ctx, "k1", id, since)) },
			)
			got, err := r[1].Endpoint(ctx, "k1", id)
			must(t, err)
			if got.URL != url || got.Description == nil || *got.Description != desc || got.UID == nil || *got.UID != uid ||
				got.RateLimit != nil || got.FilterTypes != nil || len(got.Channels) != 1 ||
				len(got.Secrets) != 1 || got.Secrets[0].Value != secrets[0].Value || !got.FailingSince.Equal(since) {
				t.Fatalf("round %d: an acknowledged update was lost: %+v", round, got)
			}
		}
	})

	t.Run("concurrent updates of one config's fields all land across replicas", func(t *testing.T) {
		t.Parallel()
		r := newReplicas(t)
		for round := range 10 {
			key := fmt.Sprint("k", round)
			fail := func(_ any, err error) {
				if err != nil {
					t.Error(err)
				}
			}
			racetest.Together(
				func() { fail(r[0].UpdateConfig(ctx, key, ConfigPatch{Enabled: ptr(true)}, at(sec))) },
				func() { fail(r[1].UpdateConfig(ctx, key, ConfigPatch{EncodeData: ptr(true)}, at(sec))) },
				func() { fail(r[0].UpdateConfig(ctx, key, ConfigPatch{PublicKey: ptr("pk")}, at(sec))) },
				func() { fail(r[1].UpdateBasicConfig(ctx, key, BasicConfigPatch{RawURL: ptr("https://raw")}, at(sec))) },
				func() { fail(r[0].UpdateBasicConfig(ctx, key, BasicConfigPatch{AuthToken: ptr("tok")}, at(sec))) },
			)
			c, err := r[1].Config(ctx, key)
			must(t, err)
			b, err := r[0].BasicConfig(ctx, key)
			must(t, err)
			if !c.Enabled || !c.EncodeData || c.PublicKey != "pk" || b.RawURL != "https://raw" || b.AuthToken != "tok" {
				t.Fatalf("round %d: an acknowledged update was lost: %+v %+v", round, c, b)
			}
		}
	})

	t.Run("a delivery is claimed by one replica", func(t *testing.T) {
		t.Parallel()
		r := newReplicas(t)
		for round := range 10 {
			d := delivery("k1", fmt.Sprint("m", round), "e1", at(0))
			queue(t, r[0], d)
			var won atomic.Int32
			racetest.N(6, func(i int) {
				ok, err := r[i%2].ClaimDelivery(ctx, d.ID, at(sec), at(minute))
				if err != nil {
					t.Error(err)
				}
				if ok {
					won.Add(1)
				}
			})
			if won.Load() != 1 {
				t.Fatalf("round %d: %d claims won, want 1", round, won.Load())
			}
		}
	})

	t.Run("a rate slot counts every call across replicas", func(t *testing.T) {
		t.Parallel()
		r := newReplicas(t)
		const limit, calls = 5, 12
		for round := range 5 {
			var taken atomic.Int32
			racetest.N(calls, func(i int) {
				ok, err := r[i%2].TakeSlot(ctx, "k1\x1fe1", t0.Unix()+int64(round), limit)
				if err != nil {
					t.Error(err)
				}
				if ok {
					taken.Add(1)
				}
			})
			if taken.Load() != limit {
				t.Fatalf("round %d: %d of %d calls took a slot, want the limit %d", round, taken.Load(), calls, limit)
			}
		}
	})
}
