package acctest

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestMakefileSelection: the GNUmakefile's lists of tests agree with the
// code, so that make testacc runs every test in the right pass:
//   - TESTACC_DISRUPTIVE names exactly the tests that reach
//     acctest.Disruptive, and TESTACC_PROCESSWIDE those that reach
//     acctest.ProcessWide (the parallel pass skips both);
//   - TESTACC_NEXT_RUN, the second Terraform's pass, matches every test that
//     needs Terraform 1.12 or later (a tfversion check or terraformAtLeast
//     with a newer version), which the first pass, on 1.11, skips;
//   - TESTACC_NEXT_ALL and TESTACC_TOFU_ALL, make test-clis' passes, match
//     every test that TESTACC_NEXT_RUN and TESTACC_TOFU_RUN match;
//   - TESTACC_LATE, run beside the disruptive tests, names tests that reach
//     no cluster;
//   - TESTACC_FIRST_DISRUPTIVE and TESTACC_SECOND_DISRUPTIVE, which phase
//     2 runs beside each other, name disruptive tests that disrupt only the
//     first cluster's node (stop its kubelet or fill it), and only the
//     second cluster (stop its kubelet): neither restarts an API server;
//   - TESTACC_SECOND_ALONE, which phase 1 runs after TESTACC_EARLY, names
//     disruptive tests that disrupt and use the second cluster alone; no
//     other disruptive test disrupts the second cluster, and every test that
//     uses it takes the Cluster API lock;
//   - TESTACC_EARLY, started first, names exactly the provider's tests that
//     take the Cluster API lock, but for disruptive and process-wide ones;
//     TESTACC_LONGEST, started with them, names provider tests of phase 1
//     that take no lock;
//   - every name or alternative in those lists matches a test.
//
// A test reaches a marker when its body, or a function, method or
// package-level variable of its package that it names (transitively), holds
// it.
func TestMakefileSelection(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	vars := makeVars(t, filepath.Join(root, "GNUmakefile"))
	tests := scanTests(t, filepath.Join(root, "internal"))
	if len(tests) < 100 {
		t.Fatalf("found only %d tests under internal/: the scan is broken", len(tests))
	}

	for _, list := range []struct{ name, marker string }{
		{"TESTACC_DISRUPTIVE", markDisruptive},
		{"TESTACC_PROCESSWIDE", markProcessWide},
	} {
		re := regexp.MustCompile(vars[list.name])
		for _, ts := range tests {
			if ts.marks[list.marker] && !re.MatchString(ts.name) {
				t.Errorf("%s (%s) calls acctest.%s but is not in %s", ts.name, ts.pkg, list.marker, list.name)
			}
			if !ts.marks[list.marker] && re.MatchString(ts.name) {
				t.Errorf("%s (%s) is in %s but does not call acctest.%s", ts.name, ts.pkg, list.name, list.marker)
			}
		}
		for _, alt := range alternatives(vars[list.name]) {
			if !slices.ContainsFunc(tests, func(ts testFunc) bool { return ts.name == alt }) {
				t.Errorf("%s names %s, which is no test", list.name, alt)
			}
		}
	}

	// TESTACC_LATE's tests run while the disruptive ones restart the API
	// server and stop the kubelet: none may reach the cluster.
	late := regexp.MustCompile(vars["TESTACC_LATE"])
	for _, ts := range tests {
		if late.MatchString(ts.name) && ts.marks[markCluster] {
			t.Errorf("%s (%s) is in TESTACC_LATE but reaches the cluster (acctest's clients, a test environment or resource.Test)", ts.name, ts.pkg)
		}
	}
	for _, alt := range alternatives(vars["TESTACC_LATE"]) {
		if !slices.ContainsFunc(tests, func(ts testFunc) bool { return ts.name == alt }) {
			t.Errorf("TESTACC_LATE names %s, which is no test", alt)
		}
	}

	// Phase 2's two streams, the first cluster's node tests beside the
	// second's, and phase 1's tests of the second cluster alone. Each test
	// names its faults and its cluster in its own body, so its body says
	// which (what it reaches through same-named helpers would say every
	// fault).
	disruptive := regexp.MustCompile(vars["TESTACC_DISRUPTIVE"])
	first, second := []string{markKubelet, markFillsNode}, []string{markSecondKubelet, markSecondAPIServer}
	listed := map[string]bool{}
	for _, stream := range []struct {
		name   string
		stops  []string // one of them
		spares []string // none of them
		alone  bool     // the second cluster alone: its environment, not the first's
	}{
		{"TESTACC_FIRST_DISRUPTIVE", first, slices.Concat(second, []string{markAPIServerRestart}), false},
		{"TESTACC_SECOND_DISRUPTIVE", []string{markSecondKubelet}, slices.Concat(first, []string{markAPIServerRestart, markSecondAPIServer}), false},
		{"TESTACC_SECOND_ALONE", second, slices.Concat(first, []string{markAPIServerRestart}), true},
	} {
		re := regexp.MustCompile(vars[stream.name])
		for _, alt := range alternatives(vars[stream.name]) {
			if !slices.ContainsFunc(tests, func(ts testFunc) bool { return ts.name == alt }) {
				t.Errorf("%s names %s, which is no test", stream.name, alt)
			}
		}
		for _, ts := range tests {
			if !re.MatchString(ts.name) {
				continue
			}
			listed[ts.pkg+"."+ts.name] = true
			if !disruptive.MatchString(ts.name) {
				t.Errorf("%s (%s) is in %s but not in TESTACC_DISRUPTIVE", ts.name, ts.pkg, stream.name)
			}
			own := func(m string) bool { return ts.own[m] }
			stops, other := slices.ContainsFunc(stream.stops, own), slices.ContainsFunc(stream.spares, own)
			if !stops || other {
				t.Errorf("%s (%s) is in %s, so it must disrupt only that cluster (its body: %s %v, %s %v)",
					ts.name, ts.pkg, stream.name, strings.Join(stream.stops, " or "), stops, strings.Join(stream.spares, " or "), other)
			}
			if stream.alone && (!ts.own[markSecondEnv] || ts.own[markFirstEnv]) {
				t.Errorf("%s (%s) is in %s, so its body must start the second cluster's environment (%v) and not the first's (%v)",
					ts.name, ts.pkg, stream.name, ts.own[markSecondEnv], ts.own[markFirstEnv])
			}
		}
	}
	for _, ts := range tests {
		if disruptive.MatchString(ts.name) && !listed[ts.pkg+"."+ts.name] && slices.ContainsFunc(second, func(m string) bool { return ts.own[m] }) {
			t.Errorf("%s (%s) disrupts the second cluster: list it in TESTACC_SECOND_DISRUPTIVE or TESTACC_SECOND_ALONE", ts.name, ts.pkg)
		}
		// TESTACC_SECOND_ALONE's tests run in phase 1: the others of the
		// second cluster take turns with them on the Cluster API lock.
		if ts.marks[markSecondCluster] && !ts.marks[markClusterAPILock] {
			t.Errorf("%s (%s) uses the second cluster but never takes the Cluster API lock: the soak, which restarts it, runs in the same phase", ts.name, ts.pkg)
		}
	}

	// TESTACC_EARLY, which phase 1 starts first in a process of its own:
	// exactly the provider's tests that take the Cluster API lock, but for
	// the disruptive ones (phase 2's) and the process-wide ones (their own).
	early := regexp.MustCompile(vars["TESTACC_EARLY"])
	for _, ts := range tests {
		want := ts.pkg == "provider" && ts.marks[markClusterAPILock] && !ts.marks[markDisruptive] && !ts.marks[markProcessWide]
		if in := early.MatchString(ts.name); want != in {
			t.Errorf("%s (%s): in TESTACC_EARLY %v, but a provider test of phase 1 that takes the Cluster API lock %v "+
				"(the lock %v, Disruptive %v, ProcessWide %v)", ts.name, ts.pkg, in, want,
				ts.marks[markClusterAPILock], ts.marks[markDisruptive], ts.marks[markProcessWide])
		}
	}
	for _, alt := range alternatives(vars["TESTACC_EARLY"]) {
		if !slices.ContainsFunc(tests, func(ts testFunc) bool { return ts.name == alt }) {
			t.Errorf("TESTACC_EARLY names %s, which is no test", alt)
		}
	}
	// TESTACC_LONGEST, which the same process runs: provider tests that
	// phase 1 would run anyway, none of them the lock's.
	for _, alt := range alternatives(vars["TESTACC_LONGEST"]) {
		i := slices.IndexFunc(tests, func(ts testFunc) bool { return ts.pkg == "provider" && ts.name == alt })
		if i < 0 {
			t.Errorf("TESTACC_LONGEST names %s, which is no test of internal/provider", alt)
			continue
		}
		if ts := tests[i]; ts.marks[markClusterAPILock] || ts.marks[markDisruptive] || ts.marks[markProcessWide] {
			t.Errorf("TESTACC_LONGEST names %s, which is not a parallel test of phase 1 (the Cluster API lock %v, Disruptive %v, ProcessWide %v)",
				alt, ts.marks[markClusterAPILock], ts.marks[markDisruptive], ts.marks[markProcessWide])
		}
	}

	next := regexp.MustCompile(vars["TESTACC_NEXT_RUN"])
	newer := 0
	for _, ts := range tests {
		if ts.marks[markNewer] {
			newer++
			if !next.MatchString(ts.name) {
				t.Errorf("%s (%s) needs Terraform 1.12 or later, so the first pass skips it, but TESTACC_NEXT_RUN does not match it", ts.name, ts.pkg)
			}
		}
	}
	if newer == 0 {
		t.Error("no test needs Terraform 1.12 or later: the scan is broken")
	}
	// make test-matrix: each family the matrix promises (runs, container
	// groups, node labels, phases, credentials) has tests that it runs.
	matrix := regexp.MustCompile(vars["TESTACC_MATRIX_RUN"])
	for _, family := range []string{"TestAccRun_", "TestAccContainerGroup_", "TestAccNodeLabel_", "TestAccPhase_", "TestAccCredential_"} {
		if !slices.ContainsFunc(tests, func(ts testFunc) bool {
			return ts.pkg == "provider" && strings.HasPrefix(ts.name, family) && matrix.MatchString(ts.name)
		}) {
			t.Errorf("TESTACC_MATRIX_RUN runs no %s* test of internal/provider", family)
		}
	}
	for lean, all := range map[string]string{"TESTACC_NEXT_RUN": "TESTACC_NEXT_ALL", "TESTACC_TOFU_RUN": "TESTACC_TOFU_ALL"} {
		leanRe, allRe := regexp.MustCompile(vars[lean]), regexp.MustCompile(vars[all])
		for _, ts := range tests {
			if leanRe.MatchString(ts.name) && !allRe.MatchString(ts.name) {
				t.Errorf("%s matches %s (%s), which %s (make test-clis) does not", lean, ts.name, ts.pkg, all)
			}
		}
	}
	for _, name := range []string{"TESTACC_NEXT_RUN", "TESTACC_TOFU_RUN", "TESTACC_NEXT_ALL", "TESTACC_TOFU_ALL"} {
		for _, alt := range alternatives(vars[name]) {
			re := regexp.MustCompile(alt)
			if !slices.ContainsFunc(tests, func(ts testFunc) bool { return ts.pkg == "provider" && re.MatchString(ts.name) }) {
				t.Errorf("%s's %q matches no test of internal/provider", name, alt)
			}
		}
	}
}

const (
	markDisruptive  = "Disruptive"
	markProcessWide = "ProcessWide"
	markNewer       = "newer"
	markCluster     = "cluster"
	// The local clusters' faults: the first's kubelet stopped, the second's,
	// the first's API server restarted, the second's, the first's node filled.
	markKubelet          = "kubelet"
	markSecondKubelet    = "second kubelet"
	markAPIServerRestart = "restart"
	markSecondAPIServer  = "second API server restart"
	markFillsNode        = "fills the node"
	// Which cluster a test's environment is on.
	markFirstEnv  = "first cluster's environment"
	markSecondEnv = "second cluster's environment"
	// What uses the second cluster, and the lock of the tests that
	// TESTACC_EARLY starts first, which its users take.
	markSecondCluster  = "second cluster"
	markClusterAPILock = "Cluster API lock"
)

var markers = map[string]*regexp.Regexp{
	markDisruptive:    regexp.MustCompile(`\bacctest\.Disruptive\(`),
	markProcessWide:   regexp.MustCompile(`\bacctest\.ProcessWide\(`),
	markCluster:       regexp.MustCompile(`\bacctest\.(Clients|Kube|RESTConfig|Kubeconfig|Namespace|Parallel)\(|\bnewTestEnv\(|\bresource\.(Test|ParallelTest)\(`),
	markKubelet:       regexp.MustCompile(`kubelet\.sh"`),
	markSecondKubelet: regexp.MustCompile(`\bacctest\.(Stop|Restart)SecondKubelet\b`),
	// restart.sh, or a Disruptive reason that names the API server (the
	// second cluster's tests name their faults by acctest's functions, and
	// their reasons say "the second cluster's control plane").
	markAPIServerRestart: regexp.MustCompile(`restart\.sh"|Disruptive\w*\(t, "[^"]*API server`),
	markSecondAPIServer:  regexp.MustCompile(`\bacctest\.RestartSecondAPIServer\b`),
	// A Disruptive reason that says the test fills the node.
	markFillsNode: regexp.MustCompile(`Disruptive\w*\(t, "[^"]*fills the node`),
	markFirstEnv:  regexp.MustCompile(`\bacctest\.(Clients|Kube|RESTConfig|Kubeconfig|Namespace|Parallel)\(|\bnew(Test|DisruptiveTest|ProcessWideTest|Serial)?Env\(`),
	markSecondEnv: regexp.MustCompile(`\bnewSecondDisruptiveEnv\(`),
	// Called, or passed as a function (newSerialEnvOn's kubeconfig).
	markSecondCluster:  regexp.MustCompile(`\bacctest\.(Local)?SecondKubeconfig\b`),
	markClusterAPILock: regexp.MustCompile(`\bacctest\.Exclusive\(t, acctest\.ClusterAPILock\)`),
	markNewer:          regexp.MustCompile(`\btfversion\.Version1_(1[2-9]|[2-9][0-9])_|\bterraformAtLeast\([^,]+,\s*(1[2-9]|[2-9][0-9])\)`),
}

type testFunc struct {
	pkg, name string
	// marks are the markers the test reaches; own, those of its body.
	marks, own map[string]bool
}

// scanTests parses every package's _test.go files under dir and returns its
// Test functions with the markers each reaches.
func scanTests(t *testing.T, dir string) []testFunc {
	t.Helper()
	byPkg := map[string][]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, "_test.go") {
			byPkg[filepath.Dir(p)] = append(byPkg[filepath.Dir(p)], p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []testFunc
	for pkgDir, files := range byPkg {
		out = append(out, scanPackage(t, filepath.Base(pkgDir), files)...)
	}
	return out
}

func scanPackage(t *testing.T, pkg string, files []string) []testFunc {
	t.Helper()
	fset := token.NewFileSet()
	// A node is a function, a method or a package-level variable: its
	// markers and the names it refers to.
	type node struct {
		marks map[string]bool
		refs  map[string]bool
	}
	nodes := map[string][]*node{}
	var tests []string
	add := func(name string, src []byte, n ast.Node) {
		nd := &node{marks: map[string]bool{}, refs: map[string]bool{}}
		text := string(src[fset.Position(n.Pos()).Offset:fset.Position(n.End()).Offset])
		for m, re := range markers {
			nd.marks[m] = re.MatchString(text)
		}
		ast.Inspect(n, func(x ast.Node) bool {
			switch x := x.(type) {
			case *ast.Ident:
				nd.refs[x.Name] = true
			case *ast.SelectorExpr:
				nd.refs[x.Sel.Name] = true
			}
			return true
		})
		nodes[name] = append(nodes[name], nd)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		file, err := parser.ParseFile(fset, f, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				add(d.Name.Name, src, d)
				if d.Recv == nil && strings.HasPrefix(d.Name.Name, "Test") && d.Name.Name != "TestMain" {
					tests = append(tests, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if vs, ok := s.(*ast.ValueSpec); ok {
						for _, n := range vs.Names {
							add(n.Name, src, vs)
						}
					}
				}
			}
		}
	}
	reach := func(start string) map[string]bool {
		marks := map[string]bool{}
		seen := map[string]bool{start: true}
		queue := []string{start}
		for len(queue) > 0 {
			name := queue[0]
			queue = queue[1:]
			for _, nd := range nodes[name] {
				for m, on := range nd.marks {
					marks[m] = marks[m] || on
				}
				for r := range nd.refs {
					if !seen[r] && nodes[r] != nil {
						seen[r] = true
						queue = append(queue, r)
					}
				}
			}
		}
		return marks
	}
	out := make([]testFunc, 0, len(tests))
	for _, name := range tests {
		out = append(out, testFunc{pkg: pkg, name: name, marks: reach(name), own: nodes[name][0].marks})
	}
	return out
}

// makeVars reads the TESTACC_ variables of a GNUmakefile, with make's $$
// turned into $.
func makeVars(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	vars := map[string]string{}
	def := regexp.MustCompile(`^(TESTACC_[A-Z_]+)\s*[?:]?=\s*(.*)$`)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := def.FindStringSubmatch(sc.Text()); m != nil {
			vars[m[1]] = strings.ReplaceAll(m[2], "$$", "$")
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"TESTACC_DISRUPTIVE", "TESTACC_FIRST_DISRUPTIVE", "TESTACC_SECOND_DISRUPTIVE", "TESTACC_SECOND_ALONE", "TESTACC_PROCESSWIDE", "TESTACC_EARLY", "TESTACC_LONGEST", "TESTACC_NEXT_RUN", "TESTACC_TOFU_RUN", "TESTACC_NEXT_ALL", "TESTACC_TOFU_ALL", "TESTACC_MATRIX_RUN"} {
		if vars[name] == "" {
			t.Fatalf("the GNUmakefile sets no %s", name)
		}
	}
	return vars
}

// alternatives splits a -run pattern of the form ^(A|B|C)$ or A|B|C into
// its alternatives, without anchors.
func alternatives(pattern string) []string {
	p := strings.TrimSuffix(strings.TrimPrefix(pattern, "^("), ")$")
	var alts []string
	depth, start := 0, 0
	for i, c := range p {
		switch c {
		case '(':
			depth++
		case ')':
			depth--
		case '|':
			if depth == 0 {
				alts = append(alts, p[start:i])
				start = i + 1
			}
		}
	}
	return append(alts, p[start:])
}
