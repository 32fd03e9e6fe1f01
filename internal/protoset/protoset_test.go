package protoset

import (
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The list holds every .proto file of proto/ and nothing else: a package missing from it (a
// stale protoset.pb.go) fails here, naming the file, before scripts/check-generated runs.
func TestEveryProtoFileListed(t *testing.T) {
	var want []string
	err := filepath.WalkDir("../../proto", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".proto") {
			return err
		}
		rel, err := filepath.Rel("../../proto", path)
		want = append(want, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range Files() {
		got = append(got, f.Path())
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("protoset lists %v\nproto/ holds %v\nrun scripts/generate", got, want)
	}
	if len(Methods()) < 50 || len(Services()) < 10 {
		t.Fatalf("%d services, %d methods", len(Services()), len(Methods()))
	}
}
