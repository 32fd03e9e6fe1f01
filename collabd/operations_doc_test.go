package collabd

import (
	"bytes"
	"context"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/collab/collab/collabctl"
	"github.com/collab/collab/internal/service"
	"github.com/collab/collab/services"
)

// The names docs/operations.md tells an operator to type or query are the code's: every
// --flag is one collabd or collabctl declares (or one of the few other tools' the document
// shows), every COLLAB_ / COLLABCTL_ variable is a flag's environment twin, and every collab_
// series is one the code names. A renamed flag or series otherwise leaves the guide wrong
// without any test noticing (the alert rules and the indexes have tests of their own).
func TestOperationsDocNamesExist(t *testing.T) {
	b, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)

	daemon := collabdFlags(t)
	ctlGlobal, ctlAll := collabctlFlags(t)
	// Other programs' flags the guide shows: docker compose, kubectl, mongodump/mongorestore.
	others := []string{"build", "profile", "replicas", "uri", "archive", "gzip", "oplog", "drop", "ns", "all"}
	for _, m := range regexp.MustCompile(`--([a-z][a-z0-9-]*)(\*?)`).FindAllStringSubmatch(doc, -1) {
		name, prefix := m[1], m[2] == "*"
		switch {
		case prefix && (hasPrefixed(daemon, name) || hasPrefixed(ctlAll, name)):
		case !prefix && (slices.Contains(daemon, name) || slices.Contains(ctlAll, name) || slices.Contains(others, name)):
		default:
			t.Errorf("docs/operations.md mentions %s, which neither collabd nor collabctl declares", m[0])
		}
	}

	for _, v := range regexp.MustCompile(`\bCOLLAB(CTL)?_[A-Z0-9_]*[A-Z0-9]\b`).FindAllString(doc, -1) {
		var ok bool
		if strings.HasPrefix(v, collabctl.EnvPrefix) {
			// --metrics-url is repeatable; its twin holds a list.
			ok = v == collabctl.EnvName("metrics-urls") || slices.ContainsFunc(ctlGlobal, func(f string) bool { return collabctl.EnvName(f) == v })
		} else {
			ok = slices.ContainsFunc(daemon, func(f string) bool { return envName(f) == v })
		}
		if !ok {
			t.Errorf("docs/operations.md mentions %s, which is no flag's environment twin", v)
		}
	}

	// Paths into the repository (services/<name>/... stands for every service's).
	paths := 0
	for _, m := range regexp.MustCompile("(?:`|\\./)((?:cmd|collabd|collabctl|deploy|docs|internal|scripts|services)/[^`\\s]*)").FindAllStringSubmatch(doc, -1) {
		paths++
		p := strings.TrimSuffix(strings.ReplaceAll(m[1], "<name>", "documents"), "/")
		if _, err := os.Stat(filepath.Join("..", p)); err != nil {
			t.Errorf("docs/operations.md refers to %s: %v", m[1], err)
		}
	}
	if paths < 5 {
		t.Fatalf("only %d paths found in docs/operations.md: the pattern no longer matches the document", paths)
	}

	// collab_<service> is a service's database; collab_outbox_ (written collab_outbox_*) a prefix.
	databases := map[string]bool{}
	for _, m := range services.All() {
		databases["collab_"+m.Name] = true
	}
	named := seriesNamedInCode(t)
	checked := 0
	for _, s := range regexp.MustCompile(`\bcollab_[a-z0-9_]*`).FindAllString(doc, -1) {
		if strings.HasSuffix(s, "_") || databases[s] {
			continue
		}
		checked++
		if !named[s] {
			t.Errorf("docs/operations.md names the series %s, which no code registers", s)
		}
	}
	if checked < 10 {
		t.Fatalf("only %d series names found in docs/operations.md: the pattern no longer matches the document", checked)
	}
}

func hasPrefixed(names []string, prefix string) bool {
	return slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, prefix) })
}

func envName(flagName string) string {
	return "COLLAB_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// collabdFlags returns the names of every flag of a process that can run every service.
func collabdFlags(t *testing.T) []string {
	t.Helper()
	c := Config{Modules: services.All(), builds: map[string]service.BuildFunc{}}
	fs, _, _ := c.declareFlags(func(string) string { return "" })
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if !slices.Contains(names, "metrics-addr") {
		t.Fatalf("collabd's flags lack --metrics-addr: %v", names)
	}
	return names
}

// collabctlFlags returns collabctl's global flags and those with every command's, read from
// its help texts (the flag sets are built inside each command).
func collabctlFlags(t *testing.T) (global, all []string) {
	t.Helper()
	help := func(args ...string) string {
		var out bytes.Buffer
		collabctl.Main(context.Background(), append(args, "-h"), strings.NewReader(""), &out, &out, func(string) string { return "" })
		return out.String()
	}
	flagLine := regexp.MustCompile(`(?m)^\s+-([a-z][a-z0-9-]*)`)
	names := func(text string) []string {
		var out []string
		for _, m := range flagLine.FindAllStringSubmatch(text, -1) {
			out = append(out, m[1])
		}
		return out
	}
	top := help()
	g := strings.Index(top, "Global flags")
	if g < 0 {
		t.Fatalf("collabctl -h lists no global flags:\n%s", top)
	}
	global = names(top[g:])
	all = slices.Clone(global)
	// The commands are the lines of two spaces and lower-case words under "Commands:".
	commands := regexp.MustCompile(`(?m)^  ([a-z]+(?: [a-z]+)*)(?: |$)`)
	n := 0
	for _, m := range commands.FindAllStringSubmatch(top[:g], -1) {
		n++
		all = append(all, names(help(strings.Fields(m[1])...))...)
	}
	if n < 5 || !slices.Contains(global, "grpc-addr") || !slices.Contains(all, "metrics-url") {
		t.Fatalf("collabctl's help no longer reads as expected: %d commands, flags %v", n, all)
	}
	return global, all
}

// seriesNamedInCode returns every string literal "collab_..." of the server's non-test Go
// files: the names of the series it registers (and of its databases).
func seriesNamedInCode(t *testing.T) map[string]bool {
	t.Helper()
	lit := regexp.MustCompile(`"(collab_[a-z0-9_]+)"`)
	out := map[string]bool{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != ".." || d.Name() == "proto" || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range lit.FindAllSubmatch(src, -1) {
			out[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A reference to a section of a document (the document's name, a comma and the heading in
// double quotes, in comments, configuration files and the documents themselves) names a heading that document has: a renamed or removed
// section otherwise sends the reader nowhere.
// TestCodeCitesOnlyItsDocs holds the rule that code stands on its own: a comment cites
// docs/*.md, never the contract's files outside the repository (the spec's numbered sections,
// its reference and design notes), which a reader of the code does not have. This file holds
// the examples the pattern must match, so it is not read.
func TestCodeCitesOnlyItsDocs(t *testing.T) {
	outside := regexp.MustCompile(`spec (section|sections)? ?[0-9]|\b(REFERENCE|DESIGN)\b|admin-api\.md`)
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != ".." || d.Name() == "node_modules" || d.Name() == "testdata" || d.Name() == "proto") {
			return filepath.SkipDir
		}
		if d.IsDir() || filepath.Ext(path) != ".go" || d.Name() == "operations_doc_test.go" {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(src), "\n") {
			if _, comment, ok := strings.Cut(line, "//"); ok && outside.MatchString(comment) {
				t.Errorf("%s:%d cites a file outside the repository; cite docs/*.md: %s", path, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !outside.MatchString("// Header names (spec section 5).") || !outside.MatchString(`// (DESIGN "Events")`) {
		t.Fatal("the pattern no longer matches what it refuses")
	}
}

func TestDocSectionReferencesExist(t *testing.T) {
	ref := regexp.MustCompile("([A-Za-z-]+\\.md)[`)]?, \"([^\"]+)\"")
	headings := map[string][]string{}
	heading := func(doc string) []string {
		if h, ok := headings[doc]; ok {
			return h
		}
		path := filepath.Join("..", "docs", doc)
		if doc == "README.md" {
			path = filepath.Join("..", doc)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			headings[doc] = nil
			return nil
		}
		var h []string
		for _, m := range regexp.MustCompile(`(?m)^#+ (.+)$`).FindAllStringSubmatch(string(b), -1) {
			h = append(h, m[1])
		}
		headings[doc] = h
		return h
	}
	n := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != ".." || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		switch filepath.Ext(path) {
		case ".go", ".md", ".yml", ".yaml":
		default:
			return nil
		}
		if d.IsDir() {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range ref.FindAllStringSubmatch(string(src), -1) {
			n++
			section := strings.Join(strings.Fields(m[2]), " ") // wrapped over lines
			// A heading may say more than the reference ("Store wrappers (issue 13)").
			if !slices.ContainsFunc(heading(m[1]), func(h string) bool { return strings.HasPrefix(h, section) }) {
				t.Errorf("%s refers to %s, %q: no such section", path, m[1], section)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 5 {
		t.Fatalf("only %d section references found: the pattern no longer matches", n)
	}
}
