// Package codesize holds a test that keeps functions and types small: no
// function over maxFuncLines lines and no type over maxMethods methods in the
// non-test, hand-written Go of the repository (the main module, agent/ and
// api/). It reads the source with go/ast and needs no tool.
package codesize

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const (
	// maxFuncLines is the longest a function may be: from its func keyword
	// to its closing brace, both lines counted.
	maxFuncLines = 80
	// maxMethods is the most methods one type may have (value and pointer
	// receivers together).
	maxMethods = 30
)

// allowedPackages lists the packages (directories from the repository root)
// whose findings are reported but do not fail the test. None is left (issue 23
// split the last); none may be added.
var allowedPackages = map[string]string{}

// allowed lists single findings, by package directory and name (a type, a
// function, or Type.Method), that are reported but do not fail the test, each
// with the reason. An entry that matches nothing fails the test, so the list
// only shrinks.
var allowed = map[string]string{}

// skipDirs are directories no hand-written Go of ours lives in.
var skipDirs = map[string]bool{
	"api/gen":      true, // generated from api/proto
	"node_modules": true,
	"testdata":     true,
	".git":         true,
}

type finding struct {
	pkg  string // directory from the repository root
	name string // the type, function or Type.Method
	what string // e.g. "func bench.Run: 173 lines (cmd/warren/bench.go:42)"
}

func TestSizes(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	findings, err := scan(root)
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, f := range findings {
		key := f.pkg + "." + f.name
		if why, ok := allowedPackages[f.pkg]; ok {
			t.Logf("allowed (%s): %s", why, f.what)
			continue
		}
		if why, ok := allowed[key]; ok {
			used[key] = true
			t.Logf("allowed (%s): %s", why, f.what)
			continue
		}
		t.Errorf("%s", f.what)
	}
	for key := range allowed {
		if !used[key] {
			t.Errorf("allow-list entry %s matches nothing: remove it", key)
		}
	}
}

// scan parses every non-test, non-generated .go file below root and returns
// the functions and types over the limits, sorted by package and place.
func scan(root string) ([]finding, error) {
	fset := token.NewFileSet()
	// methods counts the methods of each type, by package directory and name.
	methods := map[string]map[string]int{}
	var out []finding
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if skipDirs[rel] || skipDirs[d.Name()] {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		file, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			return err
		}
		if ast.IsGenerated(file) {
			return nil
		}
		pkg := filepath.ToSlash(filepath.Dir(rel))
		for _, decl := range file.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			name := fn.Name.Name
			if recv := receiverType(fn); recv != "" {
				name = recv + "." + name
				if methods[pkg] == nil {
					methods[pkg] = map[string]int{}
				}
				methods[pkg][recv]++
			}
			start := fset.Position(fn.Pos())
			lines := fset.Position(fn.End()).Line - start.Line + 1
			if lines > maxFuncLines {
				out = append(out, finding{pkg, name, fmt.Sprintf("func %s: %d lines (%s:%d)", name, lines, rel, start.Line)})
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for pkg, types := range methods {
		for typ, n := range types {
			if n > maxMethods {
				out = append(out, finding{pkg, typ, fmt.Sprintf("type %s.%s: %d methods (%s)", filepath.Base(pkg), typ, n, pkg)})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].pkg != out[j].pkg {
			return out[i].pkg < out[j].pkg
		}
		return out[i].what < out[j].what
	})
	return out, nil
}

// receiverType is the name of fn's receiver type without pointer or type
// parameters, or "" for a plain function.
func receiverType(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return ""
	}
	t := fn.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}
