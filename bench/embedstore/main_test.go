package main

import (
	"strings"
	"testing"
	"time"
)

// TestSmoke runs every case briefly, so the program cannot break unnoticed.
func TestSmoke(t *testing.T) {
	var out strings.Builder
	if err := run(&out, 100*time.Millisecond, 4, 1); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"one record", "own records", "inserts", "two databases"} {
		if !strings.Contains(out.String(), "| "+name+" | ") {
			t.Errorf("no row for %q in\n%s", name, out.String())
		}
	}
	t.Logf("\n%s", out.String())
}
