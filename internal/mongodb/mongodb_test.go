package mongodb_test

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/collab/collab/internal/mongodb"
	"github.com/collab/collab/internal/testkit/mongotest"
)

func TestMain(m *testing.M) { os.Exit(mongotest.Run(m)) }

func TestMasterSecretIsCreatedOnceAndKept(t *testing.T) {
	conn := mongotest.Connect(t)
	ctx := context.Background()
	a, err := conn.MasterSecret(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := conn.MasterSecret(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != 32 || !bytes.Equal(a, b) {
		t.Fatalf("secrets differ or wrong size: %x %x", a, b)
	}
	other := mongotest.Connect(t)
	c, err := other.MasterSecret(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a, c) {
		t.Fatal("two deployments (prefixes) share a secret")
	}
}

func TestDuplicateKeyIsRecognised(t *testing.T) {
	conn := mongotest.Connect(t)
	ctx := context.Background()
	coll := conn.Database("probe").Collection("items")
	if _, err := coll.InsertOne(ctx, map[string]any{"_id": "x"}); err != nil {
		t.Fatal(err)
	}
	_, err := coll.InsertOne(ctx, map[string]any{"_id": "x"})
	if !mongodb.IsDuplicateKey(err) {
		t.Fatalf("second insert: %v, want duplicate key", err)
	}
}

func TestConnectRefusesBadURI(t *testing.T) {
	if _, err := mongodb.Connect(context.Background(), "not-a-uri"); err == nil {
		t.Fatal("Connect accepted a bad URI")
	}
}
