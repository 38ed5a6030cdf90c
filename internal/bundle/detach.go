package bundle

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// A run lives in its pod apart from any exec session (issue #28): the
// delivery exec unpacks the bundle and starts the script detached; the
// playbook's output goes to numbered segment files in the run's directory
// (and to the container's log); any exec, the delivery's or a later one,
// follows the output from a byte position and sends the result once the
// run has ended. The provider's lines on that exec's stdin are the run's
// lease: beats ("a <bytes received> <seq>"), cancel ("c") and done ("d").
// A run whose provider is not heard from for LeaseGrace is ended by the
// pod itself.

// Sizes of the output kept in the pod.
const (
	// SegmentSize is the size of each output file but the last.
	SegmentSize = 1 << 20
	// OutputCap bounds the output kept on the pod's disk: past it, the
	// oldest segments go even when the provider has not read them, and a
	// follower that reaches the gap says how many bytes it lost.
	OutputCap = 64 << 20
)

// Liveness of a detached run.
const (
	// DefaultLeaseGrace is how long a run goes on without a beat from its
	// provider before the pod ends it, when the group sets no other.
	DefaultLeaseGrace = 30 * time.Second
	// MinLeaseGrace is the least grace a group may set: a few beats.
	MinLeaseGrace = 10 * time.Second
	// BeatInterval is how often the provider beats on each stream.
	BeatInterval = 5 * time.Second
	// watchTick is how often the pod's watchdog looks at the beats.
	watchTick = 2
)

// Exit statuses of the delivery and follow commands, beside the script's.
const (
	// ExitNoRun: the follower found no run in the directory.
	ExitNoRun = 3
	// ExitUnpack: the bundle could not be unpacked or the run started.
	ExitUnpack = 125
)

// containerLog is where the run's output is copied for `kubectl logs`: the
// standard output of the container's first process. Unit tests, which run
// the script on the host, point it elsewhere.
var containerLog = "/proc/1/fd/1"

// RunDir is the directory of the run with id in its pod. Its name starts
// with RunDirPrefix, which the worker waits for.
func RunDir(id string) string { return RunDirPrefix + id }

// DeliverCommand returns the exec command that takes the bundle, the first
// size bytes of stdin, and starts the run in dir unless an earlier attempt
// did: each attempt unpacks into a directory of its own, and only the
// first to create dir starts the script, so a run never starts twice. A
// later attempt reads and drops the bundle, and waits (up to 10 s) for the
// attempt that created dir to have started the run. It then follows the
// output from its start (FollowCommand). head stops at the bundle's end where tar
// would not: GNU tar reads on to the end of its 10 KiB record, busybox tar
// to the end of the stream.
func DeliverCommand(dir string, size int64, attempt int) []string {
	return []string{"sh", "-c", `R=$1 p=$1.p$3
if [ -d "$R" ]; then head -c "$2" >/dev/null
else
  rm -rf "$p" && mkdir -p "$p" && head -c "$2" | tar -xf - -C "$p" || exit ` + strconv.Itoa(ExitUnpack) + `
  if mkdir "$R" 2>/dev/null; then
    mv "$p" "$R/b" && sh "$R/b/` + ScriptName + `" start || exit ` + strconv.Itoa(ExitUnpack) + `
  else rm -rf "$p"; fi
fi
n=0; while [ ! -d "$R/out" ] && [ "$n" -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
exec sh "$R/b/` + ScriptName + `" follow 0`, "kubeplay", dir, strconv.FormatInt(size, 10), strconv.Itoa(attempt)}
}

// FollowCommand returns the exec command that re-attaches to the run in
// dir: the output from byte pos on (stdout), the control lines and, once
// the run has ended, the result (stderr). It exits ExitNoRun when dir holds
// no run.
func FollowCommand(dir string, pos int64) []string {
	return []string{"sh", "-c", `[ -f "$1/b/` + ScriptName + `" ] || { echo kp-none >&2; exit ` + strconv.Itoa(ExitNoRun) + `; }
exec sh "$1/b/` + ScriptName + `" follow "$2"`, "kubeplay", dir, strconv.FormatInt(pos, 10)}
}

// Control is a line a follower writes on stderr before the result.
type Control struct {
	// Kind is "attached" (the run exists: it started), "lost" (the bytes
	// From to To were rotated away before they were read; the follower
	// ends and the provider follows again from To) or "none" (no run).
	Kind     string
	From, To int64
}

// ParseControl reads one stderr line ("kp-attached", "kp-lost A B",
// "kp-none"); ok is false for any other line.
func ParseControl(line string) (c Control, ok bool) {
	// Words are separated by exactly one space, as the script prints them:
	// any other whitespace (a newline inside the line) is not a control line.
	f := strings.Split(line, " ")
	if !strings.HasPrefix(f[0], "kp-") {
		return Control{}, false
	}
	switch {
	case f[0] == "kp-attached" && len(f) == 1:
		return Control{Kind: "attached"}, true
	case f[0] == "kp-none" && len(f) == 1:
		return Control{Kind: "none"}, true
	case f[0] == "kp-lost" && len(f) == 3:
		from, err1 := strconv.ParseInt(f[1], 10, 64)
		to, err2 := strconv.ParseInt(f[2], 10, 64)
		// Canonical decimals only, as the script prints them.
		if err1 != nil || err2 != nil || from < 0 || to <= from ||
			strconv.FormatInt(from, 10) != f[1] || strconv.FormatInt(to, 10) != f[2] {
			return Control{}, false
		}
		return Control{Kind: "lost", From: from, To: to}, true
	}
	return Control{}, false
}

// Beat is the provider's beat line: received is how many output bytes it
// has, which the pod may then rotate away; seq changes with every beat so
// that the watchdog sees it.
func Beat(received int64, seq uint64) string { return fmt.Sprintf("a %d %d\n", received, seq) }

// The provider's other lines.
const (
	CancelLine = "c\n"
	DoneLine   = "d\n"
)

// leaseGrace is the bundle's grace in whole seconds.
func (b *Bundle) leaseGrace() int {
	g := b.LeaseGrace
	if g <= 0 {
		g = DefaultLeaseGrace
	}
	return max(int((g+time.Second-1)/time.Second), watchTick)
}

// keepOutput is the tail of the output that the pod keeps even once read.
func (b *Bundle) keepOutput() int64 {
	if b.KeepOutput <= 0 {
		return 64 << 10
	}
	return min(b.KeepOutput, OutputCap/2)
}

// modes is the script's head: its modes other than "run" (start, follow)
// and the shell functions of the run. It runs from the bundle directory,
// R/b; R holds the run's state:
//
//	out/N    the output's segments, N from 0, SegmentSize bytes each but the last
//	size     the output's size, once the playbook and the writer have ended
//	result   the report, once written (its writing ends the run)
//	pipe     the playbook's output, read by tee (to the container's log) and the writer
//	ack      the script waits here for the provider's "done" or the watchdog
//	beat     the last beat line a follower got, replaced whole (by rename):
//	         a reader of a file being rewritten in place may read it empty,
//	         the watchdog's state before the first beat
//	pid      the playbook's pid; canceled, acked, abandoned: markers
//	w.PID    a follower's wake-up, when the result is written
func (b *Bundle) modes() string {
	killWorker := "IFS= read -r w  2>/dev/null <" + Quote(workerPIDFile) + " && kill -TERM \"$w\" 2>/dev/null"
	if b.Held {
		killWorker = ":" // a held node outlives its runs
	}
	r := strings.NewReplacer("@S@", strconv.Itoa(SegmentSize), "@CAP@", strconv.Itoa(OutputCap),
		"@KEEP@", strconv.FormatInt(b.keepOutput(), 10), "@GRACE@", strconv.Itoa(b.leaseGrace()),
		"@TICK@", strconv.Itoa(watchTick), "@MARKER@", Quote(b.Marker), "@KILLWORKER@", killWorker,
		"@LOG@", Quote(containerLog), "@PRIVATE@", strconv.FormatBool(b.PrivateOutput), "@NORUN@", strconv.Itoa(ExitNoRun), "@UNPACK@", strconv.Itoa(ExitUnpack))
	return r.Replace(modesScript)
}

const modesScript = `R=${0%/*}; R=${R%/*}
kp_cancel() {
  true >"$R/canceled"
  IFS= read -r p  2>/dev/null <"$R/pid" && kill -TERM -"$p" "$p" 2>/dev/null
  @KILLWORKER@
}
kp_stop() {
  trap - TERM INT HUP
  kill $sp 2>/dev/null
  rm -f "$R/w.$$"
  exit 0
}
# kp_copy FILE FROM: what FILE holds from byte FROM on, to fd 4; n is how
# many bytes that was. dd says how many it copied, as the number before
# "bytes" (or "byte") on its last line: GNU dd may warn before it ("partial
# read (4096 bytes); suggest iflag=fullblock" when FILE grows between its
# reads). A dd without skip_bytes (older busybox) copies a counted range
# through tail and head.
kp_copy() {
  if [ -n "$kp_skip" ]; then
    set -- $(LC_ALL=C dd if="$1" bs=65536 iflag=skip_bytes skip="$2" 2>&1 >&4)
    n=
    while [ $# -gt 1 ]; do case $2 in byte|bytes) n=$1 ;; esac; shift; done
  else
    n=$(($(wc -c <"$1") - $2))
    [ "$n" -gt 0 ] && tail -c +$(($2 + 1)) "$1" | head -c "$n" >&4
  fi
  case $n in ''|*[!0-9]*) n=0 ;; esac
}
kp_follow() {
  i=$1 sp=
  case $i in ''|*[!0-9]*) echo "kubeplay: not a position: $i" >&2; exit 2 ;; esac
  [ -d "$R/out" ] || { echo kp-none >&2; exit @NORUN@; }
  mkfifo "$R/w.$$" && exec 6<>"$R/w.$$" || exit @UNPACK@
  trap kp_stop TERM INT HUP
  echo kp-attached >&2
  exec 3<&0
  { while IFS= read -r l; do
      case $l in
      a\ *) printf '%s\n' "$l" >"$R/beat.$$" && mv -f "$R/beat.$$" "$R/beat" ;;
      c) kp_cancel ;;
      d) true >"$R/acked"; { exec 4<>"$R/ack"; } 2>/dev/null && { echo d >&4; exec 4>&-; } ;;
      esac
    done
    kill -TERM $$ 2>/dev/null; } <&3 3<&- 6<&- &
  sp=$!
  exec 3<&- </dev/null 4>&1
  kp_skip=; dd if=/dev/null of=/dev/null iflag=skip_bytes skip=0 2>/dev/null && kp_skip=1
  k=$((i % @S@)) i=$((i / @S@))
  # Copy what there is; then wait on the FIFO, where the writer wakes its
  # followers after each piece of output and the script once the result
  # is written.
  while :; do
    if [ -e "$R/out/$i" ]; then
      kp_copy "$R/out/$i" "$k"
      k=$((k + n))
      if [ "$k" -ge @S@ ]; then i=$((i + 1)) k=0; continue; fi
      [ "$n" -gt 0 ] && continue
    else
      first=$(ls "$R/out" | sort -n | head -n 1)
      if [ -n "$first" ] && [ "$first" -gt "$i" ]; then echo "kp-lost $((i * @S@ + k)) $((first * @S@))" >&2; kp_stop; fi
    fi
    if [ -e "$R/size" ]; then
      n=; read -r n <"$R/size"
      case $n in ''|*[!0-9]*) [ -e "$R/result" ] && break; IFS= read -r _ <&6; continue ;; esac
      [ $((i * @S@ + k)) -ge "$n" ] && break
      continue
    fi
    IFS= read -r _ <&6
  done
  while [ ! -e "$R/result" ]; do IFS= read -r _ <&6; done
  printf '\n%s\n' @MARKER@ >&2; cat "$R/result" >&2; printf '%s\n' @MARKER@ >&2
  wait "$sp"
  kp_stop
}
# kp_wake wakes every follower (see kp_follow).
kp_wake() {
  for kp_f in "$R"/w.*; do
    [ -p "$kp_f" ] || continue
    if kill -0 "${kp_f##*.}" 2>/dev/null; then { exec 8<>"$kp_f"; } 2>/dev/null && { echo >&8; exec 8>&-; }
    else rm -f "$kp_f"; fi
  done
}
# kp_write cuts the output into segments as it comes: dd copies what one
# read gives, up to the segment's end, and says how much that was (the
# number before "bytes" on its last line, as in kp_copy).
kp_write() {
  exec 3<&0 </dev/null
  i=0 first=0 w=0
  true >"$R/out/0"
  while :; do
    set -- $(LC_ALL=C dd bs=$((@S@ - w < 65536 ? @S@ - w : 65536)) count=1 2>&1 >>"$R/out/$i" <&3)
    n=
    while [ $# -gt 1 ]; do case $2 in byte|bytes) n=$1 ;; esac; shift; done
    case $n in ''|*[!0-9]*|0) break ;; esac
    w=$((w + n))
    if [ "$w" -ge @S@ ]; then
      i=$((i + 1)) w=0 t=$((i * @S@))
      true >"$R/out/$i"
      a=; IFS=' ' read -r _ a _ 2>/dev/null <"$R/beat"
      case $a in ''|*[!0-9]*) a=0 ;; esac
      low=$((t - @KEEP@)); [ "$a" -lt "$low" ] && low=$a
      [ $((t - @CAP@)) -gt "$low" ] && low=$((t - @CAP@))
      while [ $(((first + 1) * @S@)) -le "$low" ]; do rm -f "$R/out/$first"; first=$((first + 1)); done
    fi
    kp_wake
  done
  # Renamed into place: a follower never reads it half written.
  echo $((i * @S@ + w)) >"$R/size.tmp" && mv -f "$R/size.tmp" "$R/size"
  kp_wake
}
kp_watch() {
  last= idle=0
  while sleep @TICK@; do
    [ -e "$R/acked" ] && exit 0
    b=; IFS= read -r b  2>/dev/null <"$R/beat"
    if [ "$b" != "$last" ]; then last=$b idle=0; continue; fi
    idle=$((idle + @TICK@))
    [ "$idle" -lt @GRACE@ ] && continue
    true >"$R/abandoned"
    kill -TERM -"$pid" "$pid" 2>/dev/null
    @KILLWORKER@
    echo x >&5
    exit 0
  done
}
case ${1:-} in
start)
  mkdir "$R/out" && mkfifo "$R/pipe" "$R/ack" && true >"$R/beat" || exit @UNPACK@
  if command -v setsid >/dev/null 2>&1; then setsid sh "$0" run </dev/null >/dev/null 2>&1 &
  else sh "$0" run </dev/null >/dev/null 2>&1 & fi
  exit 0 ;;
follow) kp_follow "${2:-}" ;;
run) ;;
*) echo "kubeplay: usage: $0 start | run | follow POSITION" >&2; exit 2 ;;
esac
exec 5<>"$R/ack"
kp_log=@LOG@ kp_unwritable=
if @PRIVATE@; then
  { echo "kubeplay: this run's output is not copied to this log, as it may show secrets that only the provider redacts; see the run's output attribute" >>"$kp_log"; } 2>/dev/null
  kp_log=
elif ! { true >>"$kp_log"; } 2>/dev/null; then kp_log= kp_unwritable=1; fi
( trap '' PIPE; exec tee -a "${kp_log:-/dev/null}" ) <"$R/pipe" | kp_write &
kp_writer=$!
exec >"$R/pipe" 2>&1
[ -z "$kp_unwritable" ] || echo "kubeplay: this output does not reach the container's log: $(printf %s @LOG@) is not writable"
`
