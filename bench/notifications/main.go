// Command notifications measures Add Notifications with notifyAll to an organization of 10,000
// users on the memory store: how long the add takes to answer, how long until the fan-out has
// filed every inbox entry, and how fast the queued emails (every user's email config set to
// ALL) are written out (to --mail-dir, so the mail server's speed is not what is measured). It
// prints a markdown table for docs/benchmarks.md.
//
//	go run ./bench/notifications [-users 10000] [-rounds 3]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"runtime"
	"time"

	"github.com/collab/collab/bench/apiclient"
	"github.com/collab/collab/collabd"
	"github.com/collab/collab/services"
)

func main() {
	users := flag.Int("users", 10000, "members of the organization")
	rounds := flag.Int("rounds", 3, "notifications added, one after the other")
	flag.Parse()
	if err := run(*users, *rounds); err != nil {
		log.Fatal(err)
	}
}

func run(users, rounds int) error {
	mailDir, err := os.MkdirTemp("", "bench-mail-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(mailDir) }() // best effort: a leftover temp dir is harmless
	cfg, err := collabd.ParseFlags(services.All(), []string{"--http-addr=127.0.0.1:0", "--grpc-addr=127.0.0.1:0", "--rate-limit=off", "--log-level=error", "--mail-dir=" + mailDir}, func(string) string { return "" })
	if err != nil {
		return err
	}
	p, err := collabd.Start(context.Background(), cfg, collabd.Deps{LogOutput: io.Discard})
	if err != nil {
		return err
	}
	// The measurement is over by then; a failed stop changes none of it.
	defer func() { _ = p.Shutdown(context.Background()) }()
	base := "http://" + p.HTTPAddr
	hdr := map[string]string{"x-service-api-key": p.Dev.APIKey, "x-service-auth-token": p.Dev.AuthToken}

	// Seed: the organization's members, in batches of 100, each with email config ALL.
	seedStart := time.Now()
	for start := 0; start < users; start += 100 {
		var batch []any
		var ids []string
		for i := start; i < min(start+100, users); i++ {
			id := fmt.Sprintf("u%05d", i)
			ids = append(ids, id)
			batch = append(batch, map[string]any{"userId": id, "name": "User " + id, "email": id + "@example.com"})
		}
		if err := apiclient.Post(base+"/v2/users/add", hdr, map[string]any{"organizationId": "bench", "createOrganization": true, "documentId": "d", "createDocument": true, "users": batch}, nil); err != nil {
			return err
		}
		if err := apiclient.Post(base+"/v2/notifications/config/set", hdr, map[string]any{"organizationId": "bench", "documentIds": []string{"d"}, "userIds": ids,
			"config": map[string]any{"inbox": "ALL", "email": "ALL", "slack": "NONE"}}, nil); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "seeded %d users in %s\n", users, time.Since(seedStart).Round(time.Millisecond))

	fmt.Printf("Add Notifications with notifyAll, %d members (every email config ALL), memory store, mail to files, GOMAXPROCS %d, %s\n\n", users, runtime.GOMAXPROCS(0), runtime.Version())
	fmt.Println("| round | add answered | every inbox entry filed | emails queued per second (fan-out) | all emails written | emails written per second |")
	fmt.Println("|---|---|---|---|---|---|")
	sent := 0
	for round := range rounds {
		id := fmt.Sprintf("n%d", round)
		start := time.Now()
		if err := apiclient.Post(base+"/v2/notifications/add", hdr, map[string]any{"organizationId": "bench", "documentId": "d", "notificationId": id,
			"actionUser": map[string]any{"userId": "u00000", "name": "Ada"}, "displayHeadlineMessageTemplate": "{{actionUser}} wrote to {{recipientUser}}",
			"displayBodyMessage": "A body of an ordinary length, a sentence or two."}, nil); err != nil {
			return err
		}
		answered := time.Since(start)
		// Filed: the notification lists its recipients once the fan-out is done.
		var filed time.Duration
		for {
			var got struct {
				Result struct {
					Data []struct {
						NotifyUserIDs []string `json:"notifyUserIds"`
					} `json:"data"`
				} `json:"result"`
			}
			if err := apiclient.Post(base+"/v2/notifications/get", hdr, map[string]any{"organizationId": "bench", "notificationIds": []string{id}}, &got); err != nil {
				return err
			}
			if len(got.Result.Data) == 1 && len(got.Result.Data[0].NotifyUserIDs) == users-1 {
				filed = time.Since(start)
				break
			}
			if time.Since(start) > 5*time.Minute {
				return fmt.Errorf("fan-out of %s not done in 5 minutes", id)
			}
			time.Sleep(5 * time.Millisecond)
		}
		sent += users - 1
		for {
			entries, err := os.ReadDir(mailDir)
			if err != nil {
				return err
			}
			if len(entries) >= sent {
				break
			}
			if time.Since(start) > 10*time.Minute {
				return fmt.Errorf("%d of %d emails written in 10 minutes", len(entries), sent)
			}
			time.Sleep(20 * time.Millisecond)
		}
		mailed := time.Since(start)
		fmt.Printf("| %d | %s | %s | %.0f | %s | %.0f |\n", round+1, answered.Round(time.Microsecond), filed.Round(time.Millisecond),
			float64(users-1)/(filed-answered).Seconds(), mailed.Round(time.Millisecond), float64(users-1)/(mailed-filed).Seconds())
	}
	return nil
}
