package services

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/collab/collab/internal/service"
)

const module = "github.com/collab/collab/"

// Imports point down (docs/architecture.md): platform packages under internal/ know no service,
// no gateway and no process assembly; a service knows no other service's package (it calls
// them over gRPC); the gateway knows no service; the process runtime (collabd) knows no service
// either: only this list does; nothing but tests, bench programs, test support itself and the
// generators scripts/generate runs (a package named gen: console/bundle/gen installs the
// bundle's locked npm packages with nodeproject) imports test support (internal/testkit).
// Test files may import upwards (a test drives the real thing).
func TestImportsPointDown(t *testing.T) {
	forbidden := func(pkg, imp string) string {
		testSupport := pkg == "bench" || strings.HasPrefix(pkg, "bench/") || strings.HasPrefix(pkg, "e2e") ||
			strings.HasPrefix(pkg, "internal/testkit/") || path.Base(pkg) == "gen"
		if strings.HasPrefix(imp, "internal/testkit/") && !testSupport {
			return "the server does not import test support (internal/testkit): only tests, test support, bench programs and generators do"
		}
		switch {
		case strings.HasPrefix(pkg, "internal/"):
			for _, up := range []string{"collabd", "gateway", "services", "cmd", "bench", "e2e"} {
				if imp == up || strings.HasPrefix(imp, up+"/") {
					return "platform packages under internal/ import no " + up
				}
			}
		case strings.HasPrefix(pkg, "services/"):
			own := strings.SplitN(pkg, "/", 3)[1]
			if strings.HasPrefix(imp, "services/") && strings.SplitN(imp, "/", 3)[1] != own || imp == "services" {
				return "a service calls other services over gRPC, never through their package"
			}
			if imp == "gateway" || strings.HasPrefix(imp, "gateway/") || imp == "collabd" {
				return "a service does not know the gateway or the process runtime"
			}
		case pkg == "gateway" || strings.HasPrefix(pkg, "gateway/"), pkg == "collabd":
			if imp == "services" || strings.HasPrefix(imp, "services/") || (pkg != "collabd" && imp == "collabd") {
				return "only the composition root (cmd, tests) knows the list of services"
			}
		}
		return ""
	}
	checked := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "proto", "tools", "testdata", "node_modules", ".bin":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel("..", filepath.Dir(path))
		pkg := filepath.ToSlash(rel)
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, spec := range f.Imports {
			imp, _ := strconv.Unquote(spec.Path.Value)
			if !strings.HasPrefix(imp, module) {
				continue
			}
			imp = strings.TrimPrefix(imp, module)
			checked++
			if why := forbidden(pkg, imp); why != "" {
				t.Errorf("%s imports %s: %s", path, imp, why)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("only %d imports checked: the walk missed the sources", checked)
	}
}

// A function's doc comment opens with its name and a sentence saying what it does
// (docs/architecture.md): a comment that opens otherwise is usually one left above the wrong
// function, or a note where the summary should be. Generated code is not read.
func TestDocCommentsOpenWithTheirName(t *testing.T) {
	checked := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "proto", "tools", "testdata", "node_modules", ".bin":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.HasSuffix(path, "store_observed.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Doc == nil {
				continue
			}
			checked++
			text, name := fd.Doc.Text(), fd.Name.Name
			if !strings.HasPrefix(text, name+" ") && !strings.HasPrefix(text, name+"'") && !strings.HasPrefix(text, name+",") {
				t.Errorf("%s: the doc comment of %s opens %q, not with its name", path, name, strings.SplitN(text, "\n", 2)[0])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 1000 {
		t.Fatalf("only %d doc comments checked: the walk missed the sources", checked)
	}
}

// Every module is complete and its name unique; what it consumes someone publishes.
func TestModulesAreWellFormed(t *testing.T) {
	seen := map[string]bool{}
	published := map[string]bool{}
	authenticators := 0
	prefixes := map[string]string{}
	for _, m := range All() {
		for _, p := range m.Routes {
			if err := service.CheckRoutePrefix(p); err != nil {
				t.Errorf("%s: %v", m.Name, err)
			}
			if other, ok := prefixes[p]; ok {
				t.Errorf("%s and %s both declare the route %s", other, m.Name, p)
			}
			prefixes[p] = m.Name
		}
		if m.Name == "" || m.Name == "gateway" || m.Name == "all" || seen[m.Name] {
			t.Errorf("module name %q is empty, reserved or repeated", m.Name)
		}
		seen[m.Name] = true
		if m.GRPCService == "" || m.Setup == nil {
			t.Errorf("%s: no gRPC service name or no Setup", m.Name)
		}
		if m.Authenticates {
			authenticators++
		}
		for _, e := range m.Publishes {
			published[e] = true
		}
	}
	if authenticators != 1 {
		t.Errorf("%d modules authenticate, want exactly one", authenticators)
	}
	for _, m := range All() {
		for _, c := range m.Calls {
			if !seen[c] {
				t.Errorf("%s calls unknown service %s", m.Name, c)
			}
		}
		for _, e := range m.Consumes {
			found := false
			for p := range published {
				found = found || service.Overlap([]string{e}, p)
			}
			if !found {
				t.Errorf("%s consumes %s, which no module publishes", m.Name, e)
			}
		}
	}
}

// Every service with an observed store names its observer with its Module's name, written
// once: the service label of collab_store_operation_seconds and the span names then cannot
// drift from the name --services, the databases and the other series use.
func TestStoreObserversUseTheModuleName(t *testing.T) {
	n := 0
	for _, m := range All() {
		dir := filepath.Join(".", m.Name)
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		fset := token.NewFileSet()
		calls := 0
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			file, err := parser.ParseFile(fset, f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(file, func(node ast.Node) bool {
				call, ok := node.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				// env.ObserveStore(name), or storeobserve.New(name, config).
				if sel.Sel.Name != "ObserveStore" && (sel.Sel.Name != "New" || fmt.Sprint(sel.X) != "storeobserve") {
					return true
				}
				calls++
				if len(call.Args) == 0 || types.ExprString(call.Args[0]) != "Module().Name" {
					t.Errorf("%s: the store observer's name is not Module().Name", fset.Position(call.Pos()))
				}
				return true
			})
		}
		if _, err := os.Stat(filepath.Join(dir, "store_observed.go")); err == nil {
			n++
			if calls == 0 {
				t.Errorf("%s has an observed store but no ObserveStore", m.Name)
			}
		}
	}
	if n == 0 {
		t.Fatal("no service has an observed store")
	}
}
