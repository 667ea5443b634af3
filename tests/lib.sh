# Assertions for routectl's shell-driven end-to-end tests. Each check prints one line; the run
# ends with "N passed, N failed" and fails when anything failed.
passed=0
failed=0

ok() { passed=$((passed + 1)); printf '  ok    %s\n' "$1"; }
not_ok() {
	failed=$((failed + 1))
	printf '  FAIL  %s\n' "$1"
	shift
	for line in "$@"; do printf '        %s\n' "$line"; done
}

# expect_eq NAME EXPECTED ACTUAL
expect_eq() {
	if [ "$2" = "$3" ]; then ok "$1"; else not_ok "$1" "expected: $2" "actual:   $3"; fi
}

# expect_match NAME REGEX ACTUAL
expect_match() {
	if printf '%s' "$3" | grep -Eq -- "$2"; then ok "$1"; else not_ok "$1" "expected to match: $2" "actual: $3"; fi
}

# run_rc CMD...: runs it, leaving stdout in $out, stderr in $err and the status in $rc.
run_rc() {
	local o e
	o=$(mktemp) e=$(mktemp)
	set +e
	"$@" >"$o" 2>"$e"
	rc=$?
	set -e
	out=$(cat "$o") err=$(cat "$e")
	rm -f "$o" "$e"
}

# json_get KEY.PATH: reads stdin as JSON and prints one member (Python, so the parser under test is not the judge).
json_get() {
	python3 -c '
import json, sys
v = json.load(sys.stdin)
for k in sys.argv[1].split("."):
    v = v[int(k)] if isinstance(v, list) else v[k]
print(json.dumps(v) if not isinstance(v, str) else v)' "$1"
}

# wait_for DESCRIPTION CMD...: retries CMD for up to 10 s (PipeWire acts shortly after it acknowledges).
wait_for() {
	local what=$1 i
	shift
	for i in $(seq 1 200); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 0.05
	done
	echo "  timed out waiting for: $what" >&2
	return 1
}

summary() {
	echo "$passed passed, $failed failed"
	[ "$failed" -eq 0 ]
}

# events FILE TYPE [FIELD=VALUE...]: how many NDJSON lines of FILE have that type and fields.
events() {
	python3 - "$@" <<'PY'
import json, sys
path, kind, *conds = sys.argv[1:]
n = 0
for line in open(path):
    try:
        e = json.loads(line)
    except ValueError:
        continue
    if e.get("type") != kind:
        continue
    ok = True
    for c in conds:
        k, v = c.split("=", 1)
        val = e
        for part in k.split("."):
            val = val.get(part) if isinstance(val, dict) else None
        if str(val).lower() != v.lower():
            ok = False
    n += ok
print(n)
PY
}

# wait_event FILE COUNT TYPE [FIELD=VALUE...]: waits until at least COUNT such events were printed.
wait_event() {
	local file=$1 count=$2
	shift 2
	for _ in $(seq 1 200); do
		[ "$(events "$file" "$@")" -ge "$count" ] && return 0
		sleep 0.05
	done
	echo "  timed out waiting for $count x $* in $file" >&2
	return 1
}

# expect_same NAME CMD_A... -- CMD_B...: both exit 0, print something, and print the same.
expect_same() {
	local name=$1 a=() ra oa
	shift
	while [ "$1" != "--" ]; do a+=("$1"); shift; done
	shift
	run_rc "${a[@]}"
	ra=$rc oa=$out
	run_rc "$@"
	if [ "$ra" = 0 ] && [ "$rc" = 0 ] && [ -n "$oa" ] && [ "$oa" = "$out" ]; then ok "$name"; else
		not_ok "$name" "first:  exit $ra: $(printf '%s' "$oa" | head -3)" "second: exit $rc: $(printf '%s' "$out" | head -3)"
	fi
}

# expect_rc NAME EXPECTED: the status of the last run_rc; on a mismatch, its stderr says why.
expect_rc() {
	if [ "$2" = "$rc" ]; then ok "$1"; else not_ok "$1" "expected exit $2, got $rc" "stderr: $err"; fi
}
