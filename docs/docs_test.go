// Package docs holds the desk's guides. Its test keeps them true to the code: a link, an anchor,
// a make target, a route or an environment variable the guides name must exist, and every setting
// the desk reads and every event a bot hears of must be documented. It runs in `make test`.
package docs

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"net/url"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"unicode"

	"github.com/yuin/goldmark"
	mdast "github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"
	"go.yaml.in/yaml/v4"

	"github.com/handoffdesk/desk/internal/events"
)

// repo is the repository's tree, read from this package's directory.
var repo = os.DirFS("..")

// page is one Markdown file, parsed.
type page struct {
	path    string // from the repository's root
	src     []byte
	root    mdast.Node
	anchors map[string]bool
}

var markdown = goldmark.New(goldmark.WithExtensions(extension.GFM))

// pages reads README.md and docs/*.md from fsys.
func pages(t *testing.T, fsys fs.FS) []*page {
	t.Helper()
	names, err := fs.Glob(fsys, "docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []*page
	for _, name := range append([]string{"README.md"}, names...) {
		src, err := fs.ReadFile(fsys, name)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, parse(name, src))
	}
	return out
}

func parse(name string, src []byte) *page {
	p := &page{path: name, src: src, root: markdown.Parser().Parse(text.NewReader(src)), anchors: map[string]bool{}}
	seen := map[string]int{}
	walk(p.root, func(n mdast.Node) {
		switch n := n.(type) {
		case *mdast.Heading:
			// GitHub numbers a repeated heading's anchor: x, x-1, x-2.
			slug := slugOf(plain(n, src))
			if k := seen[slug]; k > 0 {
				p.anchors[slug+"-"+strconv.Itoa(k)] = true
			} else {
				p.anchors[slug] = true
			}
			seen[slug]++
		case *mdast.RawHTML, *mdast.HTMLBlock:
			for _, m := range htmlID.FindAllSubmatch(rawText(n, src), -1) {
				p.anchors[string(m[1])] = true
			}
		}
	})
	return p
}

var htmlID = regexp.MustCompile(`\s(?:id|name)="([^"]+)"`)

// slugOf is GitHub's anchor for a heading: lower case, every character but letters, digits,
// marks, '_', '-' and spaces dropped, spaces made '-'.
func slugOf(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func walk(n mdast.Node, f func(mdast.Node)) {
	_ = mdast.Walk(n, func(n mdast.Node, entering bool) (mdast.WalkStatus, error) {
		if entering {
			f(n)
		}
		return mdast.WalkContinue, nil
	})
}

// plain is the text of an inline tree, code spans' included, as a heading's anchor reads it.
func plain(n mdast.Node, src []byte) string {
	var b strings.Builder
	walk(n, func(n mdast.Node) {
		switch n := n.(type) {
		case *mdast.Text:
			b.Write(n.Segment.Value(src))
			if n.SoftLineBreak() {
				b.WriteByte(' ')
			}
		case *mdast.String:
			b.Write(n.Value)
		}
	})
	return b.String()
}

func rawText(n mdast.Node, src []byte) []byte {
	var b bytes.Buffer
	var segs *text.Segments
	switch n := n.(type) {
	case *mdast.RawHTML:
		segs = n.Segments
	case *mdast.HTMLBlock:
		segs = n.Lines()
	}
	for i := 0; i < segs.Len(); i++ {
		seg := segs.At(i)
		b.Write(seg.Value(src))
	}
	return b.Bytes()
}

// codeSpans are the texts of a page's inline code spans.
func codeSpans(p *page) []string {
	var out []string
	walk(p.root, func(n mdast.Node) {
		if c, ok := n.(*mdast.CodeSpan); ok {
			out = append(out, plain(c, p.src))
		}
	})
	return out
}

// codeLines are the lines of a page's code blocks.
func codeLines(p *page) []string {
	var out []string
	walk(p.root, func(n mdast.Node) {
		switch n.(type) {
		case *mdast.FencedCodeBlock, *mdast.CodeBlock:
			lines := n.Lines()
			for i := 0; i < lines.Len(); i++ {
				seg := lines.At(i)
				out = append(out, strings.TrimSpace(string(seg.Value(p.src))))
			}
		}
	})
	return out
}

// brokenLinks lists every relative link or image of the pages that names a file fsys lacks, or an
// anchor its page lacks.
func brokenLinks(fsys fs.FS, ps []*page) []string {
	byPath := map[string]*page{}
	for _, p := range ps {
		byPath[p.path] = p
	}
	var out []string
	for _, p := range ps {
		walk(p.root, func(n mdast.Node) {
			var dest string
			switch n := n.(type) {
			case *mdast.Link:
				dest = string(n.Destination)
			case *mdast.Image:
				dest = string(n.Destination)
			default:
				return
			}
			u, err := url.Parse(dest)
			if err != nil {
				out = append(out, fmt.Sprintf("%s: link %q: %v", p.path, dest, err))
				return
			}
			if u.Scheme != "" || u.Host != "" {
				return // another site's: not this test's to fetch
			}
			target := p
			if u.Path != "" {
				name := path.Join(path.Dir(p.path), u.Path)
				if _, err := fs.Stat(fsys, strings.TrimSuffix(name, "/")); err != nil || strings.HasPrefix(name, "../") {
					out = append(out, fmt.Sprintf("%s: link %q: no file %s", p.path, dest, name))
					return
				}
				target = byPath[name]
			}
			if u.Fragment == "" || target == nil {
				return
			}
			if !target.anchors[u.Fragment] {
				out = append(out, fmt.Sprintf("%s: link %q: %s has no heading #%s", p.path, dest, target.path, u.Fragment))
			}
		})
	}
	return out
}

func TestLinksAndAnchorsResolve(t *testing.T) {
	for _, broken := range brokenLinks(repo, pages(t, repo)) {
		t.Error(broken)
	}
}

// The checker itself: a link to a file that is not there, to a heading that is not there, and
// the forms that are fine.
func TestBrokenLinksAreFound(t *testing.T) {
	fsys := fstest.MapFS{
		"README.md": {Data: []byte("# Desk\n\n[bots](docs/bots.md#first-curl) [gone](docs/gone.md) [typo](docs/bots.md#frist-curl)\n" +
			"[self](#desk) [none](#nowhere) ![pic](docs/pic.png) [code](internal/x.go) [web](https://example.com/#x)\n")},
		"docs/bots.md":  {Data: []byte("# Bots\n\n## First `curl`!\n\n## Again\n\n## Again\n\n[twice](#again-1) [up](../README.md#desk) [out](../../x.md)\n")},
		"docs/pic.png":  {Data: []byte("png")},
		"internal/x.go": {Data: []byte("package x")},
	}
	got := brokenLinks(fsys, pages(t, fsys))
	want := []string{
		`README.md: link "docs/gone.md": no file docs/gone.md`,
		`README.md: link "docs/bots.md#frist-curl": docs/bots.md has no heading #frist-curl`,
		`README.md: link "#nowhere": README.md has no heading #nowhere`,
		`docs/bots.md: link "../../x.md": no file ../x.md`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("broken links found:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// GitHub's slugs, as its pages make them.
func TestSlugs(t *testing.T) {
	for heading, want := range map[string]string{
		"The conversation after the handoff":     "the-conversation-after-the-handoff",
		"Search: /packages":                      "search-packages",
		"Reassign: POST /handoffs/{id}/reassign": "reassign-post-handoffsidreassign",
		"Warm, cold & the ring":                  "warm-cold--the-ring",
		"SW4RM (a protocol)":                     "sw4rm-a-protocol",
		"Über_alles":                             "über_alles",
	} {
		if got := slugOf(heading); got != want {
			t.Errorf("slugOf(%q) = %q, want %q", heading, got, want)
		}
	}
}

// makeTargets are the targets the Makefile defines.
func makeTargets(t *testing.T) map[string]bool {
	t.Helper()
	src, err := fs.ReadFile(repo, "Makefile")
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*(?: [a-z][a-z0-9-]*)*):([^=]|$)`).FindAllSubmatch(src, -1) {
		for _, name := range strings.Fields(string(m[1])) {
			targets[name] = true
		}
	}
	return targets
}

var makeCall = regexp.MustCompile(`(?:^|[\s;&|(])make\s+((?:[A-Z_]+=\S*\s+)*)([a-z][a-z0-9-]*)`)

// A make target the guides name is one the Makefile has.
func TestMakeTargetsExist(t *testing.T) {
	targets := makeTargets(t)
	for _, need := range []string{"run", "test"} {
		if !targets[need] {
			t.Fatalf("the Makefile has no %q target; it has %v", need, targets)
		}
	}
	for _, p := range pages(t, repo) {
		for _, s := range append(codeSpans(p), codeLines(p)...) {
			for _, m := range makeCall.FindAllStringSubmatch(s, -1) {
				if !targets[m[2]] {
					t.Errorf("%s names `make %s`, which the Makefile lacks", p.path, m[2])
				}
			}
		}
	}
}

// route is one method and path the desk serves, as echo writes it (":id", "*").
type route struct{ method, path string }

// routes reads every route the server registers from internal/server's source: each call of
// GET, POST, PUT, PATCH, DELETE, Match, Any or StaticFS on the echo instance or a group of it, with
// a path literal or string constant, the group's prefix joined on. Routes added later are found
// with no change here.
func routes(t *testing.T) []route {
	t.Helper()
	fset := token.NewFileSet()
	names, err := fs.Glob(repo, "internal/server/*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := fs.ReadFile(repo, name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	// A path may be a string constant of the package rather than a literal.
	consts := map[string]string{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			if vs, ok := n.(*ast.ValueSpec); ok {
				for i, name := range vs.Names {
					if i < len(vs.Values) {
						if v, ok := stringLit(vs.Values[i]); ok {
							consts[name.Name] = v
						}
					}
				}
			}
			return true
		})
	}
	pathOf := func(e ast.Expr) (string, bool) {
		if id, ok := e.(*ast.Ident); ok {
			v, ok := consts[id.Name]
			return v, ok
		}
		return stringLit(e)
	}
	// Groups first: g := e.Group("/api/v1", …), nested groups joined.
	prefix := map[string]string{}
	for changed := true; changed; {
		changed = false
		for _, f := range files {
			ast.Inspect(f, func(n ast.Node) bool {
				as, ok := n.(*ast.AssignStmt)
				if !ok || len(as.Lhs) != 1 || len(as.Rhs) != 1 {
					return true
				}
				name, ok := as.Lhs[0].(*ast.Ident)
				call, isCall := as.Rhs[0].(*ast.CallExpr)
				if !ok || !isCall {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "Group" || len(call.Args) == 0 {
					return true
				}
				lit, ok := pathOf(call.Args[0])
				if !ok {
					return true
				}
				p := lit
				if recv, ok := sel.X.(*ast.Ident); ok {
					p = prefix[recv.Name] + lit
				}
				if prefix[name.Name] != p {
					prefix[name.Name] = p
					changed = true
				}
				return true
			})
		}
	}
	var out []route
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			base := ""
			if recv, ok := sel.X.(*ast.Ident); ok {
				base = prefix[recv.Name]
			}
			switch m := sel.Sel.Name; m {
			case "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS":
				if p, ok := pathOf(call.Args[0]); ok {
					out = append(out, route{m, base + p})
				}
			case "Any":
				if p, ok := pathOf(call.Args[0]); ok {
					for _, method := range []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"} {
						out = append(out, route{method, base + p})
					}
				}
			case "StaticFS", "Static":
				if p, ok := pathOf(call.Args[0]); ok {
					out = append(out, route{"GET", base + p + "/*"}, route{"HEAD", base + p + "/*"})
				}
			case "Match":
				p, ok := pathOf(call.Args[1])
				methods, isList := call.Args[0].(*ast.CompositeLit)
				if !ok || !isList {
					return true
				}
				for _, el := range methods.Elts {
					if s, ok := el.(*ast.SelectorExpr); ok && strings.HasPrefix(s.Sel.Name, "Method") {
						out = append(out, route{strings.ToUpper(strings.TrimPrefix(s.Sel.Name, "Method")), base + p})
					}
				}
			}
			return true
		})
	}
	if len(out) < 20 {
		t.Fatalf("read only %d routes from internal/server: %v", len(out), out)
	}
	return out
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// matches reports whether the documented path (with {name} parameters, and a|b for either of
// two segments) is one a route serves.
func matches(doc string, r route) bool {
	ds, rs := strings.Split(strings.Trim(doc, "/"), "/"), strings.Split(strings.Trim(r.path, "/"), "/")
	for i, d := range ds {
		if i >= len(rs) {
			return false
		}
		seg := rs[i]
		switch {
		case seg == "*":
			return true
		case strings.HasPrefix(seg, ":"):
			continue
		case strings.HasPrefix(d, "{"):
			return false // a parameter where the route has a fixed word
		case !slices.Contains(strings.Split(d, "|"), seg):
			return false
		}
	}
	return len(ds) == len(rs) || len(rs) == len(ds)+1 && rs[len(ds)] == "*"
}

var (
	methodPath = regexp.MustCompile(`^(GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS) (/\S*)$`)
	barePath   = regexp.MustCompile(`^/[a-z][\w./{}|:-]*(?:[?#]\S*)?$`)
)

// A route the guides name, `POST /handoffs/{id}/reply` or `/admin/settings`, is one the desk
// serves. A bare path is checked when its first word is one of the desk's: `/metrics` (another
// listener's) and `/usr/bin/chromium` are not the desk's routes.
func TestRoutesExist(t *testing.T) {
	rs := routes(t)
	bare := func(p string) string {
		p, _, _ = strings.Cut(p, "?")
		p, _, _ = strings.Cut(p, "#")
		return p
	}
	firstWord := func(p string) string { return strings.Split(strings.Trim(bare(p), "/"), "/")[0] }
	first := map[string]bool{}
	for _, r := range rs {
		first[firstWord(r.path)] = true
	}
	served := func(method, p string) bool {
		p = bare(p)
		for _, r := range rs {
			if (method == "" || r.method == method) && matches(p, r) {
				return true
			}
		}
		return false
	}
	for _, p := range pages(t, repo) {
		for _, s := range codeSpans(p) {
			if m := methodPath.FindStringSubmatch(s); m != nil {
				if !served(m[1], m[2]) {
					t.Errorf("%s names `%s`, a route the desk does not serve", p.path, s)
				}
			} else if barePath.MatchString(s) && first[firstWord(s)] {
				if !served("", s) {
					t.Errorf("%s names `%s`, a path the desk does not serve", p.path, s)
				}
			}
		}
	}
}

// The route reader and matcher themselves.
func TestRoutesAreRead(t *testing.T) {
	rs := routes(t)
	for _, want := range []route{{"POST", "/handoffs/:id/reply"}, {"POST", "/api/v1/handoffs"}, {"GET", "/api/v1/handoffs/:id"}, {"HEAD", "/api/openapi.yaml"}} {
		if !slices.Contains(rs, want) {
			t.Errorf("routes lack %v", want)
		}
	}
	for doc, want := range map[string]bool{
		"/handoffs/{id}/reply": true, "/handoffs/{id}/replay": false, "/approvals/{approval_id}/approve|deny": true,
		"/handoffs/{id}": true, "/handoffs/reply/{id}": false, "/static/js/desk.js": true, "/static/": true, "/api/v1/handoffs/{id}/cancel": true,
	} {
		if got := slices.ContainsFunc(rs, func(r route) bool { return matches(doc, r) }); got != want {
			t.Errorf("%s served: %v, want %v", doc, got, want)
		}
	}
}

// envNames reads the environment variables Go code under dir reads: through a function named
// getenv (run's, passed down: the desk's settings) when settingsOnly, or else through os.Getenv
// and os.LookupEnv too; a call given getenv and a name (duration(getenv, "DRAIN_PERIOD", …))
// counts as a read.
func envNames(t *testing.T, dir string, settingsOnly, tests bool) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	err := fs.WalkDir(repo, dir, func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(name, ".go") || (!tests && strings.HasSuffix(name, "_test.go")) {
			return err
		}
		src, err := fs.ReadFile(repo, name)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, src, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			reads := false
			switch fun := call.Fun.(type) {
			case *ast.Ident:
				reads = fun.Name == "getenv"
			case *ast.SelectorExpr:
				x, ok := fun.X.(*ast.Ident)
				reads = !settingsOnly && ok && x.Name == "os" && (fun.Sel.Name == "Getenv" || fun.Sel.Name == "LookupEnv")
			}
			for _, a := range call.Args {
				if id, ok := a.(*ast.Ident); ok && id.Name == "getenv" {
					reads = true
				}
			}
			if !reads {
				return true
			}
			for _, a := range call.Args {
				if s, ok := stringLit(a); ok && envName.MatchString(s) {
					names[s] = true
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

var (
	envName = regexp.MustCompile(`^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*$`)
	// A documented variable: a code span such as `DATABASE_URL` or `STRESS_LOAD=90`. A name
	// without '_' is too like other capitals (`GET`, `USD`) to be taken for one.
	envSpan = regexp.MustCompile(`^([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)(?:=\S*)?$`)
	// What the Makefile and scripts read: $${NAME…}, $(NAME), ${NAME…}, NAME ?= ….
	shellVar = regexp.MustCompile(`\$\$?\{([A-Z][A-Z0-9_]*)|\$\(([A-Z][A-Z0-9_]*)\)|(?m)^([A-Z][A-Z0-9_]*) \?=`)
)

// otherPrograms are variables the guides name that the libraries the desk links read, not its
// own code: the deliverer ignores the proxy variables, which Go's HTTP client would read, and the
// OpenTelemetry SDK reads the standard OTEL_* variables (docs/tracing.md).
func otherPrograms(name string) bool {
	return name == "HTTP_PROXY" || name == "HTTPS_PROXY" || strings.HasPrefix(name, "OTEL_")
}

// knownVariables are the variables the Go code (tests and tools included), the Makefile or a
// script reads.
func knownVariables(t *testing.T) map[string]bool {
	t.Helper()
	known := envNames(t, ".", false, true)
	scripts, err := fs.Glob(repo, "scripts/*")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range append([]string{"Makefile"}, scripts...) {
		src, err := fs.ReadFile(repo, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range shellVar.FindAllSubmatch(src, -1) {
			known[string(m[1])+string(m[2])+string(m[3])] = true
		}
	}
	return known
}

// An environment variable the guides name is one the code, the Makefile or a script reads.
func TestEnvironmentVariablesExist(t *testing.T) {
	known := knownVariables(t)
	for _, p := range pages(t, repo) {
		for _, s := range codeSpans(p) {
			if m := envSpan.FindStringSubmatch(s); m != nil && !known[m[1]] && !otherPrograms(m[1]) {
				t.Errorf("%s names `%s`, a variable nothing reads", p.path, m[1])
			}
		}
	}
}

// tableColumn is the first column's code spans of the first table under the heading in the page.
func tableColumn(t *testing.T, p *page, heading string) map[string]bool {
	t.Helper()
	col := map[string]bool{}
	under := false
	found := false
	for n := p.root.FirstChild(); n != nil; n = n.NextSibling() {
		if h, ok := n.(*mdast.Heading); ok {
			under = plain(h, p.src) == heading
		}
		table, ok := n.(*east.Table)
		if !under || !ok || found {
			continue
		}
		found = true
		for row := table.FirstChild(); row != nil; row = row.NextSibling() {
			if _, header := row.(*east.TableHeader); header {
				continue
			}
			walk(row.FirstChild(), func(n mdast.Node) {
				if c, ok := n.(*mdast.CodeSpan); ok {
					col[plain(c, p.src)] = true
				}
			})
		}
	}
	if !found {
		t.Fatalf("%s has no table under a heading %q", p.path, heading)
	}
	return col
}

func pageAt(t *testing.T, name string) *page {
	t.Helper()
	for _, p := range pages(t, repo) {
		if p.path == name {
			return p
		}
	}
	t.Fatalf("no %s", name)
	return nil
}

// Every setting the desk reads (through run's getenv, in cmd/web and the packages it hands getenv
// to) is a row of the configuration table in docs/admins.md, and every row is one something reads
// (the desk, its tests, or the Makefile: make run's DEMO_CRM).
func TestEveryVariableIsDocumented(t *testing.T) {
	read := envNames(t, "cmd/web", true, false)
	for name := range envNames(t, "internal", true, false) {
		read[name] = true
	}
	if !read["DATABASE_URL"] || !read["DRAIN_PERIOD"] {
		t.Fatalf("read %v from cmd/web: DATABASE_URL and DRAIN_PERIOD are missing", read)
	}
	table := tableColumn(t, pageAt(t, "docs/admins.md"), "Configuration")
	for name := range read {
		if !table[name] {
			t.Errorf("the desk reads %s, and docs/admins.md's configuration table does not say what it does", name)
		}
	}
	known := knownVariables(t)
	for name := range table {
		if !known[name] {
			t.Errorf("docs/admins.md's configuration table has %s, which nothing reads", name)
		}
	}
}

// Every event a bot hears of is a row of docs/bots.md's table of webhook events, and every row is
// one: the events the OpenAPI document lists and the kinds the desk tells bots of alike.
func TestEveryWebhookEventIsDocumented(t *testing.T) {
	src, err := fs.ReadFile(repo, "internal/server/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas struct {
				EventName struct {
					Enum []string `yaml:"enum"`
				} `yaml:"EventName"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(src, &doc); err != nil {
		t.Fatal(err)
	}
	told := map[string]bool{}
	for _, e := range doc.Components.Schemas.EventName.Enum {
		told[e] = true
	}
	if len(told) == 0 {
		t.Fatal("the OpenAPI document's EventName lists no event")
	}
	for _, k := range events.Kinds() {
		if k.TellsBot() {
			told[string(k)] = true
		}
	}
	table := tableColumn(t, pageAt(t, "docs/bots.md"), "Webhook events")
	for e := range told {
		if !table[e] {
			t.Errorf("bots hear of %s, and docs/bots.md's table of webhook events does not say when", e)
		}
	}
	for e := range table {
		if !told[e] {
			t.Errorf("docs/bots.md's table of webhook events has %s, which no bot is sent", e)
		}
	}
}
