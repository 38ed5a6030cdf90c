package bundle

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// A run that is one slice of several (Slices), or that targets only some
// hosts (OnlyHosts), starts with the host step: the run's shell lists its
// hosts as the playbook would see them (ansible --list-hosts with the
// run's inventories, limit and vault), sorts them bytewise, takes its
// share, and runs the playbook with an inventory source of its own that
// puts exactly that share into a group of its own (sliceGroup), and --limit
// to it.
// The digest of the sorted list tells whether all of a run's slices saw
// the same hosts (ExpectHostsSHA256). Every part of it is linear in the
// number of hosts: a --limit of one pattern per host would be quadratic.

// Exit statuses of the host step, beside ansible-playbook's.
const (
	// ExitHostList: the run's hosts could not be listed, or the list
	// cannot be sliced as it is (see the run's output).
	ExitHostList = 121
	// ExitHostsChanged: the inventory's host list is not the one the
	// run's other slices saw (ExpectHostsSHA256); the playbook did not run.
	ExitHostsChanged = 122
)

// Names of the host step.
const (
	// onlyHostsName holds OnlyHosts, one name a line, sorted.
	onlyHostsName = "kubeplay-only-hosts"
	// sliceInventory is the inventory source the step writes: sliceGroup
	// with this run's hosts.
	sliceInventory = "kubeplay-slice.yml"
	// hostsDir holds the step's lists and its state (hostsState).
	hostsDir = "kubeplay-hosts"
	// hostsState is the line "total sha256 slice_hosts" the step writes
	// for the report's header.
	hostsState = hostsDir + "/state"
	// sliceGroupPrefix starts the name of the group of the run's hosts
	// (sliceGroup).
	sliceGroupPrefix = "kubeplay_slice_"
)

// sliceGroup names the group of the run's hosts after its marker, a random
// value per run: no inventory has a group of that name already, so the
// step need not ask Ansible (a second inventory load, 1 s or more).
func (b *Bundle) sliceGroup() string {
	sum := sha256.Sum256([]byte(b.Marker))
	return sliceGroupPrefix + hex.EncodeToString(sum[:8])
}

// noDigest stands in the script for an expected digest when there is none:
// the script is as long either way, so Size holds whatever
// ExpectHostsSHA256 returns when the bundle is written.
var noDigest = strings.Repeat("-", 64)

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// hostStep is true when the run lists its hosts before the playbook.
func (b *Bundle) hostStep() bool { return b.Slices > 1 || b.OnlyHosts != nil }

// listPattern is the pattern whose hosts the step lists: the ad hoc
// run's, or all for a playbook, whose plays may target any of them.
func (b *Bundle) listPattern() string {
	if b.AdHoc != nil {
		return b.AdHoc.Pattern
	}
	return "all"
}

func (b *Bundle) validateHostStep() error {
	switch {
	case b.Slices > 1 && (b.Slice < 1 || b.Slice > b.Slices):
		return fmt.Errorf("slice %d of %d: slices are numbered from 1 to %d", b.Slice, b.Slices, b.Slices)
	case b.Slices <= 1 && b.Slice > 1:
		return fmt.Errorf("slice %d of a run that is not sliced (slices %d)", b.Slice, b.Slices)
	case b.Slice < 0:
		return fmt.Errorf("slice %d: slices are numbered from 1", b.Slice)
	case b.hostStep() && len(b.Command) > 0:
		return errors.New("slices and only_hosts choose a playbook's hosts; a command has none")
	}
	for _, h := range b.OnlyHosts {
		switch {
		case h == "":
			return errors.New("only_hosts: an element is empty, and no host is named so")
		case strings.ContainsAny(h, "\n\x00"):
			return fmt.Errorf("only_hosts: %q holds a newline or a NUL byte, which kubeplay cannot match to a host", h)
		}
	}
	return nil
}

// onlyHostsFile is OnlyHosts, sorted and without repeats, one a line.
func (b *Bundle) onlyHostsFile() []byte {
	names := slices.Compact(slices.Sorted(slices.Values(b.OnlyHosts)))
	var sb strings.Builder
	for _, h := range names {
		sb.WriteString(h + "\n")
	}
	return []byte(sb.String())
}

// expectedHosts is the digest the run's hosts must have: ExpectHostsSHA256's,
// asked as the bundle is written (never for its size), or noDigest.
func (b *Bundle) expectedHosts(shape bool) (string, error) {
	if shape || b.ExpectHostsSHA256 == nil || !b.hostStep() {
		return noDigest, nil
	}
	d := b.ExpectHostsSHA256()
	switch {
	case d == "":
		return noDigest, nil
	case !sha256Hex.MatchString(d):
		return "", fmt.Errorf("the expected digest of the run's hosts %.80q is not a SHA-256 digest in lower-case hex: "+
			"pass a slice's Result.HostsSHA256", d)
	}
	return d, nil
}

// listCommand is the ansible command that lists pattern's hosts with the
// run's inventories, limit and vault: "--" ends the options, as a pattern
// may start with "-".
func (b *Bundle) listCommand(inventory, pattern string) string {
	args := append([]string{"ansible"}, b.inventoryArgs(inventory)...)
	args = append(args, limitArgs(b.Limit)...)
	args = append(args, b.vaultArgs()...)
	return quoteAll(append(args, "--list-hosts", "--", pattern))
}

// quoteAll quotes a command line for a POSIX shell.
func quoteAll(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = Quote(a)
	}
	return strings.Join(quoted, " ")
}

// hostStepScript is the step, for the shell that then execs the playbook
// (playCommand): it runs where the playbook does, with the run's
// environment and requirements, so it sees the same inventory. want is
// the expected digest or noDigest.
func (b *Bundle) hostStepScript(inventory, want string) string {
	slice, of := max(b.Slice, 1), max(b.Slices, 1)
	// What the run's first line says, and its arguments.
	var line, lineArgs, none, noneArgs string
	switch {
	case b.Slices > 1 && b.OnlyHosts != nil:
		line, lineArgs = fmt.Sprintf("slice %d/%d: %%s of the %%s hosts to re-run, of %%s hosts", slice, of), `"$kp_n" "$kp_picked" "$kp_total"`
		none, noneArgs = fmt.Sprintf("slice %d/%d has none of the %%s hosts to re-run, of %%s hosts", slice, of), `"$kp_picked" "$kp_total"`
	case b.Slices > 1:
		line, lineArgs = fmt.Sprintf("slice %d/%d: %%s of %%s hosts", slice, of), `"$kp_n" "$kp_total"`
		none, noneArgs = fmt.Sprintf("slice %d/%d has no hosts, of %%s", slice, of), `"$kp_total"`
	default:
		line, lineArgs = "re-running %s of %s hosts that failed", `"$kp_n" "$kp_total"`
		none, noneArgs = "none of the hosts to re-run is among the run's %s hosts", `"$kp_total"`
	}
	format := func(s, tail string) string { return Quote("kubeplay: " + s + " (hosts sha256 %.12s)" + tail + "\\n") }
	r := strings.NewReplacer(
		"@LIST@", b.listCommand(inventory, b.listPattern()),
		"@ONLY@", strconv.FormatBool(b.OnlyHosts != nil), "@OF@", strconv.Itoa(of), "@INDEX@", strconv.Itoa(slice-1),
		"@WANT@", Quote(want), "@NODIGEST@", Quote(noDigest),
		"@LINE@", format(line, "")+" "+lineArgs, "@NONE@", format(none, ": ansible-playbook did not run")+" "+noneArgs,
		"@HOSTLIST@", strconv.Itoa(ExitHostList), "@CHANGED@", strconv.Itoa(ExitHostsChanged),
		"@DIR@", hostsDir, "@STATE@", hostsState, "@ONLYFILE@", onlyHostsName, "@SLICEFILE@", sliceInventory, "@GROUPNAME@", b.sliceGroup())
	return r.Replace(hostStepSh)
}

// hostStepSh is the host step. Names that the slice's inventory source
// (read by Ansible's yaml plugin) would not give back as the same host are
// refused: empty, a range ("["), a control character, or a trailing
// ":port".
const hostStepSh = `kp_h="$top/@DIR@"
kp_fail() { printf 'kubeplay: %s\n' "$1"; exit @HOSTLIST@; }
kp_lines() { set -- $(wc -l <"$1"); echo "$1"; }
rm -rf "$kp_h" && mkdir "$kp_h" || kp_fail "could not create $kp_h for the run's host list"
@LIST@ >"$kp_h/out" 2>"$kp_h/err"
kp_rc=$?
if [ "$kp_rc" -ne 0 ]; then
  cat "$kp_h/err"
  kp_fail "listing the run's hosts (ansible --list-hosts, with the run's inventories and limit) failed with exit code $kp_rc; see the output above"
fi
LC_ALL=C awk '
NR == 1 { if ($0 !~ /^  hosts \([0-9]+\):$/) { bad = 2; exit } n = substr($0, 10, length($0) - 11) + 0; next }
substr($0, 1, 4) != "    " { bad = 3; exit }
{ print substr($0, 5); c++ }
END { if (bad) exit bad; if (NR == 0) exit 2; if (c + 0 != n) exit 4 }' "$kp_h/out" >"$kp_h/hosts"
case $? in
0) ;;
2) cat "$kp_h/err"; kp_fail "ansible --list-hosts did not start its output with the line '  hosts (N):'; the run's hosts cannot be read" ;;
3) cat "$kp_h/err"; kp_fail "ansible --list-hosts printed a line that is not a host name indented by 4 spaces; the run's hosts cannot be read" ;;
4) kp_fail "ansible --list-hosts said $(sed -n '1s/[^0-9]//gp' "$kp_h/out") hosts but listed $(kp_lines "$kp_h/hosts"); the run's hosts cannot be read" ;;
*) kp_fail "awk could not read the output of ansible --list-hosts" ;;
esac
LC_ALL=C sort "$kp_h/hosts" >"$kp_h/sorted" || kp_fail "sort could not sort the run's host list"
kp_sum=$(sha256sum <"$kp_h/sorted") || kp_fail "sha256sum (coreutils or busybox) is not in the image, or failed: the run's host list has no digest"
kp_sum=${kp_sum%% *}
case $kp_sum in *[!0-9a-f]*|'') kp_fail "sha256sum printed no digest of the run's host list" ;; esac
[ "${#kp_sum}" -eq 64 ] || kp_fail "sha256sum printed no digest of the run's host list"
if @ONLY@; then
  LC_ALL=C awk 'FILENAME == ARGV[1] { want[$0] = 1; next } $0 in want' "$top/@ONLYFILE@" "$kp_h/sorted" >"$kp_h/picked" ||
    kp_fail "awk could not pick the hosts to re-run from the run's host list"
else cp "$kp_h/sorted" "$kp_h/picked" || kp_fail "could not copy the run's host list"; fi
LC_ALL=C awk -v n=@OF@ -v k=@INDEX@ '(NR - 1) % n == k' "$kp_h/picked" >"$kp_h/slice" || kp_fail "awk could not take this slice of the run's host list"
kp_total=$(kp_lines "$kp_h/sorted") kp_picked=$(kp_lines "$kp_h/picked") kp_n=$(kp_lines "$kp_h/slice")
printf '%s %s %s\n' "$kp_total" "$kp_sum" "$kp_n" >"$top/@STATE@"
kp_bad=$(LC_ALL=C tr '\000' '\001' <"$kp_h/sorted" | LC_ALL=C grep -n -e '^$' -e '[[:cntrl:][]' -e '^[^:]*:[0-9][0-9]*$' | head -n 1 | LC_ALL=C tr '\000-\011\013-\037\177' '?')
[ -z "$kp_bad" ] || kp_fail "the inventory has a host named '${kp_bad#*:}' (control characters shown as ?): a name that is empty, holds '[' or a control character, or ends in ':' and digits does not name the same host in the inventory source that restricts the run to its hosts; rename the host"
kp_want=@WANT@
if [ "$kp_want" != @NODIGEST@ ] && [ "$kp_want" != "$kp_sum" ]; then
  echo "kubeplay: the inventory's host list differs from the one the run's other slices saw ($kp_total hosts with sha256 $kp_sum here, sha256 $kp_want there): this slice did not run its playbook, as its share of the hosts would not be the one they expect"
  exit @CHANGED@
fi
if [ "$kp_n" -eq 0 ]; then printf @NONE@ "$kp_sum"; exit 0; fi
{ printf '{"@GROUPNAME@": {"hosts": {\n'
  sed 's/\\/\\\\/g; s/"/\\"/g; s/^/"/; s/$/": null/; 1!s/^/, /' "$kp_h/slice"
  printf '}}}\n'; } >"$top/@SLICEFILE@" || kp_fail "could not write the inventory source of the run's hosts"
printf @LINE@ "$kp_sum"
`

// hostsHeader, in the script once the playbook has ended, makes the
// report header's host list fields of the step's state, kp_hl; none when
// the step did not get that far. Any process of the run can write the
// state: only counts and a digest in hex get into the header.
const hostsHeader = `kp_hl=
kp_count() { case $1 in ''|*[!0-9]*|0?*|???????????????????*) return 1 ;; esac; }
if [ -f ./` + hostsState + ` ] && read -r kp_ht kp_hs kp_hn kp_hx <./` + hostsState + ` &&
  kp_count "$kp_ht" && kp_count "$kp_hn" && [ -z "$kp_hx" ] && [ "${#kp_hs}" -eq 64 ]; then
  case $kp_hs in *[!0-9a-f]*) ;; *) kp_hl=",\"hosts_total\":$kp_ht,\"hosts_sha256\":\"$kp_hs\",\"slice_hosts\":$kp_hn" ;; esac
fi
`
