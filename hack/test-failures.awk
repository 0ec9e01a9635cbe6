# test-failures.awk reads the output of go test runs (go test, or test
# binaries run directly) and prints, for each test that failed, its name
# and the first line it printed, so that a failed make test says in its
# summary what failed and why without a search through its whole log.
# Panics, timeouts and packages that failed to build are printed as they
# are. A parent test whose failure is only that of its subtests is not
# printed: its subtests are.
#
# Usage: awk -f hack/test-failures.awk LOG...

# indent is the number of spaces a line starts with.
function indent(line) {
  match(line, /^ */)
  return RLENGTH
}

# settle prints the pending failed test when it printed nothing of its
# own and had no failed subtest: t.Fail() alone, say.
function settle() {
  if (pending != "" && !children)
    print "  " pending ": (printed nothing)"
  pending = ""
}

/^ *--- FAIL: / {
  if (pending != "" && indent($0) > pending_indent)
    children = 1
  settle()
  pending = $3
  pending_indent = indent($0)
  children = 0
  next
}

pending != "" && indent($0) == pending_indent + 4 && $0 !~ /^ *--- / {
  line = $0
  sub(/^ +/, "", line)
  print "  " pending ": " line
  pending = ""
  next
}

pending != "" && indent($0) <= pending_indent {
  settle()
}

/^panic: / || /^panic\(/ || /test timed out after/ || /\[(build|setup) failed\]$/ {
  print "  " $0
}

END { settle() }
