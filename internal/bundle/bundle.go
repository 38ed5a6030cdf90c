// Package bundle builds the tar stream a run ships into its pod over exec
// stdin: the playbook, extra files, inventory, variables, a stats callback
// and the script that runs it all. Secrets travel only inside the stream:
// never in the pod spec or in an argv.
package bundle

import (
	"archive/tar"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/projectdir"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/strictyaml"
)

//go:embed kubeplay_stats.py
var statsCallback []byte

// Fixed names inside the bundle.
const (
	ScriptName    = "kubeplay-run.sh"
	PlaybookName  = "playbook.yml"
	varsName      = "extra-vars.json"
	secretVars    = "secret-vars.json"
	secretEnvName = "secret-env"
	callbackDir   = "callback_plugins"
	statsName     = "stats.json"
	kubeconfig    = "kubeconfig"
)

// Paths in the pod, outside the bundle.
const (
	// RunDirPrefix starts the name of each run's directory: the worker
	// (podspec.WorkerArgs) ends a pod in which none appears in time.
	RunDirPrefix = "/tmp/kubeplay."
	// WorkerPIDFile holds the pid of the worker's shell, which the script
	// signals to end the pod when its client is gone. Verbatim pods have no
	// worker, and no such file.
	WorkerPIDFile = "/tmp/kubeplay-worker.pid"
	// NodeLockFile is the lock that runs on a held node take turns by.
	NodeLockFile = "/tmp/kubeplay-node.lock"
)

// nodeLockFile is NodeLockFile; unit tests point it elsewhere.
var nodeLockFile = NodeLockFile

// workerPIDFile is WorkerPIDFile; unit tests, which run the script on the
// host, point it elsewhere.
var workerPIDFile = WorkerPIDFile

// DefaultInventory runs against localhost inside the pod: Local{}'s
// Inventory.
const DefaultInventory = "localhost ansible_connection=local ansible_python_interpreter=" + DefaultPythonPath + "\n"

// reserved names the files map may not use.
var reserved = []string{ScriptName, PlaybookName, varsName, secretVars, secretEnvName, callbackDir, statsName, kubeconfig, "inventory", "inventory.yml",
	secretDir, ProjectDir, requirementsName, galaxyDir, onlyHostsName, sliceInventory, hostsDir}

// Bundle is one run's payload.
type Bundle struct {
	// Playbook is the playbook's content; empty in command mode.
	Playbook string
	// AdHoc, instead of a playbook, runs one module as the ansible
	// command does (adhoc.go).
	AdHoc *AdHoc
	// Command runs instead of ansible-playbook when set.
	Command []string
	// Files maps relative paths to content, for roles, templates and the like.
	Files map[string]string
	// Inventory content; Local's inventory (DefaultInventory) when empty.
	Inventory string
	// Local is how Ansible runs on the pod itself, from its node label: it
	// shapes the default inventory's localhost only, and is not checked or
	// used when Inventory or Inventories are set.
	Local Local
	// ExtraVars and SecretVars are JSON objects passed with -e @file.
	ExtraVars, SecretVars []byte
	// Env and SecretEnv are exported before the run; SecretEnv is deleted
	// from the pod's disk as soon as it is read.
	Env, SecretEnv map[string]string
	// Kubeconfig, when set, is written beside the playbook for the run's
	// namespace (KUBECONFIG and K8S_AUTH_KUBECONFIG point to it) and deleted
	// when the playbook ends.
	Kubeconfig []byte
	// SSH holds the run's keys and host key settings (ssh.go).
	SSH SSH
	// Vault maps vault ids to passwords (DefaultVaultID for the unlabelled
	// one), passed as --vault-id id@file with 0600 files deleted after the run.
	Vault map[string]string

	// Limit (host patterns), Tags and SkipTags are passed to --limit,
	// --tags and --skip-tags joined with commas; see ValidateListItem.
	Limit, Tags, SkipTags []string
	Verbosity, Forks      int
	Check, Diff           bool
	// CheckDiffs lets a check (Check) report its diffs' text, not only
	// their size: the run's plan_check_diffs (KUBEPLAY_CHECK_DIFFS).
	CheckDiffs bool

	// Project, when set, is shipped from disk under ProjectDir, where the
	// playbook runs; Files then go into it too (see project.go).
	Project *projectdir.Manifest
	// ProjectHash, when set, is the Hash the project must have (as planned):
	// Write ends the stream with projectdir.ErrChanged, before the script,
	// when the project it shipped hashes otherwise. With it, Project may
	// come from projectdir.List, and is read once, as it is shipped.
	ProjectHash string
	// ProjectPlaybook names the playbook in Project, instead of Playbook.
	ProjectPlaybook string
	// Inventories are project paths passed with -i, in order; they replace
	// the default inventory.
	Inventories []string
	// Requirements is a requirements.yml installed with ansible-galaxy
	// before the playbook, with the project's own requirement files.
	Requirements string

	// Marker is the separator line before the result on the script's
	// stderr (see ResultStream); a per-run nonce.
	Marker string
	// Held marks a run on a held node (kubeplay_node): runs on one pod take
	// turns (a lock on NodeLockFile), the watchdog ends an abandoned run's
	// playbook but not the pod, and the run's directory is removed when it
	// ends.
	Held bool
	// LeaseGrace is how long the run goes on in its pod without a beat
	// from the provider before the pod ends it; DefaultLeaseGrace when 0.
	LeaseGrace time.Duration
	// KeepOutput is how much of the output's tail the pod keeps once the
	// provider has read it (the run's output_limit); 64 KiB when 0.
	KeepOutput int64
	// PrivateOutput keeps the output out of the container's log (kubectl
	// logs): the run has secrets, which only the provider redacts. The log
	// then says so instead.
	PrivateOutput bool

	// Slice (from 1) of Slices: with Slices > 1 the run targets the hosts
	// at the positions p, from 0, of its sorted host list with p % Slices
	// == Slice-1, as AWX slices a job (hosts.go).
	Slice, Slices int
	// OnlyHosts, when not nil, restricts the run to those of its hosts
	// named here exactly (before slicing): a re-run of the hosts that
	// failed. An empty list runs no host.
	OnlyHosts []string
	// ExpectHostsSHA256, when set and the run lists its hosts (Slices,
	// OnlyHosts), is asked for the digest of the host list as the bundle is
	// written: a run whose own list differs ends with ExitHostsChanged
	// before its playbook. "" expects none.
	ExpectHostsSHA256 func() string
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ValidatePath checks a key of Files. A correct path names a file strictly
// inside the bundle directory: it is relative and slash-separated, written
// in clean form (path.Clean leaves it unchanged, so no "." or ".." element,
// no doubled or trailing slash), is not "." (the bundle directory itself)
// and does not start with "..", holds no NUL or backslash, and its first
// element is not one of kubeplay's own files. Bundle.Write also refuses a
// path that is another path's directory.
func ValidatePath(p string) error {
	switch {
	case p == "":
		return errors.New("the path is empty")
	case p == ".":
		return errors.New(`"." is the bundle directory itself, not a file in it`)
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("%q is absolute; use a path relative to the playbook", p)
	case path.Clean(p) != p:
		return fmt.Errorf("%q is not clean; write it as %q", p, path.Clean(p))
	case p == ".." || strings.HasPrefix(p, "../"):
		return fmt.Errorf("%q leaves the bundle", p)
	case strings.ContainsAny(p, "\x00\\"):
		return fmt.Errorf("%q contains a NUL or a backslash", p)
	}
	top := strings.SplitN(p, "/", 2)[0]
	if slices.Contains(reserved, top) {
		return fmt.Errorf("%q is reserved by kubeplay (reserved: %s)", p, strings.Join(reserved, ", "))
	}
	return nil
}

// ValidateListItem checks one element of Limit, Tags or SkipTags. Ansible
// splits the joined value on commas, so an element holding one would
// silently be two.
func ValidateListItem(s string) error {
	switch {
	case s == "":
		return errors.New("an element is empty")
	case strings.Contains(s, ","):
		return fmt.Errorf("%q holds a comma, and Ansible splits on commas, so it would be several elements", s)
	case strings.ContainsRune(s, 0):
		return fmt.Errorf("%q holds a NUL byte, which no command line can", s)
	}
	return nil
}

// ValidateEnvName checks an environment variable name.
func ValidateEnvName(n string) error {
	if !envName.MatchString(n) {
		return fmt.Errorf("%q is not a valid environment variable name (letters, digits and _, not starting with a digit)", n)
	}
	return nil
}

func (b *Bundle) validate() error {
	if b.AdHoc != nil {
		if b.Playbook != "" || b.ProjectPlaybook != "" || len(b.Command) > 0 {
			return errors.New("an ad hoc run is its own playbook: it takes no playbook or command")
		}
		if err := b.AdHoc.validate(); err != nil {
			return err
		}
	}
	if n := btoi(b.hasInline()) + btoi(b.ProjectPlaybook != "") + btoi(len(b.Command) > 0); n != 1 {
		return errors.New("a bundle needs exactly one of a playbook and a command (a playbook is inline or a project path, or an ad hoc run's)")
	}
	if err := b.validateHostStep(); err != nil {
		return err
	}
	if err := b.ValidateProject(); err != nil {
		return err
	}
	for _, p := range slices.Sorted(maps.Keys(b.Files)) {
		if err := ValidatePath(p); err != nil {
			return fmt.Errorf("files: %w", err)
		}
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if _, ok := b.Files[d]; ok {
				return fmt.Errorf("files: %q is a file, so %q cannot be inside it", d, p)
			}
		}
	}
	for _, m := range []map[string]string{b.Env, b.SecretEnv} {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if err := ValidateEnvName(k); err != nil {
				return fmt.Errorf("env: %w", err)
			}
			// Named, never shown: the value may be a secret.
			if strings.ContainsRune(m[k], 0) {
				return fmt.Errorf("env: the value of %s holds a NUL byte, which no environment variable can", k)
			}
		}
	}
	for _, l := range []struct {
		name  string
		items []string
	}{{"limit", b.Limit}, {"tags", b.Tags}, {"skip_tags", b.SkipTags}} {
		for _, it := range l.items {
			if err := ValidateListItem(it); err != nil {
				return fmt.Errorf("%s: %w", l.name, err)
			}
		}
	}
	for _, a := range b.Command {
		if strings.ContainsRune(a, 0) {
			return fmt.Errorf("the argument %q holds a NUL byte, which no command line can", a)
		}
	}
	for _, v := range [][]byte{b.ExtraVars, b.SecretVars} {
		if len(v) == 0 {
			continue
		}
		if err := ValidateVars(v); err != nil {
			return err
		}
	}
	if err := ValidateInventory(b.Inventory); err != nil {
		return err
	}
	if b.defaultInventory() {
		if err := b.Local.Validate(); err != nil {
			return err
		}
	}
	if err := b.validateSecrets(); err != nil {
		return err
	}
	if b.Marker == "" || strings.ContainsAny(b.Marker, "\n'\x00") {
		return errors.New("the marker must be a non-empty single line without quotes")
	}
	return nil
}

// ValidateVars checks extra variables: a JSON object in which no object sets
// a key twice (a *strictyaml.DuplicateKeyError with its line). Errors name keys, never
// values, as the variables may be secret.
func ValidateVars(doc []byte) error {
	var obj map[string]any
	if err := json.Unmarshal(doc, &obj); err != nil || obj == nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return fmt.Errorf("extra vars must be a JSON object: line %d: the JSON is malformed", strictyaml.LineAt(doc, syn.Offset))
		}
		return errors.New("extra vars must be a JSON object")
	}
	return strictyaml.CheckJSON(doc)
}

// ValidateInventory checks an inventory: one written as YAML (or JSON) may
// not set a key twice in a mapping (a *strictyaml.DuplicateKeyError with its line), as
// Ansible would warn and keep the last. INI inventories are not parsed.
func ValidateInventory(text string) error {
	if !isYAMLMap(text) {
		return nil
	}
	if _, err := strictyaml.ToJSON([]byte(text)); err != nil {
		return fmt.Errorf("inventory: %w", err)
	}
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

var epoch = time.Unix(0, 0)

func addFile(tw *tar.Writer, name string, mode int64, content []byte) error {
	hdr := &tar.Header{Name: name, Mode: mode, Size: int64(len(content)), ModTime: epoch, Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err := tw.Write(content)
	return err
}

// Write writes the bundle as a tar stream. Its mod times are fixed, so the
// same bundle gives the same bytes. A project's files are read from disk as
// they are written: one that changed since it was scanned ends the stream
// with projectdir.ErrChanged.
func (b *Bundle) Write(w io.Writer) error {
	return b.write(w, false)
}

func (b *Bundle) write(w io.Writer, shape bool) error {
	if err := b.validate(); err != nil {
		return err
	}
	want, err := b.expectedHosts(shape)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	add := func(name string, mode int64, content []byte) error { return addFile(tw, name, mode, content) }
	if err := b.writeProject(tw, shape); err != nil {
		return err
	}
	dirs := map[string]bool{callbackDir: true}
	for p := range b.Files {
		for d := path.Dir(p); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		if _, inProject := b.projectEntry(d); inProject {
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Name: b.filesPrefix() + d + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: epoch}); err != nil {
			return err
		}
	}
	for _, d := range b.secretDirs() {
		if err := tw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: 0o700, ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
	}
	for _, p := range slices.Sorted(maps.Keys(b.Files)) {
		if err := add(b.filesPrefix()+p, 0o644, []byte(b.Files[p])); err != nil {
			return err
		}
	}
	inv, invName := b.Inventory, "inventory"
	switch {
	case b.defaultInventory():
		inv = b.Local.Inventory()
	case inv == "":
		inv = DefaultInventory // not passed: project inventories replace it
	case isYAMLMap(inv):
		// Ansible's yaml inventory plugin only reads .yml/.yaml/.json files.
		invName = "inventory.yml"
	}
	files := []bundleFile{
		{ScriptName, 0o700, []byte(b.script(invName, want))},
		{invName, 0o644, []byte(inv)},
		{callbackDir + "/kubeplay_stats.py", 0o644, statsCallback},
	}
	if b.hasInline() {
		files = append(files, bundleFile{b.filesPrefix() + b.playbookArg(), 0o644, b.inlinePlaybook()})
	}
	if b.OnlyHosts != nil {
		files = append(files, bundleFile{onlyHostsName, 0o644, b.onlyHostsFile()})
	}
	if len(b.ExtraVars) > 0 {
		files = append(files, bundleFile{varsName, 0o644, b.ExtraVars})
	}
	if len(b.SecretVars) > 0 {
		files = append(files, bundleFile{secretVars, 0o600, b.SecretVars})
	}
	if len(b.SecretEnv) > 0 {
		files = append(files, bundleFile{secretEnvName, 0o600, []byte(exports(b.SecretEnv))})
	}
	if len(b.Kubeconfig) > 0 {
		files = append(files, bundleFile{kubeconfig, 0o600, b.Kubeconfig})
	}
	files = append(files, b.secretEntries()...)
	for _, f := range files {
		if err := add(f.name, f.mode, f.content); err != nil {
			return err
		}
	}
	return tw.Close()
}

// bundleFile is one file of the bundle.
type bundleFile struct {
	name    string
	mode    int64
	content []byte
}

func isYAMLMap(s string) bool {
	var m map[string]any
	return yaml.Unmarshal([]byte(s), &m) == nil && len(m) > 0
}

// Quote quotes s for a POSIX shell.
func Quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func exports(env map[string]string) string {
	var sb strings.Builder
	for _, k := range slices.Sorted(maps.Keys(env)) {
		fmt.Fprintf(&sb, "export %s=%s\n", k, Quote(env[k]))
	}
	return sb.String()
}

// hasInline is true when the bundle ships its playbook (inlinePlaybook).
func (b *Bundle) hasInline() bool { return b.Playbook != "" || b.AdHoc != nil }

// inlinePlaybook is the playbook the bundle ships: Playbook, or the ad hoc
// run's.
func (b *Bundle) inlinePlaybook() []byte {
	if b.AdHoc != nil {
		return b.AdHoc.playbook()
	}
	return []byte(b.Playbook)
}

// limitArgs is --limit with the patterns, if any: one argv element, quoted
// by the script, never split by a shell.
func limitArgs(patterns []string) []string {
	if len(patterns) == 0 {
		return nil
	}
	return []string{"--limit", strings.Join(patterns, ",")}
}

// Args returns ansible-playbook's arguments for the bundle. With a host
// step (Slices, OnlyHosts) the playbook reads the step's inventory source
// too and is limited to its group alone: the step applied Limit.
func (b *Bundle) Args(inventory string) []string {
	args := b.inventoryArgs(inventory)
	limit := b.Limit
	if b.hostStep() {
		args = append(args, "-i", b.up()+sliceInventory)
		limit = []string{b.sliceGroup()}
	}
	if len(b.ExtraVars) > 0 {
		args = append(args, "-e", "@"+b.up()+varsName)
	}
	if len(b.SecretVars) > 0 {
		args = append(args, "-e", "@"+b.up()+secretVars)
	}
	args = append(args, b.vaultArgs()...)
	args = append(args, limitArgs(limit)...)
	// One argv element each, quoted by the script: never split by a shell.
	if len(b.Tags) > 0 {
		args = append(args, "--tags", strings.Join(b.Tags, ","))
	}
	if len(b.SkipTags) > 0 {
		args = append(args, "--skip-tags", strings.Join(b.SkipTags, ","))
	}
	if b.Forks > 0 {
		args = append(args, "--forks", strconv.Itoa(b.Forks))
	}
	if b.Check {
		args = append(args, "--check")
	}
	if b.Diff {
		args = append(args, "--diff")
	}
	if b.Verbosity > 0 {
		args = append(args, "-"+strings.Repeat("v", min(b.Verbosity, 6)))
	}
	return append(args, b.playbookArg())
}

// userSetup gives the run a writable home when the pod has none (a UID with
// no entry in /etc/passwd gets "/" from the runtime; a read-only root file
// system): Ansible keeps its local temp files there. A UID with no entry
// (OpenShift's arbitrary UIDs) also gets one, which ssh needs: it exits at
// once without ("No user exists for uid"). The entry goes through
// nss_wrapper when the image has it (Debian: libnss-wrapper), else into
// /etc/passwd when that is writable (AWX's images make it group-writable).
// oomCounter reads the container's cgroup oom_kill counter (cgroup v2's
// memory.events, v1's memory.oom_control; 0 when neither is readable) with
// shell builtins only, before the run and after it.
const oomCounter = `kp_ooms() {
  for f in /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control; do
    [ -r "$f" ] || continue
    n=0; while read -r k v; do [ "$k" = oom_kill ] && n=$v; done <"$f"
    case $n in ''|*[!0-9]*) n=0 ;; esac
    echo "$n"; return
  done
  echo 0
}
ooms=$(kp_ooms)
`

const userSetup = `if [ -z "${HOME:-}" ] || [ "$HOME" = / ] || [ ! -w "$HOME" ]; then
  export HOME="$PWD/.home"; mkdir -p "$HOME"
fi
if ! id -un >/dev/null 2>&1; then
  kubeplay_user="kubeplay:x:$(id -u):$(id -g):kubeplay run:$HOME:/bin/sh"
  for kubeplay_lib in /usr/lib/*/libnss_wrapper.so /usr/lib64/libnss_wrapper.so /usr/lib/libnss_wrapper.so; do
    [ -e "$kubeplay_lib" ] || continue
    { cat /etc/passwd; echo "$kubeplay_user"; } >"$HOME/.passwd"
    { cat /etc/group; id -gn >/dev/null 2>&1 || echo "kubeplay:x:$(id -g):"; } >"$HOME/.group"
    export LD_PRELOAD="$kubeplay_lib${LD_PRELOAD:+ $LD_PRELOAD}" NSS_WRAPPER_PASSWD="$HOME/.passwd" NSS_WRAPPER_GROUP="$HOME/.group"
    break
  done
  if [ -z "${NSS_WRAPPER_PASSWD:-}" ]; then
    if [ -w /etc/passwd ]; then echo "$kubeplay_user" >>/etc/passwd
    else echo "kubeplay: UID $(id -u) has no entry in /etc/passwd, which is read-only, and the image has no nss_wrapper (Debian: libnss-wrapper): ssh will refuse to connect"; fi
  fi
fi
`

// script is the runner, in the modes of modes(): started detached, it
// reads secrets into its environment and deletes them from disk, runs the
// playbook (or command) with its output into the output's segments and the
// container's log, writes the report (exit code, stats) to R/result once
// everything ended, and waits until the provider says it has read it, or
// its watchdog that the provider is gone. want is the digest the run's
// host list must have (expectedHosts).
func (b *Bundle) script(inventory, want string) string {
	var sb strings.Builder
	sb.WriteString("#!/bin/sh\n# Written by kubeplay; runs one playbook run inside its pod, apart from any exec session.\n" +
		"set -u\ncd -P \"$(dirname \"$0\")\" || exit 125\n")
	sb.WriteString(b.modes())
	sb.WriteString(userSetup)
	sb.WriteString(oomCounter)
	if len(b.SecretEnv) > 0 {
		sb.WriteString(". ./" + secretEnvName + " && rm -f ./" + secretEnvName + "\n")
	}
	if b.AdHoc != nil {
		// What the ansible command prints: each host's result, as
		// "host | CHANGED | rc=0 >>" and the module's output. The run's
		// env may choose another.
		sb.WriteString("export ANSIBLE_STDOUT_CALLBACK=minimal\n")
	}
	if len(b.Env) > 0 {
		sb.WriteString(exports(b.Env))
	}
	sb.WriteString(b.sshSetup())
	if len(b.Kubeconfig) > 0 {
		sb.WriteString(`export KUBECONFIG="$PWD/` + kubeconfig + `" K8S_AUTH_KUBECONFIG="$PWD/` + kubeconfig + `"` + "\n")
	}
	var cmd []string
	if len(b.Command) > 0 {
		cmd = b.Command
	} else {
		sb.WriteString(`export ANSIBLE_CALLBACK_PLUGINS="$PWD/` + callbackDir + `" ANSIBLE_CALLBACKS_ENABLED=kubeplay_stats` +
			` KUBEPLAY_STATS_FILE="$PWD/` + statsName + `" ANSIBLE_NOCOLOR=1 ANSIBLE_FORCE_COLOR=0` +
			` ANSIBLE_RETRY_FILES_ENABLED=0 PYTHONUNBUFFERED=1` + checkDiffsEnv(b) + "\n")
		cmd = b.playCommand(inventory, want)
	}
	line := quoteAll(cmd) + " 5<&-"
	if b.Held {
		// flock blocks until the node's earlier run ends; the lock goes with
		// the last process that holds its descriptor, the playbook's.
		sb.WriteString("exec 9>" + Quote(nodeLockFile) + "\n" +
			"if command -v flock >/dev/null 2>&1; then\n" +
			"  flock -n 9 || { echo 'kubeplay: another run holds this node; waiting for it to end'; flock 9; }\n" +
			"else echo 'kubeplay: flock is not in the image: runs on this node do not take turns'; fi\n")
	}
	// The script's own output already goes to the pipe (modes), read by tee
	// (to the container's log, ignoring SIGPIPE there) and by the writer,
	// which cuts it into segments. The writer sees the end of the output
	// once the playbook, what it started and the script have closed it. The
	// playbook runs in a session of its own, when setsid exists, so that a
	// cancel or the watchdog ends all its processes.
	sb.WriteString("if command -v setsid >/dev/null 2>&1; then setsid " + line + " & else " + line + " & fi\n" +
		"pid=$!\n" +
		"echo \"$pid\" >\"$R/pid\"\n" +
		"[ -e \"$R/canceled\" ] && kill -TERM -\"$pid\" \"$pid\" 2>/dev/null\n" +
		"( kp_watch ) </dev/null >/dev/null 2>&1 9>&- &\n" +
		"kp_dog=$!\n" +
		"wait \"$pid\"\nrc=$?\n" +
		"exec >/dev/null 2>&1\n" +
		// What the playbook left running may hold the output open: it gets 5 s.
		"( sleep 5; kill -TERM -\"$pid\" ) >/dev/null 2>&1 9>&- &\n" +
		"kp_reap=$!\n" +
		"wait \"$kp_writer\"\n" +
		"kill \"$kp_reap\" 2>/dev/null\n" +
		"ooms=$(($(kp_ooms) - ooms))\n")
	if b.hostStep() {
		sb.WriteString(hostsHeader)
	}
	sb.WriteString(b.sshCleanup())
	if len(b.SecretVars) > 0 {
		sb.WriteString("rm -f ./" + secretVars + "\n")
	}
	if len(b.Kubeconfig) > 0 {
		sb.WriteString("rm -f ./" + kubeconfig + "\n")
	}
	// The report, written whole before it is renamed into place: a follower
	// sends it after the marker (see ResultStream) once it is there. Its
	// first line is the script's own, the stats file's bytes follow it:
	// the stats and the size file can be written by any process of the
	// run, so neither is spliced into that line (DecodeResult).
	sb.WriteString("size=0; [ -e \"$R/size\" ] && read -r size <\"$R/size\"\n" +
		"case $size in ''|*[!0-9]*|???????????????????*) size=0 ;; esac\n" +
		"ab=false; [ -e \"$R/abandoned\" ] && ab=true\n" +
		"{ printf '{\"rc\":%d,\"oom_kills\":%d,\"output_size\":%s,\"abandoned\":%s%s}\\n' \"$rc\" \"$ooms\" \"$size\" \"$ab\" \"${kp_hl:-}\"\n" +
		"  cat ./" + statsName + " 2>/dev/null || printf null; printf '\\n'; } >\"$R/result.tmp\" && mv -f \"$R/result.tmp\" \"$R/result\"\n" +
		"kp_wake\n" +
		// The provider's "done", or the watchdog's word that it is gone.
		"IFS= read -r _ <&5\n" +
		"kill \"$kp_dog\" 2>/dev/null\n")
	if b.Held {
		sb.WriteString("cd / && rm -rf \"$R\"\n") // the node's next runs do not see this one's files
	}
	sb.WriteString("exit $rc\n")
	return sb.String()
}

// checkDiffsEnv sets KUBEPLAY_CHECK_DIFFS for a check, after the run's own
// env, so that only CheckDiffs turns on the callback's diff text.
func checkDiffsEnv(b *Bundle) string {
	switch {
	case !b.Check:
		return ""
	case b.CheckDiffs:
		return " KUBEPLAY_CHECK_DIFFS=1"
	}
	return " KUBEPLAY_CHECK_DIFFS=0"
}

// HostStats is one host's line of the play recap.
type HostStats struct {
	OK          int64 `json:"ok"`
	Changed     int64 `json:"changed"`
	Unreachable int64 `json:"unreachable"`
	Failed      int64 `json:"failures"`
	Skipped     int64 `json:"skipped"`
	Rescued     int64 `json:"rescued"`
	Ignored     int64 `json:"ignored"`
}

// How a host ended (HostStats.Outcome).
const (
	OutcomeOK          = "ok"
	OutcomeChanged     = "changed"
	OutcomeFailed      = "failed"
	OutcomeUnreachable = "unreachable"
)

// Outcome is how the host ended: failed when a task failed on it (Ansible
// counts neither rescued nor ignored failures there), else unreachable when
// a task could not reach it, else changed when a task changed it, else ok.
func (s HostStats) Outcome() string {
	switch {
	case s.Failed > 0:
		return OutcomeFailed
	case s.Unreachable > 0:
		return OutcomeUnreachable
	case s.Changed > 0:
		return OutcomeChanged
	}
	return OutcomeOK
}

// NotOK is true of a host that failed or was unreachable.
func (s HostStats) NotOK() bool {
	o := s.Outcome()
	return o == OutcomeFailed || o == OutcomeUnreachable
}

// HostCounts counts a result's hosts by Outcome: OK, Changed, Failed and
// Unreachable add up to the host count. Rescued and Ignored count the hosts,
// of any outcome, whose recap has rescued or ignored tasks.
type HostCounts struct {
	OK, Changed, Failed, Unreachable int64
	Rescued, Ignored                 int64
}

// add counts s n times (-1 takes it back).
func (c *HostCounts) add(s HostStats, n int64) {
	switch s.Outcome() {
	case OutcomeFailed:
		c.Failed += n
	case OutcomeUnreachable:
		c.Unreachable += n
	case OutcomeChanged:
		c.Changed += n
	default:
		c.OK += n
	}
	if s.Rescued > 0 {
		c.Rescued += n
	}
	if s.Ignored > 0 {
		c.Ignored += n
	}
}

// CountHosts counts hosts by Outcome.
func CountHosts(hosts map[string]HostStats) HostCounts {
	var c HostCounts
	for _, s := range hosts {
		c.add(s, 1)
	}
	return c
}

// FailedHosts returns the first MaxFailedHosts hosts by name of those in
// hosts that failed or were unreachable.
func FailedHosts(hosts map[string]HostStats) map[string]HostStats {
	out := map[string]HostStats{}
	for h, s := range hosts {
		if s.NotOK() {
			out[h] = s
		}
	}
	keepFirst(out, MaxFailedHosts)
	return out
}

// Result is what the runner reports on the result channel (see
// ResultStream).
type Result struct {
	ExitCode int
	// Hosts are the play recap of the first MaxHosts hosts by name;
	// HostCount counts them all, and HostCounts by outcome.
	Hosts      map[string]HostStats
	HostCount  int64
	HostCounts HostCounts
	// FailedHosts are the recap of the first MaxFailedHosts hosts by name
	// of those that failed or were unreachable, among all the hosts (some
	// may be past the MaxHosts that Hosts keeps).
	FailedHosts map[string]HostStats
	// NotOKHosts names every host that failed or was unreachable, in the
	// order the stats gave them: what a re-run of only those targets.
	NotOKHosts []string
	// FailedTasks are the first MaxFailedTasks failed tasks, in order;
	// FailedTaskCount counts them all.
	FailedTasks     []FailedTask
	FailedTaskCount int64
	// Artifacts is the run's set_stats data (per_host: false) as a compact
	// JSON object; "" when the playbook set none.
	Artifacts string
	// OOMKills counts the processes the kernel killed at the container's
	// memory limit during the run (its cgroup's oom_kill counter): a task
	// killed so shows only as "rc": -9 otherwise.
	OOMKills int64
	// OutputSize is how many bytes of output the run wrote in all.
	OutputSize int64
	// Abandoned is set when the pod ended the run because the provider was
	// not heard from for the run's lease grace.
	Abandoned bool
	// HostList is set when the run listed its hosts before the playbook
	// (Bundle.Slices, Bundle.OnlyHosts): HostsTotal counts the hosts its
	// inventories and limit gave, HostsSHA256 is the SHA-256 of their
	// names sorted bytewise, one a line, and SliceHosts counts the hosts
	// this run targeted.
	HostList    bool
	HostsTotal  int64
	HostsSHA256 string
	SliceHosts  int64
	// Check is what a run in check mode reported (result.go); nil otherwise.
	Check *Check
	// StatsErr is set when the stats document was refused (see
	// DecodeResult): the exit code and the fields above it from OOMKills
	// on are the script's, the stats are absent.
	StatsErr *StatsError
}
