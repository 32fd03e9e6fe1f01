package collabd

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// The indexes every service creates at start, as docs/operations.md lists them: the table there
// is this test's rendering of a real process's databases (every service, on the embedded
// MongoDB-wire server), so it cannot drift from the stores. COLLAB_UPDATE_DOCS=1 rewrites it.
func TestOperationsDocListsEveryIndex(t *testing.T) {
	p := startProcess(t, "--data-dir="+t.TempDir())
	ctx := context.Background()
	client, err := mongo.Connect(options.Client().ApplyURI(p.embedded.URI()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.Disconnect(ctx) }()
	table, err := indexTable(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	const doc = "../docs/operations.md"
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- BEGIN indexes: rendered by collabd/indexes_test.go -->\n", "<!-- END indexes -->"
	i, j := strings.Index(string(b), begin), strings.Index(string(b), end)
	if i < 0 || j < i {
		t.Fatalf("%s has no indexes region (%q ... %q)", doc, begin, end)
	}
	current := string(b[i+len(begin) : j])
	if current == table {
		return
	}
	if os.Getenv("COLLAB_UPDATE_DOCS") == "1" {
		out := string(b[:i+len(begin)]) + table + string(b[j:])
		if err := os.WriteFile(doc, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the indexes table of %s", doc)
		return
	}
	t.Errorf("the indexes table of %s differs from the indexes the stores create; run COLLAB_UPDATE_DOCS=1 go test ./collabd -run %s\nwant:\n%s", doc, t.Name(), table)
}

// indexTable renders every index of the process's databases (collab_*) but the _id ones, which
// every collection has, as a Markdown table sorted by database, collection and name.
func indexTable(ctx context.Context, client *mongo.Client) (string, error) {
	dbs, err := client.ListDatabaseNames(ctx, bson.D{})
	if err != nil {
		return "", err
	}
	slices.Sort(dbs)
	var sb strings.Builder
	sb.WriteString("| database | collection | index | keys | options |\n|---|---|---|---|---|\n")
	for _, name := range dbs {
		if !strings.HasPrefix(name, "collab_") {
			continue
		}
		db := client.Database(name)
		colls, err := db.ListCollectionNames(ctx, bson.D{})
		if err != nil {
			return "", err
		}
		slices.Sort(colls)
		for _, coll := range colls {
			cur, err := db.Collection(coll).Indexes().List(ctx)
			if err != nil {
				return "", err
			}
			var specs []bson.M
			if err := cur.All(ctx, &specs); err != nil {
				return "", err
			}
			slices.SortFunc(specs, func(a, b bson.M) int { return strings.Compare(fmt.Sprint(a["name"]), fmt.Sprint(b["name"])) })
			for _, s := range specs {
				if s["name"] == "_id_" {
					continue
				}
				fmt.Fprintf(&sb, "| `%s` | `%s` | `%s` | %s | %s |\n", name, coll, s["name"], keysText(s["key"]), optionsText(s))
			}
		}
	}
	return sb.String(), nil
}

func keysText(k any) string {
	d, ok := k.(bson.D)
	if !ok {
		return fmt.Sprint(k)
	}
	var parts []string
	for _, e := range d {
		parts = append(parts, fmt.Sprintf("`%s` %v", e.Key, e.Value))
	}
	return strings.Join(parts, ", ")
}

func optionsText(s bson.M) string {
	var opts []string
	for _, o := range []string{"unique", "sparse", "expireAfterSeconds", "partialFilterExpression"} {
		if v, ok := s[o]; ok {
			opts = append(opts, fmt.Sprintf("%s: %v", o, v))
		}
	}
	return strings.Join(opts, ", ")
}
