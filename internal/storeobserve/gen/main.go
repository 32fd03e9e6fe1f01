// Command gen writes each service's observed store: for every package given that declares a
// Store interface, <package dir>/store_observed.go holding observeStore, which wraps a Store so
// that every method taking a context.Context first is observed (internal/storeobserve: a span
// and collab_store_operation_seconds); other methods pass through. Interfaces of the package
// whose doc comment holds the directive //storeobserve:optional are the optional interfaces
// callers type-assert stores for (webhooks.Backlogger): the wrapper implements each one its
// store implements, observed the same way, so wrapping never hides them.
//
// The outcome label comes from the sentinel errors declared beside Store (package-level
// variables of type error named Err...): ErrNotFound is not_found, the others refused.
//
// Usage (scripts/generate runs it from the repository's root):
//
//	go run ./internal/storeobserve/gen [-target dir] ./services/...
//
// The files are written under -target (default: the current directory) at the packages' paths
// relative to the current directory, so scripts/check-generated can generate into a scratch
// copy. A package without a Store interface gets no file (and loses one it had).
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"go/types"
	"log"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/tools/go/packages"
)

const (
	fileName  = "store_observed.go"
	directive = "//storeobserve:optional"
	runtime   = "github.com/collab/collab/internal/storeobserve"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("storeobserve/gen: ")
	target := flag.String("target", ".", "the directory the files are written under (a copy of the repository)")
	flag.Parse()
	if flag.NArg() == 0 {
		log.Fatal("usage: gen [-target dir] packages...")
	}
	if err := run(*target, flag.Args()); err != nil {
		log.Fatal(err)
	}
}

func run(target string, patterns []string) error {
	root, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("working directory: %w", err)
	}
	overlay, err := hideGenerated(root, patterns)
	if err != nil {
		return err
	}
	cfg := &packages.Config{
		Mode:    packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo,
		Dir:     root,
		Overlay: overlay,
	}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		return fmt.Errorf("load %s: %w", strings.Join(patterns, " "), err)
	}
	if len(pkgs) == 0 {
		return fmt.Errorf("no packages match %s", strings.Join(patterns, " "))
	}
	for _, p := range pkgs {
		if len(p.Errors) > 0 {
			return fmt.Errorf("%s: %w", p.PkgPath, p.Errors[0])
		}
		if len(p.GoFiles) == 0 {
			continue
		}
		rel, err := filepath.Rel(root, filepath.Dir(p.GoFiles[0]))
		if err != nil || strings.HasPrefix(rel, "..") {
			return fmt.Errorf("%s is outside %s", p.PkgPath, root)
		}
		out := filepath.Join(target, rel, fileName)
		src, err := generate(p)
		if err != nil {
			return fmt.Errorf("%s: %w", p.PkgPath, err)
		}
		if src == nil {
			if err := os.Remove(out); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("remove %s: %w", out, err)
			}
			continue
		}
		// Source files to commit, checked out readable by everyone: git's modes, not secrets.
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil { //nolint:gosec // G301: see above
			return fmt.Errorf("%s: %w", out, err)
		}
		if err := os.WriteFile(out, src, 0o644); err != nil { //nolint:gosec // G306: see above
			return fmt.Errorf("write %s: %w", out, err)
		}
	}
	return nil
}

// hideGenerated returns an overlay that puts, in every package of the patterns declaring a
// Store interface, a stub in place of its wrapper whose observeStore returns the store
// unchanged: the Store interface is read as it is now, not through code generated from what it
// was (which may no longer compile), while the modules calling observeStore still compile,
// including a new service's, which has no wrapper yet.
func hideGenerated(root string, patterns []string) (map[string][]byte, error) {
	pkgs, err := packages.Load(&packages.Config{Mode: packages.NeedName | packages.NeedFiles, Dir: root}, patterns...)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", strings.Join(patterns, " "), err)
	}
	overlay := map[string][]byte{}
	for _, p := range pkgs {
		if len(p.GoFiles) == 0 {
			continue
		}
		has, err := declaresStore(p.GoFiles)
		if err != nil {
			return nil, err
		}
		if has {
			stub := filepath.Join(filepath.Dir(p.GoFiles[0]), fileName)
			overlay[stub] = fmt.Appendf(nil, "package %s\n\nimport %q\n\nfunc observeStore(s Store, _ *storeobserve.Observer) Store { return s }\n", p.Name, runtime)
		}
	}
	return overlay, nil
}

// declaresStore reports whether one of the files, other than a generated wrapper, declares a
// type Store that is an interface without type parameters (what generate wraps; it refuses a
// generic one with a reason, which a stub would hide behind a compile error).
func declaresStore(files []string) (bool, error) {
	fset := token.NewFileSet()
	for _, name := range files {
		if filepath.Base(name) == fileName {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			return false, fmt.Errorf("parse %s: %w", name, err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, spec := range g.Specs {
				if ts := spec.(*ast.TypeSpec); ts.Name.Name == "Store" {
					_, isInterface := ts.Type.(*ast.InterfaceType)
					return isInterface && ts.TypeParams == nil, nil
				}
			}
		}
	}
	return false, nil
}

// iface is an interface the wrapper implements: Store, or an optional one.
type iface struct {
	name    string
	typ     *types.Interface
	methods []*types.Func
}

// generate returns the wrapper's source for the package, nil when it has no Store interface.
func generate(p *packages.Package) ([]byte, error) {
	obj, ok := p.Types.Scope().Lookup("Store").(*types.TypeName)
	if !ok {
		return nil, nil
	}
	named, ok := obj.Type().(*types.Named)
	if !ok || !types.IsInterface(named) {
		return nil, nil
	}
	if named.TypeParams().Len() > 0 {
		return nil, errors.New("Store has type parameters, which the wrapper does not handle")
	}
	store := newIface(p.Fset, p.Types, "Store", named.Underlying().(*types.Interface))
	optional, err := optionals(p)
	if err != nil {
		return nil, err
	}
	if len(optional) > 4 {
		return nil, fmt.Errorf("%d optional interfaces: the wrapper writes a type for each combination; that many needs another design", len(optional))
	}
	notFound, refused := sentinels(p, obj)

	g := &writer{pkg: p.Types, imports: map[string]string{}, names: map[string]string{}}
	g.use(runtime, "storeobserve")
	w := &wrapper{g: g, store: store, optional: optional, masks: subsets(len(optional))}
	w.writeTypes()
	classifier := "nil"
	if len(notFound)+len(refused) > 0 {
		classifier = "observedOutcome"
	}
	w.writeConstructor(classifier)
	if classifier != "nil" {
		w.writeOutcome(notFound, refused)
	}
	for _, m := range store.methods {
		g.method("*observedStore", "s.inner", m)
	}
	w.writeCombos()
	return g.file(p, obj)
}

// wrapper writes the parts of a package's wrapper in order: its types, its constructor, the
// classifier of its outcomes, then its methods and those of each combination of optional
// interfaces.
type wrapper struct {
	g        *writer
	store    *iface
	optional []*iface
	masks    []int
	observed []string // the methods observed (taking a context), each once
}

func (w *wrapper) writeTypes() {
	b := &w.g.body
	// Every observed method gets its Op once, at construction.
	seen := map[string]bool{}
	for _, it := range append([]*iface{w.store}, w.optional...) {
		for _, m := range it.methods {
			if !seen[m.Name()] && takesContext(m) {
				w.observed = append(w.observed, m.Name())
			}
			seen[m.Name()] = true
		}
	}
	fmt.Fprintf(b, "// observedStore is a Store that observes each call of a method taking a context\n")
	fmt.Fprintf(b, "// (storeobserve: a span and collab_store_operation_seconds) and passes the others through.\n")
	fmt.Fprintf(b, "type observedStore struct {\n\tinner Store\n\tops   observedOps\n}\n\n")
	fmt.Fprintf(b, "// observedOps holds the observation of each observed method.\n")
	fmt.Fprintf(b, "type observedOps struct {\n")
	for _, n := range w.observed {
		fmt.Fprintf(b, "\t%s *%s.Op\n", n, w.g.use(runtime, "storeobserve"))
	}
	fmt.Fprintf(b, "}\n\n")
}

func (w *wrapper) writeConstructor(classifier string) {
	b, g := &w.g.body, w.g
	fmt.Fprintf(b, "// observeStore returns s observed by o. When s implements optional interfaces (directive\n")
	fmt.Fprintf(b, "// %s), so does the store returned, so type assertions on it keep working.\n", directive)
	fmt.Fprintf(b, "func observeStore(s Store, o *%s.Observer) Store {\n", g.use(runtime, "storeobserve"))
	fmt.Fprintf(b, "\tw := &observedStore{inner: s, ops: observedOps{\n")
	for _, n := range w.observed {
		fmt.Fprintf(b, "\t\t%s: o.Op(%q, %s),\n", n, n, classifier)
	}
	fmt.Fprintf(b, "\t}}\n")
	for i, it := range w.optional {
		fmt.Fprintf(b, "\tx%d, ok%d := s.(%s)\n", i, i, it.name)
	}
	for _, mask := range w.masks {
		var conds, args []string
		for i := range w.optional {
			if mask&(1<<i) != 0 {
				conds = append(conds, "ok"+strconv.Itoa(i))
				args = append(args, "x"+strconv.Itoa(i))
			}
		}
		fmt.Fprintf(b, "\tif %s {\n\t\treturn &%s{w, %s}\n\t}\n", strings.Join(conds, " && "), comboName(w.optional, mask), strings.Join(args, ", "))
	}
	fmt.Fprintf(b, "\treturn w\n}\n\n")
}

func (w *wrapper) writeOutcome(notFound, refused []string) {
	b, g := &w.g.body, w.g
	fmt.Fprintf(b, "// observedOutcome tells the store's expected answers, the sentinel errors beside Store, from\n")
	fmt.Fprintf(b, "// failures.\n")
	fmt.Fprintf(b, "func observedOutcome(err error) %s.Outcome {\n\tswitch {\n", g.use(runtime, "storeobserve"))
	writeCase := func(errs []string, outcome string) {
		if len(errs) == 0 {
			return
		}
		var conds []string
		for _, e := range errs {
			conds = append(conds, fmt.Sprintf("%s.Is(err, %s)", g.use("errors", "errors"), e))
		}
		fmt.Fprintf(b, "\tcase %s:\n\t\treturn %s.%s\n", strings.Join(conds, ", "), g.use(runtime, "storeobserve"), outcome)
	}
	writeCase(notFound, "NotFound")
	writeCase(refused, "Refused")
	fmt.Fprintf(b, "\t}\n\treturn %s.Failed\n}\n\n", g.use(runtime, "storeobserve"))
}

func (w *wrapper) writeCombos() {
	b := &w.g.body
	for _, mask := range w.masks {
		name := comboName(w.optional, mask)
		var fields, list []string
		for i, it := range w.optional {
			if mask&(1<<i) != 0 {
				fields = append(fields, fmt.Sprintf("\tx%d %s\n", i, it.name))
				list = append(list, it.name)
			}
		}
		fmt.Fprintf(b, "// %s is an observed Store that also implements %s.\n", name, strings.Join(list, " and "))
		fmt.Fprintf(b, "type %s struct {\n\t*observedStore\n%s}\n\n", name, strings.Join(fields, ""))
		done := map[string]bool{}
		for _, m := range w.store.methods {
			done[m.Name()] = true
		}
		for i, it := range w.optional {
			if mask&(1<<i) == 0 {
				continue
			}
			for _, m := range it.methods {
				if done[m.Name()] {
					continue
				}
				done[m.Name()] = true
				w.g.method("*"+name, "s.x"+strconv.Itoa(i), m)
			}
		}
	}
}

func newIface(fset *token.FileSet, pkg *types.Package, name string, t *types.Interface) *iface {
	it := &iface{name: name, typ: t}
	for i := range t.NumMethods() {
		it.methods = append(it.methods, t.Method(i))
	}
	// Declaration order of the source reads better than go/types' order by name. By package,
	// file name and offset, not by token.Pos: packages.Load parses a package's files
	// concurrently, so the order of Pos across files (an interface embedding one declared in
	// another file) would change from run to run; nor by the files' full paths, which differ
	// between checkouts (a method embedded from the standard library sorts before or after
	// ours depending on where the repository is). The package's own methods come first.
	key := func(m *types.Func) (int, string, string, int) {
		pos := fset.Position(m.Pos())
		own, path := 0, ""
		if m.Pkg() != nil {
			path = m.Pkg().Path()
			if m.Pkg() != pkg {
				own = 1
			}
		}
		return own, path, filepath.Base(pos.Filename), pos.Offset
	}
	sort.SliceStable(it.methods, func(i, j int) bool {
		ao, ap, af, aoff := key(it.methods[i])
		bo, bp, bf, boff := key(it.methods[j])
		switch {
		case ao != bo:
			return ao < bo
		case ap != bp:
			return ap < bp
		case af != bf:
			return af < bf
		}
		return aoff < boff
	})
	return it
}

// optionals returns the package's interfaces marked with the directive, in source order.
func optionals(p *packages.Package) ([]*iface, error) {
	var out []*iface
	for _, f := range p.Syntax {
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, s := range gd.Specs {
				ts := s.(*ast.TypeSpec)
				doc := ts.Doc
				if doc == nil && len(gd.Specs) == 1 {
					doc = gd.Doc
				}
				if !hasDirective(doc) {
					continue
				}
				obj, ok := p.TypesInfo.Defs[ts.Name].(*types.TypeName)
				if !ok {
					return nil, fmt.Errorf("%s: %s marks %s, which is not a type", p.Fset.Position(ts.Pos()), directive, ts.Name.Name)
				}
				t, ok := obj.Type().Underlying().(*types.Interface)
				if !ok || ts.TypeParams != nil {
					return nil, fmt.Errorf("%s: %s marks %s, which is not an interface without type parameters", p.Fset.Position(ts.Pos()), directive, ts.Name.Name)
				}
				out = append(out, newIface(p.Fset, p.Types, ts.Name.Name, t))
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

func hasDirective(doc *ast.CommentGroup) bool {
	if doc == nil {
		return false
	}
	for _, c := range doc.List {
		if strings.TrimSpace(c.Text) == directive {
			return true
		}
	}
	return false
}

// sentinels returns the exported package-level error variables named Err... declared in the
// file of the Store interface: ErrNotFound apart, the others.
func sentinels(p *packages.Package, store *types.TypeName) (notFound, refused []string) {
	file := p.Fset.Position(store.Pos()).Filename
	scope := p.Types.Scope()
	for _, name := range scope.Names() {
		v, ok := scope.Lookup(name).(*types.Var)
		if !ok || !strings.HasPrefix(name, "Err") || !v.Exported() || p.Fset.Position(v.Pos()).Filename != file {
			continue
		}
		if !types.Identical(v.Type(), types.Universe.Lookup("error").Type()) {
			continue
		}
		if name == "ErrNotFound" {
			notFound = append(notFound, name)
		} else {
			refused = append(refused, name)
		}
	}
	return notFound, refused
}

// takesContext reports whether m's first parameter is a context.Context.
func takesContext(m *types.Func) bool {
	sig := m.Type().(*types.Signature)
	if sig.Params().Len() == 0 {
		return false
	}
	n, ok := sig.Params().At(0).Type().(*types.Named)
	return ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == "context" && n.Obj().Name() == "Context"
}

// subsets returns the non-empty subsets of n optional interfaces as bit masks, larger subsets
// first, so that the constructor picks the type implementing all a store has.
func subsets(n int) []int {
	var out []int
	for m := 1; m < 1<<n; m++ {
		out = append(out, m)
	}
	sort.SliceStable(out, func(i, j int) bool { return popcount(out[i]) > popcount(out[j]) })
	return out
}

func popcount(m int) int {
	n := 0
	for ; m != 0; m &= m - 1 {
		n++
	}
	return n
}

func comboName(optional []*iface, mask int) string {
	name := "observedStore"
	for i, it := range optional {
		if mask&(1<<i) != 0 {
			name += strings.ToUpper(it.name[:1]) + it.name[1:]
		}
	}
	return name
}

// writer accumulates the body and the imports it needs.
type writer struct {
	pkg     *types.Package
	body    bytes.Buffer
	imports map[string]string // path → name in the file
	names   map[string]string // name → path
}

// use returns the name under which the file refers to the package at path, whose declared
// name is name, importing it (under another name when that one is taken).
func (g *writer) use(path, name string) string {
	if n, ok := g.imports[path]; ok {
		return n
	}
	n := name
	for i := 2; g.names[n] != "" || g.pkg.Scope().Lookup(n) != nil; i++ {
		n = name + strconv.Itoa(i)
	}
	g.imports[path] = n
	g.names[n] = path
	return n
}

func (g *writer) qualifier(p *types.Package) string {
	if p == g.pkg {
		return ""
	}
	return g.use(p.Path(), p.Name())
}

func (g *writer) typeString(t types.Type) string { return types.TypeString(t, g.qualifier) }

// method writes the wrapper's method m on recv, calling inner.
func (g *writer) method(recv, inner string, m *types.Func) {
	sig := m.Type().(*types.Signature)
	b := &g.body
	// Parameter names: the interface's, unless missing, blank or taken by the body's own.
	reserved := map[string]bool{"s": true, "call": true, "err": true}
	for i := range sig.Results().Len() {
		reserved["r"+strconv.Itoa(i)] = true
	}
	var params, args []string
	used := map[string]bool{}
	for i := range sig.Params().Len() {
		v := sig.Params().At(i)
		name := v.Name()
		if name == "" || name == "_" || reserved[name] || used[name] {
			name = "p" + strconv.Itoa(i)
			for used[name] || reserved[name] {
				name += "_"
			}
		}
		used[name] = true
		typ := g.typeString(v.Type())
		arg := name
		if sig.Variadic() && i == sig.Params().Len()-1 {
			typ = "..." + g.typeString(v.Type().(*types.Slice).Elem())
			arg += "..."
		}
		params = append(params, name+" "+typ)
		args = append(args, arg)
	}
	var results, vars []string
	n := sig.Results().Len()
	errLast := n > 0 && types.Identical(sig.Results().At(n-1).Type(), types.Universe.Lookup("error").Type())
	for i := range n {
		results = append(results, g.typeString(sig.Results().At(i).Type()))
		if errLast && i == n-1 {
			vars = append(vars, "err")
		} else {
			vars = append(vars, "r"+strconv.Itoa(i))
		}
	}
	res := strings.Join(results, ", ")
	if n > 1 {
		res = "(" + res + ")"
	}
	call := fmt.Sprintf("%s.%s(%s)", inner, m.Name(), strings.Join(args, ", "))
	fmt.Fprintf(b, "func (s %s) %s(%s) %s {\n", recv, m.Name(), strings.Join(params, ", "), res)
	switch {
	case !takesContext(m) && n == 0:
		fmt.Fprintf(b, "\t%s\n", call)
	case !takesContext(m):
		fmt.Fprintf(b, "\treturn %s\n", call)
	default:
		ctx := strings.SplitN(params[0], " ", 2)[0]
		fmt.Fprintf(b, "\t%s, call := s.ops.%s.Start(%s)\n", ctx, m.Name(), ctx)
		if n == 0 {
			fmt.Fprintf(b, "\t%s\n\tcall.End(nil)\n", call)
		} else {
			fmt.Fprintf(b, "\t%s := %s\n", strings.Join(vars, ", "), call)
			end := "nil"
			if errLast {
				end = "err"
			}
			fmt.Fprintf(b, "\tcall.End(%s)\n\treturn %s\n", end, strings.Join(vars, ", "))
		}
	}
	fmt.Fprintf(b, "}\n\n")
}

// file returns the formatted file: header, package clause, imports, body.
func (g *writer) file(p *packages.Package, store *types.TypeName) ([]byte, error) {
	var out bytes.Buffer
	fmt.Fprintf(&out, "// Code generated by internal/storeobserve/gen from the Store interface in %s. DO NOT EDIT.\n\n",
		filepath.Base(p.Fset.Position(store.Pos()).Filename))
	fmt.Fprintf(&out, "package %s\n\nimport (\n", p.Name)
	paths := make([]string, 0, len(g.imports))
	for path := range g.imports {
		paths = append(paths, path)
	}
	slices.Sort(paths)
	var std, other []string
	for _, path := range paths {
		spec := strconv.Quote(path)
		// Named when the name is not the path's last element (documentsv1), as the
		// repository writes such imports.
		if name := g.imports[path]; name != path[strings.LastIndex(path, "/")+1:] {
			spec = name + " " + spec
		}
		if strings.Contains(strings.SplitN(path, "/", 2)[0], ".") {
			other = append(other, spec)
		} else {
			std = append(std, spec)
		}
	}
	for _, s := range std {
		fmt.Fprintf(&out, "\t%s\n", s)
	}
	if len(std) > 0 && len(other) > 0 {
		out.WriteString("\n")
	}
	for _, s := range other {
		fmt.Fprintf(&out, "\t%s\n", s)
	}
	out.WriteString(")\n\n")
	out.Write(g.body.Bytes())
	src, err := format.Source(out.Bytes())
	if err != nil {
		return nil, fmt.Errorf("format the wrapper: %w\n%s", err, out.Bytes())
	}
	return src, nil
}
