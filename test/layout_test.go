package test

// The module's layout (docs/ARCHITECTURE.md, "Packages"): imports run one
// way, cmd → sandbox → reaper → internal, and the process roles beneath
// sandbox/internal talk to each other only through package stage. And a
// build for another system says, once, that corral needs Linux.

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/corral-sh/corral"

// goPackage is what `go list -json` says of one package.
type goPackage struct {
	ImportPath string
	Imports    []string // direct, the package's own files
	Deps       []string // everything it builds on
}

func listPackages(t *testing.T) []goPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []goPackage
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p goPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatal("go list found no packages")
	}
	return pkgs
}

// under reports whether path is the package dir of the module or beneath it.
func under(path, dir string) bool {
	full := module + "/" + dir
	return path == full || strings.HasPrefix(path, full+"/")
}

// role is the process role of a package beneath sandbox/internal ("" for
// any other package): its first path element there.
func role(path string) string {
	rest, ok := strings.CutPrefix(path, module+"/sandbox/internal/")
	if !ok {
		return ""
	}
	r, _, _ := strings.Cut(rest, "/")
	return r
}

// shared are the packages beneath sandbox/internal that are no process
// role of their own: the protocol (stage), the run's plan as data (plan),
// and the parts a role runs (explain for the host side and the probe,
// sockcheck for the engine, egress for the host side, portwatch for
// the host side and the init). Any role may
// import them; they import no role.
var shared = map[string]bool{"stage": true, "plan": true, "explain": true, "sockcheck": true, "egress": true, "portwatch": true}

// violations lists the imports of pkgs that run against the layout.
func violations(pkgs []goPackage) []string {
	var bad []string
	for _, p := range pkgs {
		for _, dep := range p.Deps {
			switch {
			case under(p.ImportPath, "reaper") && (under(dep, "sandbox") || under(dep, "cmd")):
				bad = append(bad, p.ImportPath+" builds on "+dep+": reaper is a library beneath sandbox and cmd")
			case under(p.ImportPath, "internal") && (under(dep, "sandbox") || under(dep, "reaper") || under(dep, "cmd")):
				bad = append(bad, p.ImportPath+" builds on "+dep+": internal/ is beneath everything")
			case under(p.ImportPath, "sandbox") && under(dep, "cmd"):
				bad = append(bad, p.ImportPath+" builds on "+dep+": sandbox is beneath cmd")
			}
		}
		from := role(p.ImportPath)
		if from == "" {
			continue
		}
		for _, imp := range p.Imports {
			to := role(imp)
			switch {
			case imp == module+"/sandbox":
				bad = append(bad, p.ImportPath+" imports "+imp+": a role does not import the host side above it")
			case to == "" || to == from || (shared[to] && !shared[from]):
			case shared[from] && !shared[to]:
				bad = append(bad, p.ImportPath+" imports "+imp+": a shared package beneath sandbox/internal imports no role")
			case !shared[to]:
				bad = append(bad, p.ImportPath+" imports "+imp+": one role reaches another only through sandbox/internal/stage")
			}
		}
	}
	return bad
}

func TestImportDirection(t *testing.T) {
	t.Parallel()
	pkgs := listPackages(t)
	roles := map[string]bool{}
	for _, p := range pkgs {
		if r := role(p.ImportPath); r != "" {
			roles[r] = true
		}
	}
	if !roles["stage"] || len(roles) < 3 {
		t.Fatalf("the role packages beneath sandbox/internal are missing: %v", roles)
	}
	for _, v := range violations(pkgs) {
		t.Error(v)
	}
	// The check sees each kind of wrong turn.
	for _, tc := range []goPackage{
		{ImportPath: module + "/reaper", Deps: []string{module + "/sandbox"}},
		{ImportPath: module + "/internal/proc", Deps: []string{module + "/reaper"}},
		{ImportPath: module + "/sandbox/internal/runner", Imports: []string{module + "/sandbox/internal/supervise"}},
		{ImportPath: module + "/sandbox/internal/pidinit", Imports: []string{module + "/sandbox"}},
		{ImportPath: module + "/sandbox/internal/plan", Imports: []string{module + "/sandbox/internal/runner"}},
	} {
		if len(violations([]goPackage{tc})) != 1 {
			t.Errorf("%s → %v%v passes the check", tc.ImportPath, tc.Deps, tc.Imports)
		}
	}
	ok := goPackage{ImportPath: module + "/sandbox/internal/runner", Imports: []string{module + "/sandbox/internal/stage", module + "/reaper"}}
	if v := violations([]goPackage{ok}); len(v) != 0 {
		t.Errorf("a role importing stage and reaper is refused: %v", v)
	}
}

// corral links no HTTP or TLS stack: their package initialisers (60 more
// of them with net/http) would run at every launch, with a network option
// or without, in front of every command corral runs. The egress proxy
// parses HTTP with net/textproto for this reason, and reads its random
// credentials with getrandom(2): crypto/rand (and crypto/subtle) link the
// FIPS 140 module, a dozen more initialisers and 170 KB of binary.
func TestNoHTTPStack(t *testing.T) {
	t.Parallel()
	heavy := map[string]bool{"net/http": true, "crypto/tls": true, "crypto/x509": true, "mime": true}
	for _, p := range listPackages(t) {
		if p.ImportPath != module+"/cmd/corral" {
			continue
		}
		if len(p.Deps) == 0 {
			t.Fatal("go list gave cmd/corral no dependencies")
		}
		for _, d := range p.Deps {
			if heavy[d] || strings.HasPrefix(d, "crypto/") {
				t.Errorf("cmd/corral links %s; its initialisers would run at every launch", d)
			}
		}
		return
	}
	t.Fatal("go list did not list cmd/corral")
}

// A build for another system fails with one message: corral needs Linux.
func TestLinuxOnlyBuild(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "build", "-o", os.DevNull, "./cmd/corral")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "GOOS=darwin", "GOARCH=arm64", "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatal("GOOS=darwin go build ./cmd/corral succeeded")
	}
	var errs []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if !strings.HasPrefix(line, "#") {
			errs = append(errs, line)
		}
	}
	if len(errs) != 1 || !strings.Contains(errs[0], "corral_needs_Linux") {
		t.Errorf("want one error naming corral_needs_Linux, got:\n%s", out)
	}
}

// The run's plan is data: parsed and checked without a system call, so
// that anyone can follow it from flag to execve without reading the
// kernel's side at the same time.
func TestPlanIsData(t *testing.T) {
	t.Parallel()
	for _, p := range listPackages(t) {
		if p.ImportPath != module+"/sandbox/internal/plan" {
			continue
		}
		for _, imp := range p.Imports {
			switch imp {
			case "syscall", "golang.org/x/sys/unix", "os/exec", "os":
				t.Errorf("sandbox/internal/plan imports %s", imp)
			}
		}
		return
	}
	t.Fatal("go list found no sandbox/internal/plan")
}

// Every package of the module is named, by its path in backquotes, in
// docs/ARCHITECTURE.md: the map a newcomer reads never lags the house.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	doc, err := os.ReadFile("../docs/ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range listPackages(t) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		if rel == "" {
			continue
		}
		if !strings.Contains(string(doc), "`"+rel+"`") {
			t.Errorf("docs/ARCHITECTURE.md does not name package `%s`: say what it is and who uses it", rel)
		}
	}
}

// The libraries a program outside the module may import — reaper and
// reaper/statefile — name in their exported API (signatures, exported
// fields, the types and values of exported constants and variables) only
// their own exported types and the standard library's, never a package
// beneath an internal/ folder: no program outside this module could build
// such an argument (`go doc -all ./reaper` is what it sees).
func TestLibraryAPINamesNoInternalPackage(t *testing.T) {
	for _, dir := range []string{"reaper", "reaper/statefile"} {
		for _, bad := range internalInAPI(t, "../"+dir) {
			t.Errorf("%s: exported API names an internal package: %s", dir, bad)
		}
	}
}

// internalInAPI parses the package in dir (test files left out) and lists
// each place its exported API names an import whose path has an internal
// element.
func internalInAPI(t *testing.T, dir string) []string {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) == 0 {
		t.Fatalf("no package in %s", dir)
	}
	var bad []string
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			internal := map[string]string{} // local name → import path
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				if !slices.Contains(strings.Split(path, "/"), "internal") {
					continue
				}
				name := path[strings.LastIndex(path, "/")+1:]
				if imp.Name != nil {
					name = imp.Name.Name
				}
				internal[name] = path
			}
			var walk func(n ast.Node, what string)
			walk = func(n ast.Node, what string) {
				if n == nil || reflect.ValueOf(n).IsNil() {
					return
				}
				ast.Inspect(n, func(n ast.Node) bool {
					switch n := n.(type) {
					case *ast.StructType: // exported fields only
						for _, fld := range n.Fields.List {
							if len(fld.Names) == 0 || slices.ContainsFunc(fld.Names, (*ast.Ident).IsExported) {
								walk(fld.Type, what)
							}
						}
						return false
					case *ast.InterfaceType: // exported methods and embedded ones
						for _, m := range n.Methods.List {
							if len(m.Names) == 0 || m.Names[0].IsExported() {
								walk(m.Type, what)
							}
						}
						return false
					case *ast.SelectorExpr:
						if x, ok := n.X.(*ast.Ident); ok && internal[x.Name] != "" {
							bad = append(bad, fmt.Sprintf("%s (%s): %s.%s from %s", what, fset.Position(n.Pos()), x.Name, n.Sel.Name, internal[x.Name]))
						}
					}
					return true
				})
			}
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if !d.Name.IsExported() || (d.Recv != nil && !exportedReceiver(d.Recv)) {
						continue
					}
					walk(d.Type, "func "+d.Name.Name)
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							// An alias (type SetupError = setuperr.SetupError)
							// is the package's own name for the type: a
							// program outside names, builds and matches it
							// through that name, so it is no closed door.
							if s.Name.IsExported() && !s.Assign.IsValid() {
								walk(s.TypeParams, "type "+s.Name.Name)
								walk(s.Type, "type "+s.Name.Name)
							}
						case *ast.ValueSpec:
							if !slices.ContainsFunc(s.Names, (*ast.Ident).IsExported) {
								continue
							}
							walk(s.Type, s.Names[0].Name)
							for _, v := range s.Values { // go doc prints them
								walk(v, s.Names[0].Name)
							}
						}
					}
				}
			}
		}
	}
	return bad
}

// exportedReceiver reports whether a method's receiver is an exported type.
func exportedReceiver(recv *ast.FieldList) bool {
	typ := recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	switch x := typ.(type) {
	case *ast.IndexExpr:
		typ = x.X
	case *ast.IndexListExpr:
		typ = x.X
	}
	id, ok := typ.(*ast.Ident)
	return ok && id.IsExported()
}
