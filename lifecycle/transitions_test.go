package lifecycle_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/lifecycle"
)

// TestTransitionsAreDaoStatementsTheDocNames: every transition's statement is a method of
// dao, and the package doc names it.
func TestTransitionsAreDaoStatementsTheDocNames(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	q, db := reflect.TypeOf(&dao.Queries{}), reflect.TypeOf(&dao.DB{})
	for _, tr := range lifecycle.Transitions {
		_, onQ := q.MethodByName(tr.Statement)
		_, onDB := db.MethodByName(tr.Statement)
		if !onQ && !onDB {
			t.Errorf("%s: no dao method %s", tr.Name, tr.Statement)
		}
		if !regexp.MustCompile(`\b` + tr.Statement + `\b`).Match(doc) {
			t.Errorf("%s: doc.go does not name %s", tr.Name, tr.Statement)
		}
	}
}

// stateWrites are SQL writes of an instance's state, which only dao may hold.
var stateWrites = regexp.MustCompile(`(?i)(UPDATE|INSERT\s+INTO|DELETE\s+FROM)\s+(task_instance|workflow_instance)\b`)

// TestOnlyLifecycleChangesState: outside dao and this package, no code calls a transition's
// statement or writes an instance's state in SQL of its own; dao's machinery (its internal
// packages) holds no such SQL either. Tests, and daotest, may set up what they need.
func TestOnlyLifecycleChangesState(t *testing.T) {
	t.Parallel()
	statements := map[string]bool{}
	for _, tr := range lifecycle.Transitions {
		statements[tr.Statement] = true
	}
	root := ".."
	fset := token.NewFileSet()
	checked, machinery := 0, 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch {
			case path == root:
			case rel == "lifecycle", rel == filepath.Join("dao", "daotest"), rel == ".git", rel == ".run",
				rel == filepath.Join("internal", "third_party"), strings.HasPrefix(d.Name(), "."):
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || filepath.Dir(rel) == "dao" {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		checked++
		if strings.HasPrefix(rel, filepath.Join("dao", "internal")+string(filepath.Separator)) {
			machinery++
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if statements[n.Sel.Name] {
					t.Errorf("%s: calls %s; a state change goes through package lifecycle", fset.Position(n.Pos()), n.Sel.Name)
				}
			case *ast.BasicLit:
				if n.Kind == token.STRING && stateWrites.MatchString(n.Value) {
					t.Errorf("%s: writes an instance's state in SQL outside dao's statements", fset.Position(n.Pos()))
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 || machinery == 0 {
		t.Fatalf("checked %d files, %d of dao's machinery; the walk missed the tree", checked, machinery)
	}
}
