// Package cluster makes PostgreSQL clusters of a program's own: a data directory that initdb
// creates in a directory of the caller's, set to serve on a free loopback port, for the tests and
// load tools that stop, crash or kill the server, which the shared one must not suffer. How the
// server runs is the caller's: a test starts and stops it with pg_ctl, a load tool runs the
// postmaster as a child of its own, to kill -9 it.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Timeout bounds each program that Run runs, and is how long a caller gives the server to start,
// crash recovery included.
const Timeout = time.Minute

// programs are what a directory of PostgreSQL's must hold to serve here.
var programs = []string{"initdb", "pg_ctl", "postgres"}

// Cluster is one cluster's data directory and where it serves.
type Cluster struct {
	// Dir is the caller's directory: it holds the data directory, the server's log and its socket.
	Dir string
	// Port is the loopback port the server listens on.
	Port int
	// Owner runs PostgreSQL's programs when the caller runs as root, which PostgreSQL refuses: the
	// postgres user, as scripts/localdb does. Nil otherwise.
	Owner *syscall.Credential
	bin   string
}

// New creates a cluster in dir with initdb, trusting connections, that listens only on a free
// loopback port and keeps its socket in dir, with settings (PostgreSQL's names and values) in its
// postgresql.conf. It needs PostgreSQL's server programs installed.
func New(ctx context.Context, dir string, settings map[string]string) (*Cluster, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, Port: port, bin: bin}
	if os.Geteuid() == 0 {
		if c.Owner, err = postgresUser(); err != nil {
			return nil, err
		}
		if err := os.Chown(dir, int(c.Owner.Uid), int(c.Owner.Gid)); err != nil {
			return nil, err
		}
	}
	// --no-sync: a scratch cluster need not survive a power cut before its first checkpoint. The
	// server keeps fsync and synchronous_commit on unless settings say otherwise.
	if out, err := c.Run(ctx, "initdb", "--pgdata="+c.Data(), "--username=postgres", "--auth=trust", "--encoding=UTF8",
		"--no-instructions", "--no-sync"); err != nil {
		return nil, fmt.Errorf("initdb: %w: %s", err, strings.TrimSpace(string(out)))
	}
	all := map[string]string{"port": strconv.Itoa(port), "listen_addresses": "127.0.0.1", "unix_socket_directories": dir}
	maps.Copy(all, settings)
	if err := appendConf(filepath.Join(c.Data(), "postgresql.conf"), all); err != nil {
		return nil, err
	}
	return c, nil
}

// binDir finds PostgreSQL's programs: the newest /usr/lib/postgresql/*/bin (Debian keeps them off
// PATH), else where they are on PATH.
func binDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin") // the pattern is well-formed
	slices.SortFunc(dirs, func(a, b string) int { return versionOf(b) - versionOf(a) })
	if path, err := exec.LookPath("postgres"); err == nil {
		dirs = append(dirs, filepath.Dir(path))
	}
	for _, dir := range dirs {
		if hasPrograms(dir) {
			return dir, nil
		}
	}
	return "", errors.New("PostgreSQL's server programs (initdb, pg_ctl, postgres) are not installed: apt-get install postgresql")
}

func hasPrograms(dir string) bool {
	for _, p := range programs {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			return false
		}
	}
	return true
}

// versionOf reads the major version out of /usr/lib/postgresql/<version>/bin, 0 if there is none.
func versionOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir))) // not a number sorts last
	return v
}

func postgresUser() (*syscall.Credential, error) {
	owner, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, a cluster needs a postgres user to run as: %w", err)
	}
	uid, uidErr := strconv.ParseUint(owner.Uid, 10, 32)
	gid, gidErr := strconv.ParseUint(owner.Gid, 10, 32)
	if err := errors.Join(uidErr, gidErr); err != nil {
		return nil, fmt.Errorf("user postgres: %w", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// appendConf adds settings to a postgresql.conf, where the last line for a name wins. Every value
// is quoted, which PostgreSQL accepts for settings of any type.
func appendConf(path string, settings map[string]string) error {
	var conf strings.Builder
	conf.WriteString("\n# set by internal/postgres/cluster\n")
	for _, name := range slices.Sorted(maps.Keys(settings)) {
		fmt.Fprintf(&conf, "%s = '%s'\n", name, strings.ReplaceAll(settings[name], "'", "''"))
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0) //nolint:gosec // G304: the postgresql.conf initdb has just written.
	if err != nil {
		return err
	}
	_, err = f.WriteString(conf.String())
	return errors.Join(err, f.Close())
}

// FreePort is a port nothing listens on just now on the loopback interface. A server that is
// started again after a crash or a kill needs its address back, so its port is picked once rather
// than by the server at each start.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	return port, ln.Close()
}

// Data is the data directory.
func (c *Cluster) Data() string { return filepath.Join(c.Dir, "pgdata") }

// Log is where the server's output goes, whoever runs it.
func (c *Cluster) Log() string { return filepath.Join(c.Dir, "postgres.log") }

// Program is the path of one of PostgreSQL's programs.
func (c *Cluster) Program(name string) string { return filepath.Join(c.bin, name) }

// Env is the environment PostgreSQL's programs run in: the caller's PATH and a UTF-8 locale, and
// none of the caller's PG* variables, which would point them elsewhere.
func (c *Cluster) Env() []string {
	return []string{"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8"}
}

// Run runs one of PostgreSQL's programs (initdb, pg_ctl) to its end as the cluster's owner and
// returns its output, killing it past Timeout. It runs in a process group of its own, so that a
// Ctrl-C at the terminal reaches the caller alone, which stops what it started in order, and the
// kernel kills it should the caller die.
func (c *Cluster) Run(ctx context.Context, program string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.Program(program), args...) //nolint:gosec // G204: PostgreSQL's own programs, found in its install directory, with arguments the callers build.
	cmd.Env = c.Env()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: c.Owner}
	return cmd.CombinedOutput()
}

// URL is the address of database db on the cluster, as its superuser.
func (c *Cluster) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.Port, db)
}
