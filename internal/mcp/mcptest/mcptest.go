// Package mcptest calls the desk's /mcp the way bots built on TypeScript do, with code that is not
// the desk's: npm's @modelcontextprotocol/sdk client (pinned in package.json), run by node. A
// missing node or library fails the test: `npm install` at the repository's root.
package mcptest

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// LibraryVersion is the version of npm's @modelcontextprotocol/sdk that package.json pins.
const LibraryVersion = "1.32.2"

// Call is one tool call.
type Call struct {
	Name      string `json:"name"`
	Arguments any    `json:"arguments"`
}

// Result is a tool's result as the TypeScript client read it.
type Result struct {
	IsError           bool           `json:"isError"`
	StructuredContent map[string]any `json:"structuredContent"`
	Text              string         `json:"text"`
}

// Session is what the TypeScript client saw: the server's name and instructions, the tools
// listed, and each call's result in order.
type Session struct {
	Server       string `json:"server"`
	Instructions string `json:"instructions"`
	Tools        []struct {
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"inputSchema"`
	} `json:"tools"`
	Results []Result `json:"results"`
}

// Run connects the TypeScript client to the MCP endpoint url as the bot holding key, lists the
// tools and makes the calls.
func Run(t testing.TB, url, key string, calls []Call) Session {
	t.Helper()
	in, err := json.Marshal(map[string]any{"url": url, "key": key, "calls": calls})
	if err != nil {
		t.Fatal(err)
	}
	_, here, _, _ := runtime.Caller(0)
	cmd := exec.CommandContext(t.Context(), "node", filepath.Join(filepath.Dir(here), "client.mjs")) //nolint:gosec // G204: node and this package's own script.
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node with npm's @modelcontextprotocol/sdk (run `npm install` at the repository's root): %v\n%s", err, stderr.String())
	}
	var got struct {
		Session
		Version string `json:"version"`
	}
	if err := json.Unmarshal(out, &got); err != nil || len(got.Results) != len(calls) {
		t.Fatalf("the client answered %q (%v), want %d results", out, err, len(calls))
	}
	if got.Version != LibraryVersion {
		t.Fatalf("npm's @modelcontextprotocol/sdk is %s here, want %s as package.json pins: run `npm install`", got.Version, LibraryVersion)
	}
	return got.Session
}
